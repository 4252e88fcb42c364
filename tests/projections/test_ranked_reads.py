"""Ranked reads (get_relevant and the prompt path) equal a straightforward ranking of the read
model: every visible row, its tags counted from the tag table, sorted in one go."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eventlog import MAX_CONTENT_BYTES, NewEvent, QuarantineApplied, QuarantineReleased
from eventlog.checks import MAX_POSITION
from projections import (
    CrossTaskKB,
    MemoryTrustPolicy,
    SQLiteMemoryStore,
    load_persistent_memory,
    recall_memory,
)
from projections import _prompt as prompt_module
from projections import _reads as reads
from projections import _sql as sql
from projections._projector import fold
from projections._tables import table_rows
from projections._trust import (
    QUARANTINED,
    UNTAGGED_NOT_TRUSTED,
    UNTRUSTED_ADAPTER,
)
from projections.internal import (
    ScratchDatabase,
    default_projectors,
)

pytestmark = pytest.mark.read_models

TAGS = ["a", "b", "c", "d"]
ADAPTERS = [None, "codex", "claude-code"]
Rank = tuple[int, float, int]

OPERATIONS = st.lists(
    st.one_of(
        st.tuples(
            st.just("add"),
            st.lists(st.sampled_from(TAGS), max_size=3),
            st.sampled_from([0.0, 0.25, 0.5, 1.0]),
            st.sampled_from(ADAPTERS),
        ),
        st.tuples(st.just("publish"), st.sampled_from(TAGS[:2]), st.sampled_from(["k1", "k2"])),
        st.tuples(st.just("remove"), st.integers(1, 40)),
        st.tuples(st.just("decay"), st.sampled_from([0.5, 0.0])),
        st.tuples(st.just("quarantine"), st.sampled_from(ADAPTERS[1:])),
        st.tuples(st.just("quarantine_position"), st.integers(1, 40)),
        st.tuples(st.just("release")),
    ),
    max_size=40,
)
QUERIES = st.lists(
    st.tuples(
        st.lists(st.sampled_from([*TAGS, "e"]), max_size=4, unique=True),
        st.integers(1, 6),
        st.sampled_from([None, ["codex"], ["codex", "claude-code"], ["nobody"]]),
    ),
    min_size=1,
    max_size=6,
)
POLICIES = st.sampled_from(
    [
        MemoryTrustPolicy(),
        MemoryTrustPolicy(trusted_adapters=frozenset({"codex"})),
        MemoryTrustPolicy(trust_untagged=False, trusted_adapters=frozenset({"claude-code"})),
        MemoryTrustPolicy(trust_untagged=False),
        MemoryTrustPolicy(enabled=False),
    ]
)
SEARCH_SETTINGS = st.sampled_from([(1, 1, 1, 1), (2, 3, 2, 2), (32, 4096, 8, 500)])
"""(FIRST_CHUNK, SIZE_COUNT_CAP, COUNT_AHEAD, ID_BATCH): tiny values make every search read
lists in many chunks, break ties between capped sizes, and fetch entries in batches."""


def apply(store: SQLiteMemoryStore, operations: Sequence[tuple[Any, ...]]) -> None:
    kb = CrossTaskKB(store, run_id="run-1", producer_task_id="task")
    quarantines: list[int] = []
    for op in operations:
        if op[0] == "add":
            store.add("learning", f"note {len(op[1])}", op[1], op[2], source_adapter=op[3])
        elif op[0] == "publish":
            kb.publish(op[1], op[2], "value", scope="project")
        elif op[0] == "remove":
            store.remove(op[1])
        elif op[0] == "decay":
            store.decay_importance(op[1])
        elif op[0] in ("quarantine", "quarantine_position"):
            selector: dict[str, Any] = (
                {"match_source_adapter": op[1]}
                if op[0] == "quarantine"
                else {"match_positions": (op[1],)}
            )
            event = NewEvent(payload=QuarantineApplied(reason="r", **selector))
            quarantines.append(store._append([event])[0].position)
        elif quarantines:
            release = QuarantineReleased(quarantine_position=quarantines.pop(0), reason="r")
            store._append([NewEvent(payload=release)])


class LiveReadModel:
    """The read model's rows, ranked without any cleverness."""

    def __init__(self, store: SQLiteMemoryStore) -> None:
        with store.snapshot() as snap:
            self.rows = snap.execute("SELECT id, importance, hidden, source_adapter FROM fl_memory")
            self.tags = snap.execute("SELECT tag, entry_id FROM fl_memory_tag")

    def ranked(self, tags: Sequence[str], keep: Any) -> list[tuple[Rank, tuple[Any, ...]]]:
        shared = Counter(entry_id for tag, entry_id in self.tags if tag in tags)
        ranked = [
            ((shared[row[0]], row[1], row[0]) if tags else (0, 0.0, row[0]), row)
            for row in self.rows
            if keep(row) and (shared[row[0]] or not tags)
        ]
        return sorted(ranked, key=lambda item: item[0], reverse=True)

    def relevant(self, tags: Sequence[str], limit: int, adapters: list[str] | None) -> list[int]:
        def keep(row: tuple[Any, ...]) -> bool:
            return row[2] == 0 and (adapters is None or row[3] in adapters)

        return [row[0] for _, row in self.ranked(tags, keep)][:limit]

    def receipt(
        self, tags: Sequence[str], limit: int, policy: MemoryTrustPolicy, refused_scan: int
    ) -> tuple[list[int], list[tuple[int, str]]]:
        """What the prompt path chose before it was one pass: a trusted top-k, a refused top
        `refused_scan`, then only the refused ranked above the last trusted one."""

        def trusted(row: tuple[Any, ...]) -> bool:
            if row[2] != 0:
                return False
            if not policy.enabled:
                return True
            return policy.trust_untagged if row[3] is None else row[3] in policy.trusted_adapters

        shown = self.ranked(tags, lambda row: row[2] & 2 == 0)
        included = [item for item in shown if trusted(item[1])][:limit]
        refused = [item for item in shown if not trusted(item[1])][:refused_scan]
        if len(included) >= limit:
            refused = [item for item in refused if item[0] > included[-1][0]]
        return [row[0] for _, row in included], [(row[0], reason(row)) for _, row in refused]


