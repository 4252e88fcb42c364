"""Model-based: the whole store, driven by hypothesis, against a plain-Python model of it."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    rule,
    run_state_machine_as_test,
)

from eventlog import (
    InvalidInputError,
    NewEvent,
    QuarantineApplied,
    QuarantineReleased,
    RecallRecorded,
    content_hash,
    open_log,
)
from projections import (
    CrossTaskKB,
    Fact,
    MemoryEntry,
    MemoryTrustPolicy,
    SQLiteMemoryStore,
    load_persistent_memory,
)
from projections.prompt import visible
from replay.errors import NotAuthorizedError
from replay.keys import OperatorKey, generate_key, read_operator_key
from replay.operators import add_operator, remove_operator
from replay.quarantine import quarantine, release
from tests.reliability.support import TRUST_ENV, assert_read_model_is_the_log_refolded

TS_NS = 1_764_374_400_000_000_000
"""Every event gets this timestamp: order must come from positions alone."""
RUNS = ("run-a", "run-b")
ADAPTERS = (None, "codex", "claude-code")
ALLOW_LISTS: tuple[list[str] | None, ...] = (
    None,
    [],
    ["codex"],
    ["codex", "claude-code"],
    ["gemini-cli"],
)
TRUSTED = "codex"
TAGS = ("api", "API", "api-schema", "%", "a_b", "'; DROP TABLE fl_memory; --")
FACT_TAGS = ("api", "%")
KEYS = ("users", "k_1", "%")
TYPES = ("learning", "decision", "convention", "semantic")
EXAMPLES = 300
STEPS = 50
KEY_NAMES = ("alice", "bob", "mallory")
anyone = st.sampled_from([None, *KEY_NAMES])

texts = st.text(
    alphabet=st.sampled_from(["a", "b", "%", "_", "'", ";", "~", "\n", "é", "\x00", "🙂"]),
    max_size=6,
)
tag_lists = st.lists(st.sampled_from(TAGS), max_size=3)
importances = st.sampled_from([0.0, 0.25, 0.5, 1.0])
adapters = st.sampled_from(ADAPTERS)
allow_lists = st.sampled_from(ALLOW_LISTS)
limits = st.integers(1, 6)
LOOKALIKES = (
    "claude\u200bcode",
    "\ufeffcodex",
    "\u0441odex",
    "claude\u2010code",
    "co dex",
    "codex\u00a0",
    "\uff43odex",
)
"""Writers' identifiers that print like (or hide inside) an ordinary one."""
INVISIBLE_NAMES = ("api\u200b", "\u3164", "api\ufe0f", "a\u034fpi", "api\U000e0041")
"""Tags and keys holding a character a reader cannot see."""


@dataclass
class Row:
    """A memory row as the model keeps it: an added entry or a fact's mirror."""

    type: str
    content: str
    tags: tuple[str, ...]
    importance: float
    task_id: str | None
    adapter: str | None
    identity: tuple[str, str, str, str] | None = None


@dataclass
class Version:
    """One published version of a fact."""

    position: int
    value: str
    producer: str
    run_id: str
    adapter: str | None


