"""Bad input: every public method of the store, the knowledge base, the trust policy and the
prompt path, fed garbage. Each gets a clear FactledgerError (a TypeError or ValueError
subclass where the input is of the wrong type or value) and nothing changes; legitimate
oddities (LIKE wildcards, SQL text, NUL in free text) simply work. Every write path refuses
adapter names, producer task ids and run ids that only look like ordinary ones (an agent's
reads too, which write receipts), and tags and fact keys holding invisible characters."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from eventlog import (
    MAX_CONTENT_BYTES,
    FactledgerError,
    InvalidInputError,
    InvalidTypeError,
)
from projections import (
    AgentIdentity,
    CrossTaskKB,
    MemoryEntry,
    MemoryTrustPolicy,
    SQLiteMemoryStore,
    active_trust_policy,
    load_persistent_memory,
    read_entries,
)
from replay import (
    Actor,
    Ledger,
    add_operator,
    checkpoint,
    generate_key,
    quarantine,
    release,
    remove_operator,
)
from replay.errors import KeyFileError, NotAuthorizedError
from tests.reliability.support import (
    assert_chain_verifies,
    assert_read_model_is_the_log_refolded,
    live_tables,
)
from tests.salted import expected_content_hash

HUGE = 10**20
"""Bigger than any SQLite integer."""
TOO_LONG = MAX_CONTENT_BYTES + 1
SURROGATE = "\ud800"
SQL = "'; DROP TABLE fl_events; --"
CHARSET = r"may hold only ASCII letters, digits and \._:-/@; "
LOOKALIKE_IDS = {
    "zero-width-space": ("claude\u200bcode", CHARSET + r"U\+200B ZERO WIDTH SPACE at index 6"),
    "byte-order-mark": ("\ufeffclaude-code", CHARSET + r"U\+FEFF"),
    "cyrillic-es": ("\u0441laude-code", CHARSET + r"U\+0441 CYRILLIC SMALL LETTER ES at index 0"),
    "unicode-hyphen": ("claude\u2010code", CHARSET + r"U\+2010 HYPHEN"),
    "space": ("claude code", CHARSET + r"U\+0020 SPACE"),
    "no-break-space": ("claude\u00a0code", CHARSET + r"U\+00A0"),
    "fullwidth": ("\uff43laude-code", CHARSET + r"U\+FF43"),
    "quote": ("t'--", CHARSET + r"U\+0027"),
    "too-long": ("a" * 129, "129 characters long; the limit is 128"),
}
"""Identifiers of who writes that look like (or hide) another one: each refused by name."""
INVISIBLE_TAGS = {
    "zero-width-space": "api\u200b",
    "variation-selector": "api\ufe0f",
    "variation-selector-supplement": "api\U000e0100",
    "hangul-filler": "\u3164",
    "halfwidth-hangul-filler": "a\uffa0pi",
    "combining-grapheme-joiner": "a\u034fpi",
    "unicode-tag": "api\U000e0041",
    "line-separator": "a\u2028pi",
    "bidi-override": "\u202eipa",
    "private-use": "api\ue000",
    "unassigned": "api\u0378",
}
"""Tags that print like another tag (or like nothing)."""


@dataclass
class Subject:
    """What a case acts on: a store with a few rows, a facade in a run, and a spare path."""

    store: SQLiteMemoryStore
    kb: CrossTaskKB
    spare_path: Path


@pytest.fixture
def subject(tmp_path: Path) -> Iterator[Subject]:
    store = SQLiteMemoryStore(tmp_path / "memory.db", durability="fast")
    kb = CrossTaskKB(store, run_id="run-1", producer_task_id="task-1")
    store.add("learning", "operator row", ["api"])
    store.add("learning", "codex row", ["api"], source_adapter="codex")
    kb.publish("api", "users", "v1", scope="project")
    yield Subject(store, kb, tmp_path / "spare" / "other.db")
    store.close()


Call = Callable[[Subject], object]
TYPE = InvalidTypeError
VALUE = InvalidInputError


def case(call: Call, error: type[FactledgerError], match: str, id: str) -> object:
    return pytest.param(call, error, match, id=id)


def entry(**changes: object) -> MemoryEntry:
    fields: dict[str, object] = {"id": 1, "type": "learning", "content": "x", "tags": []}
    fields.update(changes)
    fields.setdefault("created_at", 0.0)
    return MemoryEntry(**fields)  # type: ignore[arg-type]


def add(**changes: object) -> Call:
    arguments: dict[str, object] = {"type": "learning", "content": "x"}
    arguments.update(changes)
    return lambda s: s.store.add(**arguments)  # type: ignore[arg-type]


def row(**changes: object) -> dict[str, object]:
    fields: dict[str, object] = {"type": "learning", "content": "x"}
    fields.update(changes)
    return fields


def publish(tag: object = "t", key: object = "k", value: object = "v", **options: object) -> Call:
    options.setdefault("scope", "project")
    return lambda s: s.kb.publish(tag, key, value, **options)  # type: ignore[arg-type]


def store_at(**options: object) -> Call:
    def make(s: Subject) -> object:
        path = options.pop("db_path", s.spare_path)
        return SQLiteMemoryStore(path, **options)  # type: ignore[arg-type]

    return make


STORE_CASES = [
    # constructor
    case(store_at(db_path=123), TYPE, "path", "store-path-int"),
    case(store_at(db_path=None), TYPE, "path", "store-path-none"),
    case(store_at(db_path=b"memory.db"), TYPE, "path", "store-path-bytes"),
    case(store_at(db_path="mem\x00ory.db"), VALUE, "NUL", "store-path-nul"),
    case(store_at(db_path=f"memory{SURROGATE}.db"), VALUE, "path", "store-path-surrogate"),
    case(store_at(source_adapter=""), VALUE, "source_adapter", "store-adapter-empty"),
    case(store_at(source_adapter=7), TYPE, "source_adapter", "store-adapter-int"),
    case(store_at(durability="FAST"), VALUE, "durability", "store-durability-unknown"),
    case(store_at(clock_ns="now"), TYPE, "clock_ns", "store-clock-not-callable"),
    # add: type
    case(add(type=7), TYPE, "type", "add-type-int"),
    case(add(type=None), TYPE, "type", "add-type-none"),
    case(add(type=""), VALUE, "memory type", "add-type-empty"),
    case(add(type="Learning"), VALUE, "memory type", "add-type-wrong-case"),
    case(add(type="bogus"), VALUE, "memory type", "add-type-unknown"),
    case(add(type="learning\x00"), VALUE, "memory type", "add-type-nul"),
    case(add(type=SQL), VALUE, "memory type", "add-type-sql"),
    # add: content
    case(add(content=None), TYPE, "content", "add-content-none"),
    case(add(content=b"x"), TYPE, "content", "add-content-bytes"),
    case(add(content=7), TYPE, "content", "add-content-int"),
    case(add(content=SURROGATE), VALUE, "Unicode", "add-content-surrogate"),
    case(add(content="x" * TOO_LONG), VALUE, "limit", "add-content-huge"),
    case(add(content="é" * (TOO_LONG // 2 + 1)), VALUE, "limit", "add-content-huge-utf8"),
    case(add(content=""), VALUE, "content is empty or only whitespace", "add-content-empty"),
    case(add(content=" \t\r\n"), VALUE, "only whitespace", "add-content-blank"),
    case(add(content="\u3000\u2028\x85"), VALUE, "only whitespace", "add-content-unicode-blank"),
    case(
        lambda s: s.store.add_many(
            [{"type": "learning", "content": "x"}, {"type": "learning", "content": "  "}]
        ),
        VALUE,
        r"rows\[1\]: content is empty",
        "add-many-content-blank",
    ),
    case(lambda s: s.store.add_episodic("\n", "t"), VALUE, "only whitespace", "episodic-blank"),
    case(lambda s: s.store.add_semantic(""), VALUE, "only whitespace", "semantic-empty"),
    case(lambda s: s.store.add_procedural("\t"), VALUE, "only whitespace", "procedural-blank"),
    # add: tags
    case(add(tags="api"), TYPE, "tags", "add-tags-string"),
    case(add(tags=7), TYPE, "tags", "add-tags-int"),
    case(add(tags=[7]), TYPE, "tags", "add-tag-int"),
    case(add(tags=[None]), TYPE, "tags", "add-tag-none"),
    case(add(tags=[""]), VALUE, "tags", "add-tag-empty"),
    case(add(tags=["   "]), VALUE, "tags", "add-tag-blank"),
    case(add(tags=[" api"]), VALUE, "whitespace", "add-tag-padded"),
    case(add(tags=["a,b"]), VALUE, ",", "add-tag-comma"),
    case(add(tags=["a\x00b"]), VALUE, "NUL", "add-tag-nul"),
    case(add(tags=["a\nb"]), VALUE, "control", "add-tag-newline"),
    case(add(tags=[SURROGATE]), VALUE, "Unicode", "add-tag-surrogate"),
    case(add(tags=["x" * 201]), VALUE, "limit", "add-tag-too-long"),
    case(add(tags=[f"t{i}" for i in range(65)]), VALUE, "limit", "add-too-many-tags"),
    # add: importance
    case(add(importance=-0.1), VALUE, "importance", "add-importance-negative"),
    case(add(importance=1.5), VALUE, "importance", "add-importance-above-one"),
    case(add(importance=float("nan")), VALUE, "importance", "add-importance-nan"),
    case(add(importance=float("inf")), VALUE, "importance", "add-importance-inf"),
    case(add(importance=HUGE**20), VALUE, "importance", "add-importance-huge-int"),
    case(add(importance="1"), TYPE, "importance", "add-importance-string"),
    case(add(importance=True), TYPE, "importance", "add-importance-bool"),
    case(add(importance=None), TYPE, "importance", "add-importance-none"),
    # add: identifiers
    case(add(task_id=""), VALUE, "task_id", "add-task-empty"),
    case(add(task_id=7), TYPE, "task_id", "add-task-int"),
    case(add(task_id="t\x00"), VALUE, "task_id", "add-task-nul"),
    case(add(task_id=" t"), VALUE, "task_id", "add-task-padded"),
    case(add(task_id=SURROGATE), VALUE, "task_id", "add-task-surrogate"),
    case(add(task_id="t" * 129), VALUE, "task_id", "add-task-too-long"),
    case(add(source_adapter=""), VALUE, "source_adapter", "add-adapter-empty"),
    case(add(source_adapter=["codex"]), TYPE, "source_adapter", "add-adapter-list"),
    case(add(source_adapter="co\ndex"), VALUE, "source_adapter", "add-adapter-newline"),
    case(add(source_adapter=SURROGATE), VALUE, "source_adapter", "add-adapter-surrogate"),
    case(add(source_agent=None), TYPE, "source_agent", "add-agent-none"),
    case(add(source_model="m\x00"), VALUE, "source_model", "add-model-nul"),
    # add_many
    case(lambda s: s.store.add_many(None), TYPE, "rows", "add_many-none"),  # type: ignore[arg-type]
    case(lambda s: s.store.add_many("rows"), TYPE, "rows", "add_many-string"),  # type: ignore[arg-type]
    case(lambda s: s.store.add_many(row()), TYPE, "rows", "add_many-one-dict"),  # type: ignore[arg-type]
    case(lambda s: s.store.add_many([row(), 7]), TYPE, r"rows\[1\]", "add_many-row-int"),  # type: ignore[list-item]
    case(lambda s: s.store.add_many([{}]), VALUE, r"rows\[0\]", "add_many-row-empty"),
    case(
        lambda s: s.store.add_many([row(), row(bogus=1)]),
        VALUE,
        r"rows\[1\].*bogus",
        "add_many-unknown-key",
    ),
    case(
        lambda s: s.store.add_many([row(), {**row(), 1: "x", "zz": 2}]),  # type: ignore[dict-item]
        VALUE,
        r"rows\[1\]",
        "add_many-unknown-keys-of-mixed-types",
    ),
    case(
        lambda s: s.store.add_many([row(), row(), row(content=None)]),
        TYPE,
        r"rows\[2\]",
        "add_many-bad-content-last",
    ),
    case(
        lambda s: s.store.add_many([row(), row(content=SURROGATE), row()]),
        VALUE,
        r"rows\[1\]",
        "add_many-surrogate-content",
    ),
    case(
        lambda s: s.store.add_many([row(content="x" * TOO_LONG), row()]),
        VALUE,
        r"rows\[0\]",
        "add_many-huge-content",
    ),
    case(
        lambda s: s.store.add_many([row(), row(tags=["%", "a,b"])]),
        VALUE,
        r"rows\[1\]",
        "add_many-bad-tag",
    ),
    # remove, prune, decay
    case(lambda s: s.store.remove("1"), TYPE, "entry_id", "remove-string"),  # type: ignore[arg-type]
    case(lambda s: s.store.remove(None), TYPE, "entry_id", "remove-none"),  # type: ignore[arg-type]
    case(lambda s: s.store.remove(True), TYPE, "entry_id", "remove-bool"),
    case(lambda s: s.store.remove(1.0), TYPE, "entry_id", "remove-float"),  # type: ignore[arg-type]
    case(lambda s: s.store.remove(0), VALUE, "entry_id", "remove-zero"),
    case(lambda s: s.store.remove(-1), VALUE, "entry_id", "remove-negative"),
    case(lambda s: s.store.remove(HUGE), VALUE, "entry_id", "remove-huge"),
    case(lambda s: s.store.prune(max_entries=-1), VALUE, "max_entries", "prune-negative"),
    case(lambda s: s.store.prune(max_entries="5"), TYPE, "max_entries", "prune-string"),  # type: ignore[arg-type]
    case(lambda s: s.store.prune(max_entries=HUGE), VALUE, "max_entries", "prune-huge"),
    case(lambda s: s.store.prune(max_age_days=-1), VALUE, "max_age_days", "prune-age-negative"),
    case(
        lambda s: s.store.prune(max_age_days=float("nan")), VALUE, "max_age_days", "prune-age-nan"
    ),
    case(lambda s: s.store.prune(max_age_days="30"), TYPE, "max_age_days", "prune-age-string"),  # type: ignore[arg-type]
    case(lambda s: s.store.decay_importance(-0.1), VALUE, "rate", "decay-negative"),
    case(lambda s: s.store.decay_importance(1.1), VALUE, "rate", "decay-above-one"),
    case(lambda s: s.store.decay_importance(float("nan")), VALUE, "rate", "decay-nan"),
    case(lambda s: s.store.decay_importance("0.5"), TYPE, "rate", "decay-string"),  # type: ignore[arg-type]
    case(lambda s: s.store.decay_importance(None), TYPE, "rate", "decay-none"),  # type: ignore[arg-type]
    # list, query, get_relevant
    case(lambda s: s.store.list(type=7), TYPE, "type", "list-type-int"),  # type: ignore[arg-type]
    case(lambda s: s.store.list(type="bogus"), VALUE, "memory type", "list-type-unknown"),
    case(lambda s: s.store.list(tags="api"), TYPE, "tags", "list-tags-string"),  # type: ignore[arg-type]
    case(lambda s: s.store.list(tags=["a,b"]), VALUE, ",", "list-tag-comma"),
    case(lambda s: s.store.list(limit=0), VALUE, "limit", "list-limit-zero"),
    case(lambda s: s.store.list(limit=-5), VALUE, "limit", "list-limit-negative"),
    case(lambda s: s.store.list(limit=HUGE), VALUE, "limit", "list-limit-huge"),
    case(lambda s: s.store.list(limit=True), TYPE, "limit", "list-limit-bool"),
    case(lambda s: s.store.list(limit="10"), TYPE, "limit", "list-limit-string"),  # type: ignore[arg-type]
    case(lambda s: s.store.list(limit=None), TYPE, "limit", "list-limit-none"),  # type: ignore[arg-type]
    case(lambda s: s.store.list(limit=2.5), TYPE, "limit", "list-limit-float"),  # type: ignore[arg-type]
    case(
        lambda s: s.store.query(read_only_from_adapters="codex"),  # type: ignore[arg-type]
        TYPE,
        "adapter",
        "query-allow-string",
    ),
    case(
        lambda s: s.store.query(read_only_from_adapters=7),  # type: ignore[arg-type]
        TYPE,
        "adapter",
        "query-allow-int",
    ),
    case(
        lambda s: s.store.query(read_only_from_adapters=[""]),
        VALUE,
        "read_only_from_adapters",
        "query-allow-empty-name",
    ),
    case(
        lambda s: s.store.query(read_only_from_adapters=[None]),  # type: ignore[list-item]
        TYPE,
        "read_only_from_adapters",
        "query-allow-none-name",
    ),
    case(lambda s: s.store.query(limit=HUGE), VALUE, "limit", "query-limit-huge"),
    case(lambda s: s.store.get_relevant("api"), TYPE, "tags", "relevant-tags-string"),  # type: ignore[arg-type]
    case(lambda s: s.store.get_relevant([SURROGATE]), VALUE, "Unicode", "relevant-tag-surrogate"),
    case(lambda s: s.store.get_relevant(["api"], limit=0), VALUE, "limit", "relevant-limit-zero"),
    case(
        lambda s: s.store.get_relevant(["api"], limit=HUGE), VALUE, "limit", "relevant-limit-huge"
    ),
    case(
        lambda s: s.store.get_relevant(["api"], read_only_from_adapters="codex"),  # type: ignore[arg-type]
        TYPE,
        "adapter",
        "relevant-allow-string",
    ),
    # helpers of the replaced store
    case(lambda s: s.store.add_episodic(None, "t"), TYPE, "content", "episodic-content-none"),  # type: ignore[arg-type]
    case(lambda s: s.store.add_episodic("x", 7), TYPE, "task_id", "episodic-task-int"),  # type: ignore[arg-type]
    case(lambda s: s.store.add_semantic("x", importance=2), VALUE, "importance", "semantic-2"),
    case(lambda s: s.store.add_procedural("x", tags="api"), TYPE, "tags", "procedural-tags"),  # type: ignore[arg-type]
    case(lambda s: s.store.query_for_task(7, []), TYPE, "role", "for-task-role-int"),  # type: ignore[arg-type]
    case(
        lambda s: s.store.query_for_task("backend", None),  # type: ignore[arg-type]
        TYPE,
        "context_files",
        "for-task-files-none",
    ),
    case(
        lambda s: s.store.query_for_task("backend", "src/api.py"),  # type: ignore[arg-type]
        TYPE,
        "context_files",
        "for-task-files-string",
    ),
    case(
        lambda s: s.store.query_for_task("backend", [7]),  # type: ignore[list-item]
        TYPE,
        "context_files",
        "for-task-file-int",
    ),
    case(lambda s: s.store.query_for_task("backend", [], limit=0), VALUE, "limit", "for-task-0"),
]

KB_CASES = [
    # constructor
    case(lambda s: CrossTaskKB(None), TYPE, "store", "kb-store-none"),  # type: ignore[arg-type]
    case(lambda s: CrossTaskKB("memory.db"), TYPE, "store", "kb-store-path"),  # type: ignore[arg-type]
    case(lambda s: CrossTaskKB(s.store, run_id=None), TYPE, "run_id", "kb-run-none"),  # type: ignore[arg-type]
    case(lambda s: CrossTaskKB(s.store, run_id="r\x00"), VALUE, "run_id", "kb-run-nul"),
    case(lambda s: CrossTaskKB(s.store, run_id=" r"), VALUE, "run_id", "kb-run-padded"),
    case(
        lambda s: CrossTaskKB(s.store, producer_task_id=7),  # type: ignore[arg-type]
        TYPE,
        "producer_task_id",
        "kb-producer-int",
    ),
    case(lambda s: CrossTaskKB(s.store, source_adapter=""), VALUE, "source_adapter", "kb-adapter"),
    case(
        lambda s: CrossTaskKB(s.store, hook_dispatch="kb.fact_published"),  # type: ignore[arg-type]
        TYPE,
        "hook_dispatch",
        "kb-hook-not-callable",
    ),
    case(
        lambda s: CrossTaskKB(s.store, counter="counter"),  # type: ignore[arg-type]
        TYPE,
        "counter",
        "kb-counter-wrong-type",
    ),
    case(
        lambda s: CrossTaskKB(s.store, clock_ns=12),  # type: ignore[arg-type]
        TYPE,
        "clock_ns",
        "kb-clock-not-callable",
    ),
    # publish: tag
    case(publish(tag=""), VALUE, "tag", "publish-tag-empty"),
    case(publish(tag="   "), VALUE, "tag", "publish-tag-blank"),
    case(publish(tag="a,b"), VALUE, ",", "publish-tag-comma"),
    case(publish(tag="a\x00"), VALUE, "NUL", "publish-tag-nul"),
    case(publish(tag=SURROGATE), VALUE, "Unicode", "publish-tag-surrogate"),
    case(publish(tag="x" * 201), VALUE, "limit", "publish-tag-too-long"),
    case(publish(tag=7), TYPE, "tag", "publish-tag-int"),
    case(publish(tag=None), TYPE, "tag", "publish-tag-none"),
    # publish: key
    case(publish(key=""), VALUE, "key", "publish-key-empty"),
    case(publish(key="  "), VALUE, "key", "publish-key-blank"),
    case(publish(key="k\x00"), VALUE, "key", "publish-key-nul"),
    case(publish(key=SURROGATE), VALUE, "key", "publish-key-surrogate"),
    case(publish(key="k" * 257), VALUE, "key", "publish-key-too-long"),
    case(publish(key=7), TYPE, "key", "publish-key-int"),
    # publish: value
    case(publish(value=None), TYPE, "value", "publish-value-none"),
    case(publish(value=7), TYPE, "value", "publish-value-int"),
    case(publish(value=b"v"), TYPE, "value", "publish-value-bytes"),
    case(publish(value={"name": "str"}), TYPE, "value", "publish-value-dict"),
    case(publish(value=SURROGATE), VALUE, "Unicode", "publish-value-surrogate"),
    case(publish(value=""), VALUE, "value is empty or only whitespace", "publish-value-empty"),
    case(publish(value=" \n "), VALUE, "only whitespace", "publish-value-blank"),
    case(
        lambda s: s.kb.publish_many([("t", "a", "v"), ("t", "b", "\u3000")], scope="run"),
        VALUE,
        "value is empty or only whitespace",
        "publish-many-value-blank",
    ),
    case(publish(value="v" * TOO_LONG), VALUE, "limit", "publish-value-huge"),
    # publish: scope and adapter
    case(publish(scope="RUN"), VALUE, "scope", "publish-scope-wrong-case"),
    case(publish(scope="global"), VALUE, "scope", "publish-scope-unknown"),
    case(publish(scope=""), VALUE, "scope", "publish-scope-empty"),
    case(publish(scope=None), TYPE, "scope", "publish-scope-none"),
    case(
        lambda s: CrossTaskKB(s.store).publish("t", "k", "v", scope="run"),
        VALUE,
        "run_id",
        "publish-run-scope-without-run",
    ),
    case(publish(source_adapter=""), VALUE, "source_adapter", "publish-adapter-empty"),
    case(publish(source_adapter=7), TYPE, "source_adapter", "publish-adapter-int"),
    # publish_many
    case(
        lambda s: s.kb.publish_many(None, scope="project"),  # type: ignore[arg-type]
        TYPE,
        "items",
        "publish_many-none",
    ),
    case(
        lambda s: s.kb.publish_many(7, scope="project"),  # type: ignore[arg-type]
        TYPE,
        "items",
        "publish_many-int",
    ),
    case(
        lambda s: s.kb.publish_many("tkv", scope="project"),  # type: ignore[arg-type]
        TYPE,
        "items",
        "publish_many-string",
    ),
    case(
        lambda s: s.kb.publish_many([("t", "k")], scope="project"),  # type: ignore[list-item]
        TYPE,
        r"items\[0\]",
        "publish_many-pair",
    ),
    case(
        lambda s: s.kb.publish_many([("t", "k", "v"), ("", "k", "v")], scope="project"),
        VALUE,
        "tag",
        "publish_many-bad-second",
    ),
    case(
        lambda s: s.kb.publish_many([("t", "k", "v"), ("t", "k", None)], scope="project"),  # type: ignore[list-item]
        TYPE,
        "value",
        "publish_many-value-none",
    ),
    case(
        lambda s: s.kb.publish_many([("t", "k", "v")], scope="everywhere"),
        VALUE,
        "scope",
        "publish_many-scope",
    ),
    # subscribe, history
    case(lambda s: s.kb.subscribe("", scope="project"), VALUE, "tag", "subscribe-tag-empty"),
    case(lambda s: s.kb.subscribe(7, scope="project"), TYPE, "tag", "subscribe-tag-int"),  # type: ignore[arg-type]
    case(lambda s: s.kb.subscribe("a,b", scope="project"), VALUE, ",", "subscribe-tag-comma"),
    case(lambda s: s.kb.subscribe("t", scope="everywhere"), VALUE, "scope", "subscribe-scope"),
    case(
        lambda s: s.kb.subscribe("t", scope="project", read_only_from_adapters="codex"),  # type: ignore[arg-type]
        TYPE,
        "adapter",
        "subscribe-allow-string",
    ),
    case(
        lambda s: s.kb.subscribe("t", scope="project", read_only_from_adapters=[""]),
        VALUE,
        "read_only_from_adapters",
        "subscribe-allow-empty-name",
    ),
    case(lambda s: s.kb.history("", "k", scope="project"), VALUE, "tag", "history-tag-empty"),
    case(lambda s: s.kb.history("t", "", scope="project"), VALUE, "key", "history-key-empty"),
    case(lambda s: s.kb.history("t", 7, scope="project"), TYPE, "key", "history-key-int"),  # type: ignore[arg-type]
    case(lambda s: s.kb.history("t", "k", scope="any"), VALUE, "scope", "history-scope"),
]

POLICY_CASES = [
    case(lambda s: MemoryTrustPolicy(enabled="yes"), TYPE, "enabled", "policy-enabled-str"),  # type: ignore[arg-type]
    case(lambda s: MemoryTrustPolicy(enabled=1), TYPE, "enabled", "policy-enabled-int"),  # type: ignore[arg-type]
    case(
        lambda s: MemoryTrustPolicy(trust_untagged=None),  # type: ignore[arg-type]
        TYPE,
        "trust_untagged",
        "policy-untagged-none",
    ),
    case(
        lambda s: MemoryTrustPolicy(trusted_adapters="codex"),  # type: ignore[arg-type]
        TYPE,
        "trusted_adapters",
        "policy-adapters-string",
    ),
    case(
        lambda s: MemoryTrustPolicy(trusted_adapters=None),  # type: ignore[arg-type]
        TYPE,
        "trusted_adapters",
        "policy-adapters-none",
    ),
    case(
        lambda s: MemoryTrustPolicy(trusted_adapters=frozenset({7})),  # type: ignore[arg-type]
        TYPE,
        "trusted_adapters",
        "policy-adapter-int",
    ),
    case(
        lambda s: MemoryTrustPolicy(trusted_adapters=frozenset({""})),
        VALUE,
        "trusted_adapters",
        "policy-adapter-empty",
    ),
    case(
        lambda s: MemoryTrustPolicy(trusted_adapters=frozenset({"co\x00dex"})),
        VALUE,
        "trusted_adapters",
        "policy-adapter-nul",
    ),
    case(
        lambda s: MemoryTrustPolicy(trusted_adapters=frozenset({SURROGATE})),
        VALUE,
        "trusted_adapters",
        "policy-adapter-surrogate",
    ),
    case(lambda s: MemoryTrustPolicy().is_trusted(None), TYPE, "MemoryEntry", "trusted-none"),  # type: ignore[arg-type]
    case(
        lambda s: MemoryTrustPolicy().is_trusted({"source_adapter": None}),  # type: ignore[arg-type]
        TYPE,
        "MemoryEntry",
        "trusted-dict",
    ),
    case(lambda s: MemoryTrustPolicy().filter_entries(None), TYPE, "entries", "filter-none"),  # type: ignore[arg-type]
    case(lambda s: MemoryTrustPolicy().filter_entries(7), TYPE, "entries", "filter-int"),  # type: ignore[arg-type]
    case(
        lambda s: MemoryTrustPolicy().filter_entries([entry(), "x"]),  # type: ignore[list-item]
        TYPE,
        "MemoryEntry",
        "filter-item-string",
    ),
]


def recall(*args: object, **options: object) -> Call:
    return lambda s: load_persistent_memory(s.store, *args, **options)  # type: ignore[arg-type]


def lookalike_id_cases() -> list[object]:
    """Every write path that names who writes, fed each lookalike identifier."""
    paths: dict[str, tuple[str, Callable[[str], Call]]] = {
        "store-adapter": ("source_adapter", lambda v: store_at(source_adapter=v)),
        "add-adapter": ("source_adapter", lambda v: add(source_adapter=v)),
        "add-task": ("task_id", lambda v: add(task_id=v)),
        "add_many-adapter": (
            "source_adapter",
            lambda v: lambda s: s.store.add_many([row(), row(source_adapter=v)]),
        ),
        "episodic-task": ("task_id", lambda v: lambda s: s.store.add_episodic("x", v)),
        "kb-run": ("run_id", lambda v: lambda s: CrossTaskKB(s.store, run_id=v)),
        "kb-producer": (
            "producer_task_id",
            lambda v: lambda s: CrossTaskKB(s.store, producer_task_id=v),
        ),
        "kb-adapter": (
            "source_adapter",
            lambda v: lambda s: CrossTaskKB(s.store, source_adapter=v),
        ),
        "publish-adapter": ("source_adapter", lambda v: publish(source_adapter=v)),
        "publish_many-adapter": (
            "source_adapter",
            lambda v: lambda s: s.kb.publish_many([("t", "k", "v")], scope="run", source_adapter=v),
        ),
    }
    return [
        case(make(value), VALUE, f"{field} .*{message}", f"{path}-{name}")
        for path, (field, make) in paths.items()
        for name, (value, message) in LOOKALIKE_IDS.items()
    ]


def invisible_tag_cases() -> list[object]:
    """Every path that takes a tag, fed each tag holding an invisible character."""
    paths: dict[str, Callable[[str], Call]] = {
        "add": lambda v: add(tags=["ok", v]),
        "add_many": lambda v: lambda s: s.store.add_many([row(), row(tags=[v])]),
        "publish": lambda v: publish(tag=v),
        "publish_many": lambda v: lambda s: s.kb.publish_many([(v, "k", "v")], scope="run"),
        "list": lambda v: lambda s: s.store.list(tags=[v]),
        "relevant": lambda v: lambda s: s.store.get_relevant([v]),
        "subscribe": lambda v: lambda s: s.kb.subscribe(v, scope="project"),
    }
    return [
        case(make(value), VALUE, r"tag.*invisible characters: U\+", f"{path}-tag-{name}")
        for path, make in paths.items()
        for name, value in INVISIBLE_TAGS.items()
    ]


def invisible_key_cases() -> list[object]:
    """Every path that takes a fact key, fed each key holding an invisible character: a key,
    like a tag, that prints like another is refused."""
    paths: dict[str, Callable[[str], Call]] = {
        "publish": lambda v: publish(key=v),
        "publish_many": lambda v: lambda s: s.kb.publish_many([("t", v, "v")], scope="run"),
        "history": lambda v: lambda s: s.kb.history("t", v, scope="project"),
    }
    return [
        case(make(f"users{value}"), VALUE, r"key .*invisible characters: U\+", f"{path}-{name}")
        for path, make in paths.items()
        for name, value in INVISIBLE_TAGS.items()
    ]


def agent_read(**identity: str) -> Call:
    """An agent's entry read (which writes its receipt) under `identity`."""
    fields = {"task_id": "agent-1", **identity}
    return lambda s: read_entries(s.store, AgentIdentity(**fields))  # type: ignore[arg-type]


