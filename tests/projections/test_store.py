"""SQLiteMemoryStore: the store API, every write an event and every read a projection."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from eventlog import (
    InvalidInputError,
    InvalidTypeError,
    MemoryRemoved,
    MemoryReweighted,
    ReadOnlyStoreError,
)
from projections import (
    MemoryEntry,
    SQLiteMemoryStore,
)
from projections.internal import (
    MEMORY_TYPES,
)
from tests.conftest import Clock
from tests.salted import expected_content_hash

pytestmark = pytest.mark.read_models

StoreFactory = Callable[..., SQLiteMemoryStore]


def test_opening_creates_parent_folders(db_path: Path, store: SQLiteMemoryStore) -> None:
    """The database and its missing parent folders are created on open."""
    assert db_path.exists()
    assert db_path == store.db_path


def test_add_returns_the_entry_id_and_reads_it_back(store: SQLiteMemoryStore) -> None:
    """add returns the entry id (its log position); list shows every field."""
    entry_id = store.add("convention", "use ruff", ["python", "lint"], 0.7, "task-1")
    [entry] = store.list()
    assert 1 == entry_id == entry.id == entry.position
    assert ("convention", "use ruff", ["python", "lint"], 0.7, "task-1", None) == (
        entry.type,
        entry.content,
        entry.tags,
        entry.importance,
        entry.task_id,
        entry.source_adapter,
    )
    assert expected_content_hash(store.event_log, 1, "use ruff") == entry.content_hash


def test_every_listed_memory_type_is_accepted(store: SQLiteMemoryStore) -> None:
    """All seven memory types of the replaced store are accepted."""
    for kind in sorted(MEMORY_TYPES):
        store.add(kind, f"a {kind}")
    assert MEMORY_TYPES == {e.type for e in store.list()}
    assert {"procedural"} == {e.type for e in store.list(type="procedural")}


def test_unknown_type_is_refused(store: SQLiteMemoryStore) -> None:
    """Any other type is a clear error, and nothing is written."""
    with pytest.raises(InvalidInputError, match="unknown memory type 'note'"):
        store.add("note", "x")
    assert [] == store.list()


def test_handle_adapter_is_stamped_unless_the_write_names_one(
    make_store: StoreFactory,
) -> None:
    """A handle bound to an adapter stamps it on writes that name none of their own."""
    bound = make_store(source_adapter="codex")
    bound.add("learning", "a")
    bound.add("learning", "b", source_adapter="gemini-cli")
    assert ["gemini-cli", "codex"] == [e.source_adapter for e in bound.list()]


def test_list_is_newest_first_and_limited(store: SQLiteMemoryStore) -> None:
    """list returns newest first, at most `limit` entries."""
    for i in range(5):
        store.add("learning", f"n{i}")
    assert ["n4", "n3", "n2"] == [e.content for e in store.list(limit=3)]


def test_tags_match_exactly_never_by_substring(store: SQLiteMemoryStore) -> None:
    """A tag filter matches whole tags only: 'api' does not match 'api-schema'."""
    store.add("learning", "schema", ["api-schema"])
    store.add("learning", "api", ["api"])
    store.add("learning", "rapid", ["rapid"])
    assert ["api"] == [e.content for e in store.list(tags=["api"])]
    assert ["schema"] == [e.content for e in store.query(tags=["api-schema"])]


@pytest.mark.parametrize("wildcard", ["%", "_", "a%", "a_b"])
def test_like_wildcards_are_ordinary_tag_characters(
    store: SQLiteMemoryStore, wildcard: str
) -> None:
    """'%' and '_' in a tag match only themselves."""
    store.add("learning", "plain", ["ab", "axb", "a"])
    store.add("learning", "literal", [wildcard])
    assert ["literal"] == [e.content for e in store.list(tags=[wildcard])]


def test_tag_filter_matches_any_of_the_tags(store: SQLiteMemoryStore) -> None:
    """Several filter tags select entries having any one of them."""
    store.add("learning", "a", ["x"])
    store.add("learning", "b", ["y"])
    store.add("learning", "c", ["z"])
    assert ["b", "a"] == [e.content for e in store.list(tags=["x", "y"])]


@pytest.mark.parametrize(
    ("tags", "message"),
    [
        ([""], "non-empty"),
        (["  "], "non-empty"),
        (["a,b"], "','"),
        ([" api"], "whitespace"),
        (["bad\x00tag"], "control"),
        (["tab\there"], "control"),
        (["x" * 201], "limit is 200"),
        ("api", "not a single tag string"),
        ([7], "must be str"),
    ],
)
def test_bad_tags_are_refused_on_write_and_read(
    store: SQLiteMemoryStore, tags: object, message: str
) -> None:
    """Malformed tags are clear errors in writes and in filters; nothing is written."""
    with pytest.raises((InvalidInputError, InvalidTypeError), match=message):
        store.add("learning", "x", tags)  # type: ignore[arg-type]
    with pytest.raises((InvalidInputError, InvalidTypeError), match=message):
        store.list(tags=tags)  # type: ignore[arg-type]
    assert [] == store.list()


def test_tag_limit_counts_distinct_tags(store: SQLiteMemoryStore) -> None:
    """Up to 64 distinct tags are accepted; repeats do not count; 65 distinct ones are refused."""
    store.add("learning", "repeats", ["same"] * 100)
    store.add("learning", "many", [f"t{i}" for i in range(64)])
    with pytest.raises(InvalidInputError, match="65 distinct tags"):
        store.add("learning", "too many", [f"t{i}" for i in range(65)])
    assert [["same"], 64] == [store.list()[1].tags, len(store.list()[0].tags)]


def test_allow_list_none_reads_every_row(store: SQLiteMemoryStore) -> None:
    """read_only_from_adapters=None returns every row, untagged ones included."""
    store.add("learning", "untagged")
    store.add("learning", "codex", source_adapter="codex")
    assert {"untagged", "codex"} == {e.content for e in store.query()}
    assert {"untagged", "codex"} == {e.content for e in store.get_relevant([])}


def test_allow_list_is_strict_and_excludes_untagged(store: SQLiteMemoryStore) -> None:
    """A non-empty allow-list returns only those adapters' rows, never untagged ones."""
    store.add("learning", "untagged", ["t"])
    store.add("learning", "codex", ["t"], source_adapter="codex")
    store.add("learning", "gemini", ["t"], source_adapter="gemini-cli")
    assert ["codex"] == [e.content for e in store.query(read_only_from_adapters=["codex"])]
    assert ["codex"] == [
        e.content for e in store.get_relevant(["t"], read_only_from_adapters=["codex"])
    ]