@dataclass
class Model:
    """The store in plain Python: a head, the memory rows, and every fact version."""

    head: int = 0
    rows: dict[int, Row] = field(default_factory=dict)
    facts: dict[tuple[str, str, str, str], list[Version]] = field(default_factory=dict)
    quarantines: dict[int, set[int]] = field(default_factory=dict)
    """Active quarantines: the quarantine's position and the positions it covers."""
    registered: set[str] = field(default_factory=set)
    """Every operator key the log ever registered: once one is, operator actions need one."""
    removed: set[str] = field(default_factory=set)

    def operators(self) -> set[str]:
        """The operator keys registered and not removed."""
        return self.registered - self.removed

    def may_act(self, signer: str | None) -> bool:
        """Whether an operator action signed by `signer` (None: unsigned) is accepted: in an
        open log only unsigned, once there is an operator only by one."""
        return signer is None if not self.registered else signer in self.operators()

    def signer(self, data: st.DataObject) -> str | None:
        """Mostly one who may act (so quarantines happen), sometimes anyone (so refusals do)."""
        if data.draw(st.integers(0, 3), label="anyone") == 0:
            return data.draw(anyone, label="signer")
        if not self.registered:
            return None
        return data.draw(st.sampled_from(sorted(self.operators())), label="signer")

    def quarantined(self, position: int) -> bool:
        """Whether an active quarantine covers `position`."""
        return any(position in covered for covered in self.quarantines.values())

    def current(self, identity: tuple[str, str, str, str]) -> Version | None:
        """The version readers get: the newest one no quarantine covers."""
        free = [v for v in self.facts[identity] if not self.quarantined(v.position)]
        return free[-1] if free else None

    def candidates(self) -> list[tuple[int, Row]]:
        """Rows not superseded, newest first: entries, and fact versions not older than the
        current one (newer ones can only be quarantined)."""
        rows = []
        for entry_id, row in sorted(self.rows.items(), reverse=True):
            if row.identity is not None:
                current = self.current(row.identity)
                if current is not None and entry_id < current.position:
                    continue
            rows.append((entry_id, row))
        return rows

    def visible(self) -> list[tuple[int, Row]]:
        """Rows readers see, newest first: candidates no quarantine covers."""
        return [(i, row) for i, row in self.candidates() if not self.quarantined(i)]

    def coverage(self, adapter: str | None, producer: str | None, positions: set[int]) -> set[int]:
        """What a quarantine with these selectors would cover now: entries still in the read
        model and every fact version, when every given selector matches."""
        written: dict[int, tuple[str | None, str]] = {
            i: (row.adapter, row.task_id or "")
            for i, row in self.rows.items()
            if row.identity is None
        }
        for versions in self.facts.values():
            written.update({v.position: (v.adapter, v.producer) for v in versions})
        return {
            position
            for position, (by_adapter, by_producer) in written.items()
            if (adapter is None or by_adapter == adapter)
            and (producer is None or by_producer == producer)
            and (not positions or position in positions)
        }

    def entry(self, entry_id: int, row: Row) -> MemoryEntry:
        """The entry a reader should get for a row."""
        return MemoryEntry(
            id=entry_id,
            type=row.type,
            content=row.content,
            tags=list(row.tags),
            created_at=TS_NS / 1e9,
            importance=row.importance,
            task_id=row.task_id,
            source_adapter=row.adapter,
            position=entry_id,
            content_hash=content_hash(row.content.encode("utf-8")),
        )

    def ranked(
        self,
        tags: tuple[str, ...],
        allowed: Callable[[Row], bool],
        rows: list[tuple[int, Row]] | None = None,
    ) -> list[tuple[tuple[int, float, int], int, Row]]:
        """Rows (default: the visible ones) that `allowed(row)` accepts, in get_relevant's
        order, with the key that orders them: (tags shared, importance, id), or, with no
        tags, newest first."""
        ranked = []
        for entry_id, row in self.visible() if rows is None else rows:
            if not allowed(row):
                continue
            shared = len(set(row.tags) & set(tags))
            if tags and not shared:
                continue
            key = (shared, row.importance, entry_id) if tags else (0, 0.0, entry_id)
            ranked.append((key, entry_id, row))
        return sorted(ranked, key=lambda item: item[0], reverse=True)


def allowed_by(allow: list[str] | None) -> Callable[[Row], bool]:
    """The rows a `read_only_from_adapters` value lets through ([] is handled by callers)."""
    return lambda row: allow is None or row.adapter in allow


def fact(identity: tuple[str, str, str, str], version: Version) -> Fact:
    """The Fact a reader should get for a version."""
    scope, _, tag, key = identity
    return Fact(
        tag=tag,
        key=key,
        value=version.value,
        scope=scope,
        producer_task_id=version.producer,
        ts_ns=TS_NS,
        content_hash=content_hash(version.value.encode("utf-8")),
        position=version.position,
        run_id=version.run_id,
        source_adapter=version.adapter,
    )