IDENTITY_CASES = [
    *lookalike_id_cases(),
    *invisible_tag_cases(),
    *invisible_key_cases(),
    *[
        case(agent_read(**{field: value}), VALUE, f"{field} .*{message}", f"agent-{field}-{name}")
        for field in ("task_id", "run_id", "adapter")
        for name, (value, message) in LOOKALIKE_IDS.items()
    ],
    case(
        lambda s: read_entries(s.store, AgentIdentity("a"), limit=0), VALUE, "limit", "agent-limit"
    ),
    case(
        lambda s: read_entries(s.store, AgentIdentity("a"), tags=["api\u200b"]),
        VALUE,
        "invisible",
        "agent-tag-invisible",
    ),
    case(
        lambda s: read_entries(s.store, AgentIdentity("a"), escape="no"),  # type: ignore[arg-type]
        TYPE,
        "escape",
        "agent-escape-string",
    ),
    *[
        case(
            recall(["api"], **{field: value}),
            VALUE,
            f"{field} .*{message}",
            f"recall-{field}-{name}",
        )
        for field in ("task_id", "run_id", "adapter")
        for name, (value, message) in LOOKALIKE_IDS.items()
    ],
    *[
        case(recall([value]), VALUE, r"tags\[0\].*invisible", f"recall-tag-{name}")
        for name, value in INVISIBLE_TAGS.items()
    ],
]