def reason(row: tuple[Any, ...]) -> str:
    if row[2] & 1:
        return QUARANTINED
    return UNTAGGED_NOT_TRUSTED if row[3] is None else UNTRUSTED_ADAPTER


@contextmanager
def search_settings(
    first_chunk: int, count_cap: int, count_ahead: int, id_batch: int
) -> Iterator[None]:
    with (
        mock.patch.object(reads, "FIRST_CHUNK", first_chunk),
        mock.patch.object(reads, "SIZE_COUNT_CAP", count_cap),
        mock.patch.object(reads, "COUNT_AHEAD", count_ahead),
        mock.patch.object(sql, "ID_BATCH", id_batch),
    ):
        yield


@settings(max_examples=150, deadline=None)
@given(operations=OPERATIONS, queries=QUERIES, search=SEARCH_SETTINGS)
def test_get_relevant_equals_the_plain_ranking(
    operations: list[tuple[Any, ...]],
    queries: list[tuple[list[str], int, list[str] | None]],
    search: tuple[int, int, int, int],
) -> None:
    """Same entries, same order: shared tags, then importance, then newest; hidden rows and
    rows outside the allow-list never; with no tags, the newest."""
    with SQLiteMemoryStore(":memory:") as store:
        apply(store, operations)
        model = LiveReadModel(store)
        with search_settings(*search):
            for tags, limit, adapters in queries:
                got = store.get_relevant(tags, limit, read_only_from_adapters=adapters)
                assert model.relevant(tags, limit, adapters) == [e.id for e in got]


@settings(max_examples=150, deadline=None)
@given(
    operations=OPERATIONS,
    queries=QUERIES,
    policy=POLICIES,
    refused_scan=st.sampled_from([1, 3, 200]),
    search=SEARCH_SETTINGS,
)
def test_prompt_receipts_equal_the_two_query_selection(
    operations: list[tuple[Any, ...]],
    queries: list[tuple[list[str], int, list[str] | None]],
    policy: MemoryTrustPolicy,
    refused_scan: int,
    search: tuple[int, int, int, int],
) -> None:
    """The prompt path includes and excludes exactly what a trusted top-k plus a refused
    top-n, cut at the last trusted entry, would: same positions, order and reasons."""
    with SQLiteMemoryStore(":memory:") as store:
        apply(store, operations)
        model = LiveReadModel(store)
        with (
            search_settings(*search),
            mock.patch.object(prompt_module, "REFUSED_SCAN", refused_scan),
        ):
            for tags, limit, _ in queries:
                load_persistent_memory(store, tags, trust_policy=policy, limit=limit)
                receipt = list(store.event_log.read())[-1].payload
                included, excluded = model.receipt(tags, limit, policy, refused_scan)
                assert included == list(receipt.included)  # type: ignore[union-attr]
                assert excluded == [
                    (e.position, e.reason)
                    for e in receipt.excluded  # type: ignore[union-attr]
                ]