class StoreMachine(RuleBasedStateMachine):
    """Drives a real store and the model with the same operations and compares every read."""

    examples = 0
    steps = 0
    quarantines = 0
    releases = 0
    refused = 0
    forged = 0
    keys: ClassVar[dict[str, OperatorKey]] = {}

    def __init__(self) -> None:
        super().__init__()
        StoreMachine.examples += 1
        self.directory = Path(tempfile.mkdtemp(prefix="factledger-model-"))
        self.db_path = self.directory / "memory.db"
        self.model = Model()
        self.handle_adapter: str | None = None
        self.store = self._open()
        self.kbs = self._facades()

    def _open(self) -> SQLiteMemoryStore:
        return SQLiteMemoryStore(
            self.db_path,
            source_adapter=self.handle_adapter,
            durability="fast",
            clock_ns=lambda: TS_NS,
        )

    def _facades(self) -> list[CrossTaskKB]:
        return [
            CrossTaskKB(
                self.store, run_id=run, producer_task_id=f"task-{run}", clock_ns=lambda: TS_NS
            )
            for run in RUNS
        ]

    def teardown(self) -> None:
        self.store.close()
        shutil.rmtree(self.directory, ignore_errors=True)

    def _adapter(self, given: str | None) -> str | None:
        return given if given is not None else self.handle_adapter

    # -- writes ----------------------------------------------------------------------------

    @rule(
        type=st.sampled_from(TYPES),
        content=texts,
        tags=tag_lists,
        importance=importances,
        task_id=st.sampled_from([None, "t1", "t2"]),
        adapter=adapters,
    )
    def add(
        self,
        type: str,
        content: str,
        tags: list[str],
        importance: float,
        task_id: str | None,
        adapter: str | None,
    ) -> None:
        entry_id = self.store.add(type, content, tags, importance, task_id, source_adapter=adapter)
        self.model.head += 1
        assert self.model.head == entry_id
        unique = tuple(dict.fromkeys(tags))
        self.model.rows[entry_id] = Row(
            type, content, unique, importance, task_id, self._adapter(adapter)
        )

    @rule(
        rows=st.lists(
            st.tuples(st.sampled_from(TYPES), texts, tag_lists, adapters), min_size=1, max_size=4
        ),
        bad_at=st.one_of(st.none(), st.integers(0, 4)),
    )
    def add_many(
        self, rows: list[tuple[str, str, list[str], str | None]], bad_at: int | None
    ) -> None:
        batch: list[dict[str, object]] = [
            {"type": type, "content": content, "tags": tags, "source_adapter": adapter}
            for type, content, tags, adapter in rows
        ]
        if bad_at is not None:
            index = min(bad_at, len(batch))
            batch.insert(index, {"type": "not-a-type", "content": "x"})
            with pytest.raises(InvalidInputError, match=rf"rows\[{index}\]"):
                self.store.add_many(batch)
            return
        ids = self.store.add_many(batch)
        assert list(range(self.model.head + 1, self.model.head + 1 + len(rows))) == ids
        for entry_id, (type, content, tags, adapter) in zip(ids, rows, strict=True):
            self.model.rows[entry_id] = Row(
                type, content, tuple(dict.fromkeys(tags)), 1.0, None, self._adapter(adapter)
            )
        self.model.head += len(rows)

    @rule(data=st.data())
    def remove(self, data: st.DataObject) -> None:
        entry_id = data.draw(st.integers(1, self.model.head + 2), label="entry_id")
        expected = entry_id in self.model.rows
        assert expected == self.store.remove(entry_id)
        if expected:
            del self.model.rows[entry_id]
            self.model.head += 1

    @rule(
        run=st.integers(0, len(RUNS) - 1),
        scope=st.sampled_from(["run", "project"]),
        items=st.lists(
            st.tuples(st.sampled_from(FACT_TAGS), st.sampled_from(KEYS), texts),
            min_size=1,
            max_size=3,
        ),
        adapter=adapters,
        one_by_one=st.booleans(),
    )
    def publish(
        self,
        run: int,
        scope: str,
        items: list[tuple[str, str, str]],
        adapter: str | None,
        one_by_one: bool,
    ) -> None:
        kb = self.kbs[run]
        if one_by_one:
            facts = [kb.publish(*item, scope=scope, source_adapter=adapter) for item in items]
        else:
            facts = kb.publish_many(items, scope=scope, source_adapter=adapter)
        for published, (tag, key, value) in zip(facts, items, strict=True):
            self.model.head += 1
            identity = (scope, RUNS[run] if scope == "run" else "", tag, key)
            version = Version(
                self.model.head, value, f"task-{RUNS[run]}", RUNS[run], self._adapter(adapter)
            )
            self.model.facts.setdefault(identity, []).append(version)
            self.model.rows[self.model.head] = Row(
                "cross_task", value, (tag,), 1.0, version.producer, version.adapter, identity
            )
            assert fact(identity, version) == published

    @rule(rate=st.sampled_from([0.5, 0.9, 1.0]))
    def decay(self, rate: float) -> None:
        self.store.decay_importance(rate)
        self.model.head += 1
        for row in self.model.rows.values():
            row.importance *= rate

    @rule(keep=st.integers(0, 6))
    def prune(self, keep: int) -> None:
        ranked = sorted(
            self.model.visible(), key=lambda item: (item[1].importance, item[0]), reverse=True
        )
        doomed = [entry_id for entry_id, _ in ranked[keep:]]
        assert len(doomed) == self.store.prune(max_entries=keep, max_age_days=36500)
        if doomed:
            self.model.head += 1
            for entry_id in doomed:
                del self.model.rows[entry_id]

    @rule(tags=tag_lists, limit=limits)
    def recall(self, tags: list[str], limit: int) -> None:
        policy = MemoryTrustPolicy(trusted_adapters=frozenset({TRUSTED}))
        wanted = tuple(dict.fromkeys(tags))
        text = load_persistent_memory(self.store, tags, trust_policy=policy, limit=limit)
        trusted = self.model.ranked(wanted, lambda row: row.adapter in (None, TRUSTED))
        held = {i for i, _ in self.model.candidates() if self.model.quarantined(i)}
        refused = [
            item
            for item in self.model.ranked(wanted, lambda row: True, self.model.candidates())
            if item[1] in held or item[2].adapter not in (None, TRUSTED)
        ]
        included = trusted[:limit]
        if len(included) >= limit:
            refused = [item for item in refused if item[0] > included[-1][0]]
        [receipt] = list(self.store.event_log.read(after=self.model.head))
        self.model.head += 1
        assert isinstance(receipt.payload, RecallRecorded)
        assert tuple(entry_id for _, entry_id, _ in included) == receipt.payload.included
        assert [
            (entry_id, "quarantined" if entry_id in held else "untrusted_adapter")
            for _, entry_id, _ in refused[:200]
        ] == [(e.position, e.reason) for e in receipt.payload.excluded]
        assert (text == "") == (not included)
        for _, _, row in included:
            assert visible(row.content) in text

    @rule(
        adapter=st.sampled_from([None, "codex", "claude-code", "gemini-cli"]),
        producer=st.sampled_from([None, "t1", "task-run-a", "task-run-b"]),
        data=st.data(),
    )
    def quarantine(self, adapter: str | None, producer: str | None, data: st.DataObject) -> None:
        positions: set[int] = set()
        if self.model.head:
            positions = data.draw(
                st.sets(st.integers(1, self.model.head), max_size=3), label="positions"
            )
        covered = self.model.coverage(adapter, producer, positions)
        selectors = {
            "positions": sorted(positions),
            "producer_task_id": producer,
            "source_adapter": adapter,
        }
        signer = self.model.signer(data)
        key = None if signer is None else self.keys[signer]
        if not (adapter or producer or positions) or not covered:
            with pytest.raises(InvalidInputError):
                quarantine(self.db_path, reason="r", key=key, **selectors)  # type: ignore[arg-type]
            return
        if not self.model.may_act(signer):
            with pytest.raises(NotAuthorizedError):
                quarantine(self.db_path, reason="r", key=key, **selectors)  # type: ignore[arg-type]
            StoreMachine.refused += 1
            return
        position = quarantine(self.db_path, reason="r", key=key, **selectors)  # type: ignore[arg-type]
        self.model.head += 1
        assert self.model.head == position
        self.model.quarantines[position] = covered
        StoreMachine.quarantines += 1

    @rule(data=st.data())
    def release(self, data: st.DataObject) -> None:
        signer = self.model.signer(data)
        key = None if signer is None else self.keys[signer]
        if not self.model.quarantines:
            with pytest.raises(InvalidInputError):
                release(self.db_path, max(1, self.model.head), reason="r", key=key)
            return
        target = data.draw(st.sampled_from(sorted(self.model.quarantines)), label="quarantine")
        if not self.model.may_act(signer):
            with pytest.raises(NotAuthorizedError):
                release(self.db_path, target, reason="r", key=key)
            StoreMachine.refused += 1
            return
        position = release(self.db_path, target, reason="r", key=key)
        self.model.head += 1
        assert self.model.head == position
        del self.model.quarantines[target]
        StoreMachine.releases += 1

    @rule(added=st.sampled_from(KEY_NAMES), signer=st.sampled_from(KEY_NAMES))
    def add_operator(self, added: str, signer: str) -> None:
        """Register a key: the first signed by itself, later ones by an operator."""
        model = self.model
        call = lambda: add_operator(  # noqa: E731
            self.db_path, self.keys[added].public, key=self.keys[signer]
        )
        if added in model.registered:
            with pytest.raises(InvalidInputError):
                call()
            return
        if (signer != added) if not model.registered else (signer not in model.operators()):
            with pytest.raises(NotAuthorizedError):
                call()
            StoreMachine.refused += 1
            return
        assert model.head + 1 == call()
        model.head += 1
        model.registered.add(added)

    @rule(removed=st.sampled_from(KEY_NAMES), signer=st.sampled_from(KEY_NAMES))
    def remove_operator(self, removed: str, signer: str) -> None:
        """Remove a key: never the last; signed by an operator."""
        model = self.model
        call = lambda: remove_operator(  # noqa: E731
            self.db_path, self.keys[removed].key_id, key=self.keys[signer], reason="r"
        )
        if removed not in model.operators() or len(model.operators()) == 1:
            with pytest.raises(InvalidInputError):
                call()
            return
        if signer not in model.operators():
            with pytest.raises(NotAuthorizedError):
                call()
            StoreMachine.refused += 1
            return
        assert model.head + 1 == call()
        model.head += 1
        model.removed.add(removed)

    @rule(data=st.data(), adapter=st.sampled_from(["codex", "claude-code"]))
    def forge_around_the_api(self, data: st.DataObject, adapter: str) -> None:
        """An unsigned release or quarantine appended through `eventlog` directly: it takes
        effect only while the log has no operator key."""
        model = self.model
        if model.quarantines and data.draw(st.booleans(), label="release"):
            target = data.draw(st.sampled_from(sorted(model.quarantines)), label="target")
            payload: QuarantineApplied | QuarantineReleased = QuarantineReleased(
                quarantine_position=target, reason="forged"
            )
        else:
            target = 0
            payload = QuarantineApplied(reason="forged", match_source_adapter=adapter)
        covered = model.coverage(adapter, None, set())
        log = open_log(self.db_path)
        try:
            position = log.append(NewEvent(payload=payload, producer_task_id="intruder")).position
        finally:
            log.close()
        model.head += 1
        assert model.head == position
        StoreMachine.forged += 1
        self.store.close()  # a bare append reaches readers at the next open (README)
        self.store = self._open()
        self.kbs = self._facades()
        if model.registered:
            return
        if target:
            del model.quarantines[target]
        else:
            model.quarantines[position] = covered

    @rule(adapter=st.sampled_from([None, "gemini-cli"]))
    def reopen(self, adapter: str | None) -> None:
        self.store.close()
        self.handle_adapter = adapter
        self.store = self._open()
        self.kbs = self._facades()

    @rule()
    def rebuild_equals_inline(self) -> None:
        assert_read_model_is_the_log_refolded(self.store)

    # -- reads -----------------------------------------------------------------------------

    @rule(
        type=st.sampled_from([None, *TYPES, "cross_task"]),
        tags=st.one_of(st.none(), tag_lists),
        limit=limits,
        allow=allow_lists,
    )
    def query(
        self,
        type: str | None,
        tags: list[str] | None,
        limit: int,
        allow: list[str] | None,
    ) -> None:
        expected = [
            self.model.entry(entry_id, row)
            for entry_id, row in self.model.visible()
            if (type is None or row.type == type)
            and (not tags or set(row.tags) & set(tags))
            and (allow is None or row.adapter in allow)
        ][:limit]
        actual = self.store.query(type, tags, limit, read_only_from_adapters=allow)
        assert expected == actual
        if allow is None:
            assert expected == self.store.list(type, tags, limit)

    @rule(tags=tag_lists, limit=limits, allow=allow_lists)
    def get_relevant(self, tags: list[str], limit: int, allow: list[str] | None) -> None:
        ranked = self.model.ranked(tuple(dict.fromkeys(tags)), allowed_by(allow))
        expected = [self.model.entry(entry_id, row) for _, entry_id, row in ranked][:limit]
        if allow == []:
            expected = []
        assert expected == self.store.get_relevant(tags, limit, read_only_from_adapters=allow)

    @rule(
        run=st.integers(0, len(RUNS) - 1),
        scope=st.sampled_from(["run", "project"]),
        tag=st.sampled_from(FACT_TAGS),
        allow=allow_lists,
    )
    def subscribe(self, run: int, scope: str, tag: str, allow: list[str] | None) -> None:
        run_key = RUNS[run] if scope == "run" else ""
        expected = []
        for identity, versions in self.model.facts.items():
            if identity[:3] != (scope, run_key, tag):
                continue
            chosen = [
                v
                for v in versions
                if (allow is None or v.adapter in allow) and not self.model.quarantined(v.position)
            ]
            if chosen:
                expected.append(fact(identity, chosen[-1]))
        expected.sort(key=lambda f: f.position, reverse=True)
        actual = list(self.kbs[run].subscribe(tag, scope=scope, read_only_from_adapters=allow))
        assert expected == actual

    @rule(
        run=st.integers(0, len(RUNS) - 1),
        scope=st.sampled_from(["run", "project"]),
        tag=st.sampled_from(FACT_TAGS),
        key=st.sampled_from(KEYS),
    )
    def history(self, run: int, scope: str, tag: str, key: str) -> None:
        identity = (scope, RUNS[run] if scope == "run" else "", tag, key)
        expected = [fact(identity, v) for v in self.model.facts.get(identity, [])]
        assert expected == self.kbs[run].history(tag, key, scope=scope)

    @rule(
        path=st.sampled_from(
            ["add-adapter", "add-task", "add_many", "publish-adapter", "facade", "recall"]
        ),
        value=st.sampled_from(LOOKALIKES),
    )
    def write_as_a_lookalike(self, path: str, value: str) -> None:
        """A write naming its writer with a lookalike identifier is refused, writes nothing."""
        calls: dict[str, Callable[[], object]] = {
            "add-adapter": lambda: self.store.add("learning", "x", source_adapter=value),
            "add-task": lambda: self.store.add("learning", "x", task_id=value),
            "add_many": lambda: self.store.add_many(
                [
                    {"type": "learning", "content": "x"},
                    {"type": "learning", "content": "y", "source_adapter": value},
                ]
            ),
            "publish-adapter": lambda: self.kbs[0].publish(
                "api", "users", "v", scope="project", source_adapter=value
            ),
            "facade": lambda: CrossTaskKB(self.store, producer_task_id=value),
            "recall": lambda: load_persistent_memory(self.store, ["api"], adapter=value),
        }
        with pytest.raises(InvalidInputError, match="may hold only ASCII letters"):
            calls[path]()

    @rule(
        path=st.sampled_from(["add", "publish-tag", "publish-key"]),
        value=st.sampled_from(INVISIBLE_NAMES),
    )
    def write_an_invisible_name(self, path: str, value: str) -> None:
        """A tag or key holding an invisible character is refused, and nothing is written."""
        calls: dict[str, Callable[[], object]] = {
            "add": lambda: self.store.add("learning", "x", ["api", value]),
            "publish-tag": lambda: self.kbs[0].publish(value, "users", "v", scope="project"),
            "publish-key": lambda: self.kbs[0].publish("api", value, "v", scope="project"),
        }
        with pytest.raises(InvalidInputError, match="invisible characters"):
            calls[path]()

    @invariant()
    def head_is_the_models(self) -> None:
        StoreMachine.steps += 1
        assert self.model.head == self.store.event_log.head().position