PROMPT_CASES = [
    case(lambda s: load_persistent_memory(None, ["api"]), TYPE, "store", "recall-store-none"),  # type: ignore[arg-type]
    case(
        lambda s: load_persistent_memory(str(s.store.db_path), ["api"]),  # type: ignore[arg-type]
        TYPE,
        "store",
        "recall-store-path",
    ),
    case(recall("api"), TYPE, "tags", "recall-tags-string"),
    case(recall([""]), VALUE, "tags", "recall-tag-empty"),
    case(recall(["a\x00"]), VALUE, "NUL", "recall-tag-nul"),
    case(recall([7]), TYPE, "tags", "recall-tag-int"),
    case(recall(["api"], trust_policy={}), TYPE, "trust_policy", "recall-policy-dict"),
    case(recall(["api"], trust_policy="off"), TYPE, "trust_policy", "recall-policy-string"),
    case(recall(["api"], limit=0), VALUE, "limit", "recall-limit-zero"),
    case(recall(["api"], limit=-1), VALUE, "limit", "recall-limit-negative"),
    case(recall(["api"], limit=HUGE), VALUE, "limit", "recall-limit-huge"),
    case(recall(["api"], limit=True), TYPE, "limit", "recall-limit-bool"),
    case(recall(["api"], task_id=""), VALUE, "task_id", "recall-task-empty"),
    case(recall(["api"], task_id=7), TYPE, "task_id", "recall-task-int"),
    case(recall(["api"], run_id="r\x00"), VALUE, "run_id", "recall-run-nul"),
    case(recall(["api"], adapter=SURROGATE), VALUE, "adapter", "recall-adapter-surrogate"),
]