MANY_ENTRIES = st.lists(
    st.tuples(
        st.lists(st.sampled_from(TAGS), min_size=1, max_size=4, unique=True),
        st.sampled_from([0.25, 0.5, 1.0]),
        st.sampled_from(ADAPTERS),
    ),
    min_size=20,
    max_size=160,
)
WIDE_QUERIES = st.lists(
    st.tuples(
        st.lists(st.sampled_from(TAGS), min_size=2, max_size=4, unique=True), st.integers(1, 4)
    ),
    min_size=1,
    max_size=4,
)


@settings(max_examples=100, deadline=None)
@given(entries=MANY_ENTRIES, queries=WIDE_QUERIES, policy=POLICIES, search=SEARCH_SETTINGS)
def test_searches_reading_on_past_a_held_limit_equal_the_plain_ranking(
    entries: list[tuple[list[str], float, str | None]],
    queries: list[tuple[list[str], int]],
    policy: MemoryTrustPolicy,
    search: tuple[int, int, int, int],
) -> None:
    """Many entries under few tags, queried by several: searches that hold their limit early
    and read on only rows that could displace the worst of it rank and receipt exactly as
    the plain ranking does."""
    rows = [
        {"type": "learning", "content": f"n{i}", "tags": t, "importance": w, "source_adapter": a}
        for i, (t, w, a) in enumerate(entries)
    ]
    with SQLiteMemoryStore(":memory:") as store:
        store.add_many(rows)
        model = LiveReadModel(store)
        with search_settings(*search):
            for tags, limit in queries:
                got = store.get_relevant(tags, limit)
                assert model.relevant(tags, limit, None) == [e.id for e in got]
                made = recall_memory(store, tags, trust_policy=policy, limit=limit)
                included, excluded = model.receipt(tags, limit, policy, prompt_module.REFUSED_SCAN)
                assert included == list(made.included)
                assert excluded == [(e.position, e.reason) for e in made.excluded]


def test_entries_sharing_more_tags_outrank_more_important_ones(store: SQLiteMemoryStore) -> None:
    """Many popular-tag rows read in chunks never push out the few sharing every query tag."""
    rows = [{"type": "learning", "content": f"p{i}", "tags": ["pop"]} for i in range(300)]
    store.add_many(rows)
    both = store.add("learning", "both", ["pop", "rare"], importance=0.1)
    rare = store.add("learning", "rare only", ["rare"])
    with search_settings(4, 8, 0, 500):
        got = store.get_relevant(["pop", "rare"], limit=3)
    assert [both, rare, 300] == [e.id for e in got]