def test_empty_allow_list_returns_nothing(store: SQLiteMemoryStore) -> None:
    """read_only_from_adapters=[] fails closed: nothing is returned."""
    store.add("learning", "untagged", ["t"])
    store.add("learning", "codex", ["t"], source_adapter="codex")
    assert [] == store.query(read_only_from_adapters=[])
    assert [] == store.get_relevant(["t"], read_only_from_adapters=[])


def test_allow_list_given_as_a_string_is_refused(store: SQLiteMemoryStore) -> None:
    """A bare string (which would allow its characters) is a type error."""
    with pytest.raises(InvalidTypeError, match="not a single adapter name string"):
        store.query(read_only_from_adapters="codex")  # type: ignore[arg-type]


def test_get_relevant_ranks_by_shared_tags_importance_recency(store: SQLiteMemoryStore) -> None:
    """Ranking: number of shared tags, then importance, then newest."""
    one_tag_old = store.add("learning", "one-old", ["a"], 0.5)
    two_tags = store.add("learning", "two", ["a", "b"], 0.1)
    one_tag_new = store.add("learning", "one-new", ["b"], 0.5)
    important = store.add("learning", "important", ["a"], 0.9)
    store.add("learning", "unrelated", ["z"], 1.0)
    ranked = [e.id for e in store.get_relevant(["a", "b", "c"])]
    assert [two_tags, important, one_tag_new, one_tag_old] == ranked


def test_get_relevant_without_tags_returns_newest(store: SQLiteMemoryStore) -> None:
    """With no tags, get_relevant returns the newest entries."""
    for i in range(4):
        store.add("learning", f"n{i}", ["x"])
    assert ["n3", "n2"] == [e.content for e in store.get_relevant([], limit=2)]


def test_add_many_returns_ids_in_order(store: SQLiteMemoryStore) -> None:
    """add_many writes every row in one transaction and returns their ids in order."""
    ids = store.add_many(
        [
            {"type": "learning", "content": "a", "tags": ["x"]},
            {"type": "decision", "content": "b", "source_adapter": "codex", "importance": 0.2},
        ]
    )
    assert [1, 2] == ids
    assert [("b", "codex", 0.2), ("a", None, 1.0)] == [
        (e.content, e.source_adapter, e.importance) for e in store.list()
    ]