def key_file(s: Subject, name: str = "ops") -> Path:
    """A key pair `name` beside the store (made once); returns the private key's path."""
    path = Path(s.store.db_path).parent / f"{name}.key"
    if not path.exists():
        generate_key(path)
    return path


def junk_file(s: Subject, data: bytes, name: str = "junk") -> Path:
    path = Path(s.store.db_path).parent / name
    path.write_bytes(data)
    path.chmod(0o600)
    return path


def db(s: Subject) -> Path:
    return Path(s.store.db_path)


def import_legacy(s: Subject, source: Path) -> object:
    """`Ledger.import_legacy` of `source` into the subject's log."""
    with Ledger.open(db(s), read_only=False) as ledger:
        return ledger.import_legacy(source)


OPERATOR_CASES = [
    case(
        lambda s: quarantine(db(s), positions=[1], reason="r", key=123),  # type: ignore[arg-type]
        TYPE,
        "key",
        "quarantine-key-int",
    ),
    case(
        lambda s: quarantine(db(s), positions=[1], reason="r", key=db(s).parent / "absent.key"),
        KeyFileError,
        "no key file",
        "quarantine-key-missing",
    ),
    case(
        lambda s: quarantine(db(s), positions=[1], reason="r", key=junk_file(s, b"\x00\xff" * 16)),
        KeyFileError,
        "not text",
        "quarantine-key-binary",
    ),
    case(
        lambda s: quarantine(db(s), positions=[1], reason="r", key=f"{key_file(s)}.pub"),
        KeyFileError,
        "holds a public key",
        "quarantine-key-public",
    ),
    case(
        lambda s: quarantine(db(s), positions=[1], reason="r", key=key_file(s)),
        NotAuthorizedError,
        "not an operator key of this log",
        "quarantine-key-unregistered",
    ),
    case(
        lambda s: quarantine(
            db(s), positions=[1], reason="r", actor=Actor(producer_task_id="intruder\u200b9")
        ),
        VALUE,
        "producer_task_id",
        "quarantine-actor-lookalike",
    ),
    case(
        lambda s: release(db(s), 1, reason="r", key=db(s).parent),
        KeyFileError,
        "key file",
        "release-key-directory",
    ),
    case(
        lambda s: add_operator(db(s), key_file(s), key=key_file(s)),
        KeyFileError,
        "holds a private key",
        "operator-add-private-as-public",
    ),
    case(
        lambda s: add_operator(db(s), db(s).parent / "absent.pub", key=key_file(s)),
        KeyFileError,
        "no key file",
        "operator-add-missing-public-key",
    ),
    case(
        lambda s: add_operator(db(s), f"{key_file(s, 'other')}.pub", key=key_file(s)),
        NotAuthorizedError,
        "signs its own registration",
        "operator-add-first-not-self-signed",
    ),
    case(
        lambda s: remove_operator(db(s), "ab\ncd", key=key_file(s), reason="r"),
        VALUE,
        "key_id",
        "operator-remove-bad-id",
    ),
    case(
        lambda s: remove_operator(db(s), "00000000", key=key_file(s), reason="r"),
        VALUE,
        "not an operator key",
        "operator-remove-unknown",
    ),
    case(
        lambda s: import_legacy(s, junk_file(s, b"SQLite format 3? no")),
        FactledgerError,
        "not a database",
        "import-not-sqlite",
    ),
    case(
        lambda s: import_legacy(s, key_file(s)),
        FactledgerError,
        "not a database",
        "import-a-key-file",
    ),
    case(
        lambda s: generate_key(db(s).parent / "k\x00.key"),
        VALUE,
        "NUL",
        "keygen-nul",
    ),
    case(
        lambda s: generate_key(db(s).parent / "k.key", name="two words"),
        VALUE,
        "key name",
        "keygen-name-space",
    ),
    case(
        lambda s: checkpoint(db(s), key=f"{key_file(s)}.pub"),
        KeyFileError,
        "holds a public key",
        "checkpoint-key-public",
    ),
]