def key_file(directory: Path, name: str) -> Path:
    generate_key(directory / f"{name}.key")
    return directory / f"{name}.key"


def test_store_behaves_like_its_plain_python_model(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Random sequences of adds, batches (some with a bad row), removes, publishes, decays,
    prunes, recalls, quarantines and releases (signed or not, by operators or not), operator
    keys added and removed, unsigned quarantines and releases appended around the API,
    reopens and rebuild checks: every read and every receipt equals the model's answer, the
    head is always the model's, and whenever checked the read model equals a refold of the
    log."""
    for name in TRUST_ENV:
        monkeypatch.delenv(name, raising=False)
    StoreMachine.examples = StoreMachine.steps = 0
    StoreMachine.quarantines = StoreMachine.releases = 0
    StoreMachine.refused = StoreMachine.forged = 0
    StoreMachine.keys = {name: read_operator_key(key_file(tmp_path, name)) for name in KEY_NAMES}
    run_state_machine_as_test(
        StoreMachine,
        settings=settings(
            max_examples=EXAMPLES,
            stateful_step_count=STEPS,
            deadline=None,
            derandomize=True,
            database=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        ),
    )
    print(
        f"model test: {StoreMachine.examples} examples, {StoreMachine.steps} checked states, "
        f"{StoreMachine.quarantines} quarantines, {StoreMachine.releases} releases, "
        f"{StoreMachine.refused} refused operator actions, {StoreMachine.forged} forged"
    )
    assert StoreMachine.examples >= EXAMPLES
    assert StoreMachine.quarantines > 0 and StoreMachine.releases > 0
    assert StoreMachine.refused > 0 and StoreMachine.forged > 0