@pytest.mark.parametrize(
    ("bad_row", "error", "message"),
    [
        ({"type": "nope", "content": "x"}, InvalidInputError, r"rows\[1\]: unknown memory type"),
        ({"type": "learning", "content": 5}, InvalidTypeError, r"rows\[1\]: content must be str"),
        ({"type": "learning"}, InvalidInputError, r"rows\[1\] needs 'type' and 'content'"),
        ({"type": "learning", "content": "x", "colour": 1}, InvalidInputError, r"unknown keys"),
        ({"type": "learning", "content": "x", "tags": ["a,b"]}, InvalidInputError, r"rows\[1\]"),
        ("not a dict", InvalidTypeError, r"rows\[1\] must be a dict"),
    ],
)
def test_add_many_with_a_bad_row_writes_nothing(
    store: SQLiteMemoryStore, bad_row: object, error: type[Exception], message: str
) -> None:
    """A bad row in the middle rejects the whole batch, naming its index."""
    store.add("learning", "before")
    head = store.event_log.head()
    rows = [{"type": "learning", "content": "a"}, bad_row, {"type": "learning", "content": "c"}]
    with pytest.raises(error, match=message):
        store.add_many(rows)  # type: ignore[arg-type]
    assert head == store.event_log.head()
    assert ["before"] == [e.content for e in store.list()]


def test_add_many_of_nothing_writes_nothing(store: SQLiteMemoryStore) -> None:
    """An empty batch returns [] and appends no event."""
    assert [] == store.add_many([])
    assert 0 == store.event_log.head().position


def test_remove_hides_the_entry_but_the_log_keeps_it(store: SQLiteMemoryStore) -> None:
    """remove appends a tombstone; reads stop showing the entry; the log still has it."""
    kept = store.add("learning", "kept", ["t"])
    gone = store.add("learning", "gone", ["t"])
    assert store.remove(gone) is True
    assert store.remove(gone) is False
    assert store.remove(999) is False
    assert [kept] == [e.id for e in store.list()]
    assert [kept] == [e.id for e in store.get_relevant(["t"])]
    events = list(store.event_log.read())
    assert "gone" == events[gone - 1].payload.content  # type: ignore[union-attr]
    assert MemoryRemoved(entry_ids=(gone,), reason="removed") == events[-1].payload
    assert 3 == len(events)


def test_prune_removes_old_then_least_important(make_store: StoreFactory, clock: Clock) -> None:
    """prune drops entries past max_age_days, then keeps the max_entries most important."""
    store = make_store(clock_ns=clock)
    old = store.add("learning", "old", importance=1.0)
    clock.advance(40 * 86400)
    low = store.add("learning", "low", importance=0.1)
    high = store.add("learning", "high", importance=0.9)
    newer_high = store.add("learning", "newer-high", importance=0.9)
    assert 2 == store.prune(max_entries=2, max_age_days=30)
    assert [newer_high, high] == [e.id for e in store.list()]
    removal = list(store.event_log.read())[-1].payload
    assert MemoryRemoved(entry_ids=(old, low), reason="pruned") == removal
    assert 0 == store.prune(max_entries=2, max_age_days=30)