@pytest.mark.parametrize(
    ("call", "error", "match"),
    STORE_CASES + KB_CASES + POLICY_CASES + IDENTITY_CASES + OPERATOR_CASES,
)
def test_bad_input_raises_a_clear_error_and_changes_nothing(
    subject: Subject, call: Call, error: type[FactledgerError], match: str
) -> None:
    """Bad input raises the named FactledgerError subclass; head and read model are unchanged,
    and a store that failed to open created no file."""
    head = subject.store.event_log.head()
    tables = live_tables(subject.store)
    with pytest.raises(error, match=match) as raised:
        call(subject)
    assert isinstance(raised.value, FactledgerError)
    assert head == subject.store.event_log.head()
    assert tables == live_tables(subject.store)
    assert not subject.spare_path.exists()


@pytest.mark.parametrize(("call", "error", "match"), PROMPT_CASES)
def test_bad_input_to_the_prompt_path_writes_no_receipt(
    subject: Subject, call: Call, error: type[FactledgerError], match: str
) -> None:
    """load_persistent_memory refuses bad input before reading or writing: no receipt."""
    head = subject.store.event_log.head()
    with pytest.raises(error, match=match):
        call(subject)
    assert head == subject.store.event_log.head()


def test_garbage_trust_environment_is_a_clear_error(
    subject: Subject, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An adapter list in the environment holding control characters or undecodable bytes is
    refused clearly, by active_trust_policy and by a prompt build, which writes no receipt."""
    head = subject.store.event_log.head()
    for garbage in ("codex,ev\x01il", f"codex,{chr(0xDCFF)}"):
        monkeypatch.setenv("FACTLEDGER_TRUST_ADAPTERS", garbage)
        with pytest.raises(InvalidInputError, match="trusted_adapters"):
            active_trust_policy()
        with pytest.raises(InvalidInputError, match="trusted_adapters"):
            load_persistent_memory(subject.store, ["api"])
    assert head == subject.store.event_log.head()


# -- legitimate oddities: they must simply work -------------------------------------------------


def test_like_wildcards_in_tags_match_only_themselves(subject: Subject) -> None:
    """`%` and `_` in tags, allow-lists and fact tags are ordinary characters, never patterns."""
    store = subject.store
    ids = {tag: store.add("learning", tag, [tag]) for tag in ("%", "a_b", "aXb", "a%b", "_")}
    underscore = store.add("learning", "by a_b", ["api"], source_adapter="a_b")
    store.add("learning", "by aXb", ["api"], source_adapter="aXb")
    assert [ids["%"]] == [e.id for e in store.list(tags=["%"])]
    assert [ids["a_b"]] == [e.id for e in store.list(tags=["a_b"])]
    assert [ids["_"]] == [e.id for e in store.get_relevant(["_"])]
    assert [underscore] == [e.id for e in store.query(read_only_from_adapters=["a_b"])]
    assert [] == store.query(read_only_from_adapters=["_"])
    assert [] == store.query(read_only_from_adapters=["%"])
    subject.kb.publish("%", "k", "percent", scope="project")
    assert [] == list(subject.kb.subscribe("_", scope="project"))
    assert ["percent"] == [f.value for f in subject.kb.subscribe("%", scope="project")]


def test_sql_text_is_stored_as_data(subject: Subject) -> None:
    """SQL metacharacters in content, tags, keys and values are data: stored and read back
    exactly, with every table intact and the chain verifying. (Identifiers of who writes
    cannot hold them: see the lookalike cases.)"""
    store, kb = subject.store, subject.kb
    tag = "x' OR '1'='1"
    entry_id = store.add("decision", SQL, [tag, "'; DELETE FROM fl_memory; --"], task_id="t--")
    fact = kb.publish(tag, "'); DROP TABLE fl_fact; --", '" OR ""="', scope="project")
    [stored] = store.list(tags=[tag], type="decision")
    assert (entry_id, SQL, "t--") == (stored.id, stored.content, stored.task_id)
    assert [fact] == list(kb.subscribe(tag, scope="project"))
    assert [fact] == kb.history(tag, "'); DROP TABLE fl_fact; --", scope="project")
    assert 5 == len(store.list())
    assert_chain_verifies(store.event_log)
    assert_read_model_is_the_log_refolded(store)


@pytest.mark.parametrize(
    "text",
    [
        "nul \x00 inside",
        "\x00",
        "line\r\nbreaks\tand\x1bescapes",
        "\u202eright-to-left override",
        "astral \U0001f642 \U0001d11e \U00010348",
        "x" * MAX_CONTENT_BYTES,
        "é" * (MAX_CONTENT_BYTES // 2),
    ],
    ids=["nul", "only-nul", "controls", "rtl", "astral", "max-ascii", "max-utf8"],
)
def test_free_text_round_trips_exactly(subject: Subject, text: str) -> None:
    """Any valid Unicode up to the 1 MiB limit that is not only whitespace, NUL and control
    characters included, is stored and read back byte for byte, with the content hash of
    exactly those bytes (keyed by each event's own salt)."""
    entry_id = subject.store.add("learning", text, ["odd"])
    fact = subject.kb.publish("odd", "k", text, scope="run")
    [stored] = [e for e in subject.store.list(tags=["odd"], limit=5) if e.id == entry_id]
    log = subject.store.event_log
    entry_hash = expected_content_hash(log, entry_id, text)
    assert (text, entry_hash) == (stored.content, stored.content_hash)
    assert (text, expected_content_hash(log, fact.position, text)) == (
        fact.value,
        fact.content_hash,
    )
    assert entry_hash != fact.content_hash  # the same text, salted apart
    assert [fact] == list(subject.kb.subscribe("odd", scope="run"))
    assert_chain_verifies(subject.store.event_log)


def test_limits_at_their_boundaries_are_accepted(subject: Subject) -> None:
    """The largest limit, a 200-character tag, 128-character identifiers of who writes made of
    every allowed character, and Unicode tags without invisible characters are accepted."""
    store = subject.store
    tag, name = "t" * 200, ("Az09._:-/@" * 13)[:128]
    entry_id = store.add(
        "learning", "x", [tag, "日本語", "café"], task_id=name, source_adapter=name
    )
    assert [entry_id] == [e.id for e in store.query(tags=[tag], limit=2**63 - 1)]
    assert [entry_id] == [
        e.id for e in store.get_relevant([tag], limit=2**63 - 1, read_only_from_adapters=[name])
    ]
    assert 4 == len(store.list(limit=2**63 - 1))
    policy = MemoryTrustPolicy(trusted_adapters=frozenset({name}))
    assert "" != load_persistent_memory(store, [tag], trust_policy=policy, limit=2**63 - 1)


def test_allow_lists_accept_any_iterable_of_names(subject: Subject) -> None:
    """A tuple or a generator works as an allow-list, like a list."""
    store = subject.store
    expected = [e.id for e in store.query(read_only_from_adapters=["codex"])]
    assert expected == [e.id for e in store.query(read_only_from_adapters=("codex",))]  # type: ignore[arg-type]
    names = (name for name in ["codex"])
    assert expected == [e.id for e in store.query(read_only_from_adapters=names)]  # type: ignore[arg-type]