def test_counting_tag_lists_costs_a_bounded_share_of_the_reading(
    store: SQLiteMemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two long lists of refused rows, meeting once at a trusted row far down, make a prompt
    search read far: each list is counted only up to a multiple of the rows read so far,
    never in full (a full count of a common tag grew with the log), and the shorter list is
    still told apart and read first."""
    rows = [
        {"type": "learning", "content": f"a{i}", "tags": ["long"], "source_adapter": "codex"}
        for i in range(600)
    ]
    rows += [
        {"type": "learning", "content": f"b{i}", "tags": ["longer"], "source_adapter": "codex"}
        for i in range(900)
    ]
    store.add_many(rows)
    both = store.add(
        "learning", "both", ["long", "longer"], importance=0.1, source_adapter="claude-code"
    )
    caps: list[int] = []
    taken: Counter[str] = Counter()
    count, read = reads._TagList.count, reads._TagList.read

    def counting(self: Any, db: Any, cap: int) -> int:
        caps.append(cap)
        return count(self, db, cap)

    def reading(self: Any, *args: Any) -> Any:
        rows = read(self, *args)
        taken[self.tag] += len(rows)
        return rows

    monkeypatch.setattr(reads._TagList, "count", counting)
    monkeypatch.setattr(reads._TagList, "read", reading)
    policy = MemoryTrustPolicy(trusted_adapters=frozenset({"claude-code"}))
    with search_settings(4, 8, 2, 500):
        made = recall_memory(store, ["long", "longer"], trust_policy=policy, limit=1)
    assert (both,) == made.included
    assert caps == sorted(caps) and caps[-1] > 8, "the cap grows as the search reads"
    assert max(caps) <= 2 * 2 * sum(taken.values()) < MAX_POSITION
    assert taken["long"] == 601 and taken["longer"] < 900, "the shorter list is read out"


def test_of_lists_longer_than_the_cap_the_sparser_top_is_read_first(
    store: SQLiteMemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lists that outgrow the cap tie on size; the one whose cap-th entry ranks lower (the
    sparser top) is read first, not the first named (in a large log every common tag
    outgrows the cap)."""
    rows = []
    for i in range(600):
        rows.append({"type": "learning", "content": f"d{i}", "tags": ["dense"]})
        if i % 4 == 0:
            rows.append({"type": "learning", "content": f"s{i}", "tags": ["sparse"]})
    store.add_many(rows)
    both = store.add("learning", "both", ["dense", "sparse"], importance=0.1)
    order: list[str] = []
    read = reads._TagList.read

    def reading(self: Any, *args: Any) -> Any:
        order.append(self.tag)
        return read(self, *args)

    monkeypatch.setattr(reads._TagList, "read", reading)
    with search_settings(4, 8, 0, 500):
        got = store.get_relevant(["dense", "sparse"], limit=1)
    assert [both] == [e.id for e in got]
    assert "sparse" == order[0]


def test_once_the_limit_is_held_rows_that_cannot_displace_the_worst_are_stepped_over(
    store: SQLiteMemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two long lists that meet once, far down: once rows sharing one tag hold the limit, a
    search reads only rows sharing both (found through the tag index), not the hundreds in
    between, which reading every row took (its cost grew with the lists)."""
    rows = [{"type": "learning", "content": f"a{i}", "tags": ["long"]} for i in range(600)]
    rows += [{"type": "learning", "content": f"b{i}", "tags": ["longer"]} for i in range(900)]
    store.add_many(rows)
    both = store.add("learning", "both", ["long", "longer"], importance=0.1)
    taken: Counter[str] = Counter()
    read = reads._TagList.read

    def reading(self: Any, *args: Any) -> Any:
        rows = read(self, *args)
        taken[self.tag] += len(rows)
        return rows

    monkeypatch.setattr(reads._TagList, "read", reading)
    with search_settings(4, 8, 2, 500):
        got = store.get_relevant(["long", "longer"], limit=2)
    assert [both, len(rows)] == [e.id for e in got]
    assert sum(taken.values()) <= 10


def test_a_limit_beyond_every_entry_returns_them_all(store: SQLiteMemoryStore) -> None:
    """The largest limit SQLite can hold ranks every matching entry, with or without tags."""
    ids = [store.add("learning", f"n{i}", ["x"], importance=0.5) for i in range(5)]
    assert ids[::-1] == [e.id for e in store.get_relevant(["x"], MAX_POSITION)]
    assert ids[::-1] == [e.id for e in store.get_relevant([], MAX_POSITION)]


def test_decayed_entries_keep_their_rank_and_can_still_be_removed(
    store: SQLiteMemoryStore,
) -> None:
    """Decay scales every importance alike; a removed entry, decayed or not, never surfaces."""
    low = store.add("learning", "low", ["x"], importance=0.2)
    high = store.add("learning", "high", ["x"], importance=0.8)
    store.decay_importance(0.5)
    assert [high, low] == [e.id for e in store.get_relevant(["x"])]
    assert store.remove(high)
    assert [low] == [e.id for e in store.get_relevant(["x"])]
    with store.snapshot() as snap:
        assert [("x", 0.1, low)] == snap.execute("SELECT * FROM fl_memory_tag")


def test_content_is_read_only_for_entries_that_make_the_cut(store: SQLiteMemoryStore) -> None:
    """Ranked results carry their full entries, including large content."""
    big = "x" * MAX_CONTENT_BYTES
    entry_id = store.add("learning", big, ["t"])
    assert [(entry_id, big)] == [(e.id, e.content) for e in store.get_relevant(["t"])]


FACT_BATCHES = st.lists(
    st.one_of(
        st.lists(
            st.tuples(
                st.sampled_from(TAGS[:2]),
                st.sampled_from(["k1", "k2", "k3"]),
                st.sampled_from(["run", "project"]),
                st.sampled_from(ADAPTERS),
            ),
            min_size=1,
            max_size=6,
        ),
        st.tuples(st.just("add"), st.sampled_from(ADAPTERS)),
        st.tuples(st.just("quarantine"), st.sampled_from(ADAPTERS[1:])),
        st.tuples(st.just("release")),
    ),
    max_size=12,
)


def fold_one_by_one(store: SQLiteMemoryStore) -> dict[str, list[tuple[Any, ...]]]:
    """Every projector table, folding each event on its own."""
    scratch = ScratchDatabase()
    projectors = default_projectors(store.event_log.log_id)
    fold(scratch, projectors, [])
    for record in store.event_log.read():
        for projector in projectors:
            projector.apply(scratch, [record])
    return {t: list(table_rows(scratch, t)) for p in projectors for t in p.tables}


def fold_in_one_batch(store: SQLiteMemoryStore) -> dict[str, list[tuple[Any, ...]]]:
    scratch = ScratchDatabase()
    projectors = default_projectors(store.event_log.log_id)
    fold(scratch, projectors, store.event_log.read())
    return {t: list(table_rows(scratch, t)) for p in projectors for t in p.tables}


def live(store: SQLiteMemoryStore) -> dict[str, list[tuple[Any, ...]]]:
    with store.snapshot() as snap:
        return {
            t: list(table_rows(snap, t))
            for p in default_projectors(store.event_log.log_id)
            for t in p.tables
        }


@settings(max_examples=100, deadline=None)
@given(batches=FACT_BATCHES)
def test_facts_fold_alike_one_by_one_in_batches_and_inline(
    batches: list[Any],
) -> None:
    """Publishing in batches (repeated identities included, quarantines between) leaves the
    same tables as folding every event alone, and as refolding the whole log at once."""
    with SQLiteMemoryStore(":memory:") as store:
        quarantines: list[int] = []
        for batch in batches:
            if isinstance(batch, list):
                for tag, key, scope, adapter in batch:
                    facade = CrossTaskKB(store, run_id="run-1", producer_task_id=f"t-{key}")
                    facade.publish_many([(tag, key, "v")], scope=scope, source_adapter=adapter)
                facade = CrossTaskKB(store, run_id="run-1", producer_task_id="batch")
                facade.publish_many(
                    [(tag, key, f"v{i}") for i, (tag, key, _, _) in enumerate(batch)],
                    scope="project",
                )
            elif batch[0] == "add":
                store.add("learning", "note", ["a"], source_adapter=batch[1])
            elif batch[0] == "quarantine":
                event = NewEvent(
                    payload=QuarantineApplied(reason="r", match_source_adapter=batch[1])
                )
                quarantines.append(store._append([event])[0].position)
            elif quarantines:
                release = QuarantineReleased(quarantine_position=quarantines.pop(), reason="r")
                store._append([NewEvent(payload=release)])
        expected = fold_one_by_one(store)
        assert expected == fold_in_one_batch(store)
        assert expected == live(store)


def test_publish_many_warns_for_every_overwrite_in_the_batch(
    store: SQLiteMemoryStore, caplog: pytest.LogCaptureFixture
) -> None:
    """Each version that replaces another, earlier in the batch or before it, is reported
    with the position and producer it replaced."""
    CrossTaskKB(store, producer_task_id="first").publish("t", "k", "v0", scope="project")
    facade = CrossTaskKB(store, producer_task_id="second")
    caplog.set_level(logging.INFO, logger="factledger")
    caplog.clear()
    facade.publish_many([("t", "k", "v1"), ("t", "new", "v"), ("t", "k", "v2")], scope="project")
    assert [(1, "first", 2), (2, "second", 4)] == [
        (r.previous_position, r.previous_producer, r.position)
        for r in caplog.records
        if r.msg == "fact_overwritten"
    ]
    assert ["v2", "v"] == [f.value for f in facade.subscribe("t", scope="project")]