def test_decay_multiplies_importance_and_is_an_event(store: SQLiteMemoryStore) -> None:
    """decay_importance(rate) multiplies every importance by rate, as one logged event."""
    store.add("learning", "a", importance=0.8)
    store.add("learning", "b", importance=0.5)
    store.decay_importance(0.5)
    assert [0.25, 0.4] == [e.importance for e in store.list()]
    assert MemoryReweighted(factor=0.5) == list(store.event_log.read())[-1].payload


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda s: s.add("learning", 42), InvalidTypeError, "content must be str"),
        (
            lambda s: s.add("learning", "x", importance=1.5),
            InvalidInputError,
            "between 0.0 and 1.0",
        ),
        (lambda s: s.add("learning", "x", importance=float("nan")), InvalidInputError, "finite"),
        (lambda s: s.add("learning", "x", importance="high"), InvalidTypeError, "number"),
        (lambda s: s.add("learning", "x", task_id=""), InvalidInputError, "task_id"),
        (lambda s: s.add("learning", "x", source_adapter="a\nb"), InvalidInputError, "hold only"),
        (lambda s: s.add("learning", "\ud800"), InvalidInputError, "surrogate"),
        (lambda s: s.add("learning", "x" * (1024 * 1024 + 1)), InvalidInputError, "limit"),
        (lambda s: s.list(limit=0), InvalidInputError, "at least 1"),
        (lambda s: s.list(limit=-5), InvalidInputError, "at least 1"),
        (lambda s: s.list(limit="5"), InvalidTypeError, "limit must be int"),
        (lambda s: s.query(type="nope"), InvalidInputError, "unknown memory type"),
        (lambda s: s.remove(0), InvalidInputError, "entry_id"),
        (lambda s: s.remove("1"), InvalidTypeError, "entry_id"),
        (lambda s: s.prune(max_entries=-1), InvalidInputError, "max_entries"),
        (lambda s: s.prune(max_age_days=-1), InvalidInputError, "max_age_days"),
        (lambda s: s.decay_importance(1.5), InvalidInputError, "rate"),
        (lambda s: s.decay_importance(float("inf")), InvalidInputError, "finite"),
    ],
)
def test_bad_arguments_are_clear_errors_and_change_nothing(
    store: SQLiteMemoryStore,
    call: Callable[[SQLiteMemoryStore], object],
    error: type[Exception],
    message: str,
) -> None:
    """Each bad argument raises a clear error naming the problem; the log head is unchanged."""
    store.add("learning", "existing")
    head = store.event_log.head()
    with pytest.raises(error, match=message):
        call(store)
    assert head == store.event_log.head()


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE fl_memory SET source_adapter = NULL",
        "WITH q AS (SELECT 1) DELETE FROM fl_memory",
        "INSERT INTO fl_memory_tag (entry_id, tag) VALUES (1, 'planted')",
        "UPDATE fl_memory SET content = 'planted' RETURNING id",
        "DROP TABLE fl_memory_tag",
        "CREATE TABLE planted AS SELECT 1",
    ],
    ids=["update", "with-delete", "insert", "returning", "drop", "create"],
)
def test_a_query_through_a_read_or_a_write_transaction_cannot_write(
    store: SQLiteMemoryStore, statement: str
) -> None:
    """`snapshot().execute` and `write_transaction().execute` query the read model: a
    statement that writes is refused, whatever it starts with, and undone: the read model
    keeps its rows, and the store writes as before afterwards."""
    store.add("learning", "kept", ["t"], source_adapter="codex")
    with store.snapshot() as snap:
        with pytest.raises(ReadOnlyStoreError, match="may not write"):
            snap.execute(statement)
        assert [(1, "codex")] == snap.execute("SELECT id, source_adapter FROM fl_memory")
    with store.write_transaction() as tx:
        with pytest.raises(ReadOnlyStoreError, match="may not write"):
            tx.execute(statement)
        assert [(1, "codex")] == tx.execute("SELECT id, source_adapter FROM fl_memory")
    assert [("kept", ["t"], "codex")] == [
        (e.content, e.tags, e.source_adapter) for e in store.list()
    ]
    store.add("learning", "after")
    assert ["after", "kept"] == [e.content for e in store.list()]


def test_content_with_nul_and_unicode_round_trips(store: SQLiteMemoryStore) -> None:
    """Content is stored verbatim, NUL bytes and any Unicode included."""
    text = "a\x00b — 日本語 🙂 '; DROP TABLE fl_memory; --"
    store.add("learning", text)
    assert [text] == [e.content for e in store.list()]


def test_reopening_shows_the_same_state(make_store: StoreFactory) -> None:
    """A new handle on the same file reads exactly what the first one wrote."""
    store = make_store()
    store.add("learning", "a", ["x"])
    store.add("learning", "b", ["y"], source_adapter="codex")
    before = store.list()
    store.close()
    assert before == make_store().list()


def test_memory_entry_is_frozen(store: SQLiteMemoryStore) -> None:
    """Entries are immutable values."""
    store.add("learning", "a")
    entry = store.list()[0]
    with pytest.raises(AttributeError):
        entry.content = "b"  # type: ignore[misc]
    assert isinstance(entry, MemoryEntry)


def test_replaced_store_helpers(store: SQLiteMemoryStore) -> None:
    """add_episodic/semantic/procedural and query_for_task behave as they did."""
    store.add_episodic("fixed flaky test", "task-9", agent="a", model="m", tags=["tests"])
    store.add_semantic("repo uses src layout", tags=["layout"])
    store.add_procedural("run make test", tags=["backend"])
    [episodic] = store.list(type="episodic")
    assert (0.8, "task-9", "a", "m") == (
        episodic.importance,
        episodic.task_id,
        episodic.source_agent,
        episodic.source_model,
    )
    assert ["run make test"] == [
        e.content for e in store.query_for_task("backend", ["./backend/app.py"])
    ]
