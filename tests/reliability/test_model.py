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
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from msgspec import UNSET

from eventlog import (
    ConflictPolicySet,
    InvalidInputError,
    NewEvent,
    QuarantineApplied,
    QuarantineReleased,
    RecallRecorded,
    TrustSettings,
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
from projections._prompt import visible
from projections._taint import taint
from replay import (
    add_operator,
    approve,
    quarantine,
    reject,
    release,
    remove_operator,
    set_conflict_policy,
)
from replay.errors import NotAuthorizedError
from replay.keys import OperatorKey, generate_key, read_operator_key
from tests.reliability.support import assert_read_model_is_the_log_refolded
from tests.salted import expected_content_hash

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
TRUSTING: frozenset[str | None] = frozenset({None, TRUSTED})
"""The writers a recall's policy trusts (no adapter: an operator's) besides the reader's own
adapter, which every read made for a named reader trusts too (`reader_policy`)."""
DENIED, PENDING, APPROVED, REJECTED = "denied", "pending", "approved", "rejected"
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
written_texts = texts.filter(str.strip)
"""Texts a write accepts: blank ones are refused (the `add` rule checks that)."""
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
READERS = (None, ("t1", None), ("task-run-a", "run-a"), ("task-run-b", "run-b"))
"""Who builds a prompt (task, run): the writers `add` and the facades write as, or nobody."""
RUNS_OF = {f"task-{run}": index for index, run in enumerate(RUNS)}
"""The facades' producer tasks, each with the index of its run."""
READER_ADAPTERS = (None, "codex", "claude-code", "gemini-cli")
"""Adapters a forged receipt is appended under or names: the writers', the reopened
handle's, none."""
Reader = tuple[str, str, str]
"""(adapter, task, run), '' for none: who a receipt exposed, and whose receipts a write follows."""
ON_CONFLICT = ("allow", "deny", "hold")
OWNER_LISTS: tuple[tuple[str, ...] | None, ...] = (
    None,
    None,
    (),
    ("codex",),
    ("codex", "claude-code"),
    ("gemini-cli",),
)
"""The owners a policy names (None: the trusted adapters, the default)."""
TRUST_ENVIRONMENTS = (None, "codex", "claude-code,codex")
"""FACTLEDGER_TRUST_ADAPTERS where a policy is set, which names its default owners."""
Policy = tuple[str, frozenset[str] | None]
"""A conflict policy: its mode and its owners (None: the first writer owns, as a policy
written before owners existed says)."""


@dataclass
class Row:
    """A memory row as the model keeps it: an added entry or a fact's mirror."""

    type: str
    content: str
    tags: tuple[str, ...]
    importance: float
    task_id: str | None
    adapter: str | None
    content_hash: str
    """The keyed hash of `content` under the salt the log stored for the row's event."""
    identity: tuple[str, str, str, str] | None = None


@dataclass
class Version:
    """One published version of a fact."""

    position: int
    value: str
    producer: str
    run_id: str
    adapter: str | None
    content_hash: str
    """The keyed hash of `value` under the salt the log stored for this version's event."""


@dataclass
class Held:
    """A fact version a conflict policy kept from becoming current."""

    identity: tuple[str, str, str, str]
    version: Version
    status: str


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
    adapters: dict[int, str] = field(default_factory=dict)
    """The adapter each event was written under, where it was written under one."""
    exposed: dict[Reader, set[int]] = field(default_factory=dict)
    """What reached each reader through a recall receipt so far: the adapter that appended
    the receipt, with the task and run it names (a receipt naming another adapter in its
    payload than in its envelope exposes no one)."""
    sources: dict[int, set[int]] = field(default_factory=dict)
    """Lineage: each write's sources, exposed to its writer or declared (`derived_from`)."""
    policies: dict[tuple[str, str], Policy] = field(default_factory=dict)
    """Conflict policies by (scope, or '' for every scope; tag)."""
    held: dict[int, Held] = field(default_factory=dict)

    def append(self, adapter: str | None = None) -> int:
        """Count one event written under `adapter`; return its position."""
        self.head += 1
        if adapter is not None:
            self.adapters[self.head] = adapter
        return self.head

    def write(
        self, adapter: str | None, producer: str, run_id: str | None, derived_from: list[int]
    ) -> int:
        """Count a write and record its sources: what reached its writer (its adapter, task
        and run) before it, and what it names."""
        position = self.append(adapter)
        exposed = self.exposed.get((adapter or "", producer, run_id or ""), set())
        self.sources[position] = exposed | set(derived_from)
        return position

    def expose(self, reader: Reader, included: tuple[int, ...]) -> None:
        """Record what a receipt for `reader` included (a task is needed to be exposed)."""
        if reader[1]:
            self.exposed.setdefault(reader, set()).update(included)

    def taint_source(self, position: int, trusted: frozenset[str | None]) -> int | None:
        """The earliest ancestor of `position` that is quarantined or written under an adapter
        not in `trusted` (None: no adapter), if any."""
        ancestors: set[int] = set()
        todo = [position]
        while todo:
            for parent in self.sources.get(todo.pop(), set()) - ancestors:
                ancestors.add(parent)
                todo.append(parent)
        bad = [a for a in ancestors if self.quarantined(a) or self.adapters.get(a) not in trusted]
        return min(bad, default=None)

    def kept_out(self, scope: str, tag: str, version: Version, current: Version | None) -> bool:
        """Whether the policy for `tag` in `scope` keeps `version` from becoming current:
        under deny or hold, a version by an adapter that is not an owner (no adapter is an
        operator's, and owns), or, under a policy without owners, by another adapter than
        the current version's."""
        mode, owners = self.policies.get(
            (scope, tag), self.policies.get(("", tag), ("allow", None))
        )
        if mode == "allow":
            return False
        if owners is None:
            return current is not None and current.adapter != version.adapter
        return version.adapter is not None and version.adapter not in owners

    def admit(self, identity: tuple[str, str, str, str], version: Version) -> None:
        """Make `version` a version of `identity` (in position order) with its mirror row."""
        versions = self.facts.setdefault(identity, [])
        versions.append(version)
        versions.sort(key=lambda v: v.position)
        self.rows[version.position] = Row(
            "cross_task",
            version.value,
            (identity[2],),
            1.0,
            version.producer,
            version.adapter,
            version.content_hash,
            identity,
        )

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
        free = [v for v in self.facts.get(identity, []) if not self.quarantined(v.position)]
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
            content_hash=row.content_hash,
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
        content_hash=version.content_hash,
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
    forged_receipts = 0
    tainted = 0
    own_shown = 0
    tainted_writes = 0
    held = 0
    held_first = 0
    decided = 0
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

    def _content_hash(self, position: int, text: str) -> str:
        """The keyed hash of `text` under the salt the log stored for `position` (drawn at
        random per event, so only the stored salt predicts it)."""
        return expected_content_hash(self.store.event_log, position, text)

    def _derived_from(self, data: st.DataObject) -> list[int] | None:
        """None, or the positions a write names as its sources: now and then 0, or one past
        the head (refused)."""
        head = self.model.head
        choice = data.draw(st.integers(0, 5), label="sources")
        if choice == 0 or not head:
            return None
        if choice == 5:
            return data.draw(st.lists(st.sampled_from([0, head + 1, head]), min_size=1))
        return data.draw(st.lists(st.integers(1, head), min_size=1, max_size=3))

    def _refused_sources(self, derived_from: list[int] | None) -> bool:
        return any(not 0 < p <= self.model.head for p in derived_from or [])

    # -- writes ----------------------------------------------------------------------------

    @rule(
        type=st.sampled_from(TYPES),
        content=texts,
        tags=tag_lists,
        importance=importances,
        task_id=st.sampled_from([None, "t1", "t2"]),
        adapter=adapters,
        data=st.data(),
    )
    def add(
        self,
        type: str,
        content: str,
        tags: list[str],
        importance: float,
        task_id: str | None,
        adapter: str | None,
        data: st.DataObject,
    ) -> None:
        sources = self._derived_from(data)
        call = lambda: self.store.add(  # noqa: E731
            type, content, tags, importance, task_id, source_adapter=adapter, derived_from=sources
        )
        if not content.strip():
            with pytest.raises(InvalidInputError, match="only whitespace"):
                call()
            return
        if self._refused_sources(sources):
            with pytest.raises(InvalidInputError, match="derived_from"):
                call()
            return
        entry_id = call()
        assert entry_id == self.model.write(
            self._adapter(adapter), task_id or "", None, sources or []
        )
        unique = tuple(dict.fromkeys(tags))
        self.model.rows[entry_id] = Row(
            type,
            content,
            unique,
            importance,
            task_id,
            self._adapter(adapter),
            self._content_hash(entry_id, content),
        )

    @rule(
        rows=st.lists(
            st.tuples(st.sampled_from(TYPES), written_texts, tag_lists, adapters),
            min_size=1,
            max_size=4,
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
            assert entry_id == self.model.write(self._adapter(adapter), "", None, [])
            self.model.rows[entry_id] = Row(
                type,
                content,
                tuple(dict.fromkeys(tags)),
                1.0,
                None,
                self._adapter(adapter),
                self._content_hash(entry_id, content),
            )

    @rule(data=st.data())
    def remove(self, data: st.DataObject) -> None:
        entry_id = data.draw(st.integers(1, self.model.head + 2), label="entry_id")
        expected = entry_id in self.model.rows
        assert expected == self.store.remove(entry_id)
        if expected:
            del self.model.rows[entry_id]
            self.model.append(self.handle_adapter)

    @rule(
        run=st.integers(0, len(RUNS) - 1),
        scope=st.sampled_from(["run", "project"]),
        items=st.lists(
            st.tuples(st.sampled_from(FACT_TAGS), st.sampled_from(KEYS), written_texts),
            min_size=1,
            max_size=3,
        ),
        adapter=adapters,
        one_by_one=st.booleans(),
        data=st.data(),
    )
    def publish(
        self,
        run: int,
        scope: str,
        items: list[tuple[str, str, str]],
        adapter: str | None,
        one_by_one: bool,
        data: st.DataObject,
    ) -> None:
        """Publish (a version under another adapter than the current one's is admitted,
        denied or held as the tag's conflict policy says)."""
        kb = self.kbs[run]
        sources = self._derived_from(data)
        options = {"scope": scope, "source_adapter": adapter, "derived_from": sources}
        if self._refused_sources(sources):
            with pytest.raises(InvalidInputError, match="derived_from"):
                kb.publish_many(items, **options)  # type: ignore[arg-type]
            return
        if one_by_one:
            facts = [kb.publish(*item, **options) for item in items]  # type: ignore[arg-type]
        else:
            facts = kb.publish_many(items, **options)  # type: ignore[arg-type]
        model = self.model
        for published, (tag, key, value) in zip(facts, items, strict=True):
            producer = f"task-{RUNS[run]}"
            position = model.write(self._adapter(adapter), producer, RUNS[run], sources or [])
            identity = (scope, RUNS[run] if scope == "run" else "", tag, key)
            version = Version(
                position,
                value,
                producer,
                RUNS[run],
                self._adapter(adapter),
                self._content_hash(position, value),
            )
            assert fact(identity, version) == published
            current = model.current(identity)
            if model.kept_out(scope, tag, version, current):
                mode = model.policies.get((scope, tag), model.policies.get(("", tag)))
                assert mode is not None
                model.held[position] = Held(
                    identity, version, DENIED if mode[0] == "deny" else PENDING
                )
                StoreMachine.held += 1
                StoreMachine.held_first += current is None
            else:
                model.admit(identity, version)

    @rule(rate=st.sampled_from([0.5, 0.9, 1.0]))
    def decay(self, rate: float) -> None:
        self.store.decay_importance(rate)
        self.model.append(self.handle_adapter)
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
            self.model.append(self.handle_adapter)
            for entry_id in doomed:
                del self.model.rows[entry_id]

    @rule(
        tags=tag_lists,
        limit=limits,
        reader=st.sampled_from(READERS),
        adapter=adapters,
        propagate=st.sampled_from([True, True, True, False]),
    )
    def recall(
        self,
        tags: list[str],
        limit: int,
        reader: tuple[str, str | None] | None,
        adapter: str | None,
        propagate: bool,
    ) -> None:
        """Build a prompt as a task under an adapter (the handle's when none is named), which
        the read trusts besides the policy's own: what it includes reaches that (adapter, task,
        run) (lineage); an entry by another adapter is kept out as `untrusted_adapter`, one
        with an ancestor by another adapter or quarantined as `tainted`, and the next trusted
        one takes its place, however many there are; the receipt is the reader's own event
        and records the policy with the reader's adapter trusted."""
        policy = MemoryTrustPolicy(trusted_adapters=frozenset({TRUSTED}), propagate_taint=propagate)
        reader_adapter = self._adapter(adapter)
        trusted = TRUSTING | {reader_adapter}
        task_id, run_id = reader or (None, None)
        wanted = tuple(dict.fromkeys(tags))
        text = load_persistent_memory(
            self.store,
            tags,
            trust_policy=policy,
            limit=limit,
            task_id=task_id,
            run_id=run_id,
            adapter=adapter,
        )
        model = self.model
        included: list[tuple[tuple[int, float, int], int, Row]] = []
        tainted: list[tuple[int, int]] = []
        for item in model.ranked(wanted, lambda row: row.adapter in trusted):
            if len(included) == limit:
                break
            source = model.taint_source(item[1], trusted) if propagate else None
            if source is None:
                included.append(item)
            else:
                tainted.append((item[1], source))
        held = {i for i, _ in model.candidates() if model.quarantined(i)}
        refused = [
            item
            for item in model.ranked(wanted, lambda row: True, model.candidates())
            if item[1] in held or item[2].adapter not in trusted
        ]
        if len(included) == limit:
            refused = [item for item in refused if item[0] > included[-1][0]]
        [receipt] = list(self.store.event_log.read(after=model.head))
        model.append(reader_adapter)
        assert isinstance(receipt.payload, RecallRecorded)
        own = (task_id or "", run_id, reader_adapter)
        assert own == (receipt.producer_task_id, receipt.run_id, receipt.source_adapter)
        assert own[2] == receipt.payload.adapter
        assert (
            TrustSettings(
                enabled=True,
                trusted_adapters=tuple(sorted(a for a in trusted if a is not None)),
                trust_untagged=True,
                propagate_taint=propagate,
            )
            == receipt.payload.policy
        )
        assert tuple(entry_id for _, entry_id, _ in included) == receipt.payload.included
        assert [
            *((i, "tainted", source) for i, source in tainted[:200]),
            *(
                (i, "quarantined" if i in held else "untrusted_adapter", UNSET)
                for _, i, _ in refused[:200]
            ),
        ] == [(e.position, e.reason, e.source) for e in receipt.payload.excluded]
        model.expose((reader_adapter or "", task_id or "", run_id or ""), receipt.payload.included)
        StoreMachine.tainted += len(tainted)
        StoreMachine.own_shown += sum(row.adapter not in TRUSTING for _, _, row in included)
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

    @initialize(
        modes=st.lists(st.sampled_from([None, "hold", "hold", "deny"]), min_size=2, max_size=2),
        owners=st.sampled_from(OWNER_LISTS[2:]),
        scope=st.sampled_from([None, None, "project"]),
    )
    def start_with_policies(
        self, modes: list[str | None], owners: tuple[str, ...], scope: str | None
    ) -> None:
        """Most logs start with conflict policies, so writes meet them often."""
        for tag, mode in zip(FACT_TAGS, modes, strict=True):
            if mode is not None:
                assert self.model.append() == set_conflict_policy(
                    self.db_path, tag, mode, owners=owners, scope=scope
                )
                self.model.policies[(scope or "", tag)] = (mode, frozenset(owners))

    @rule(
        tag=st.sampled_from([*FACT_TAGS, *FACT_TAGS, INVISIBLE_NAMES[0]]),
        on_conflict=st.sampled_from(["allow", "deny", "hold", "hold", "hold", "Deny", ""]),
        owners=st.sampled_from(OWNER_LISTS),
        trusting=st.sampled_from(TRUST_ENVIRONMENTS),
        scope=st.sampled_from([None, "run", "project"]),
        data=st.data(),
    )
    def set_policy(
        self,
        tag: str,
        on_conflict: str,
        owners: tuple[str, ...] | None,
        trusting: str | None,
        scope: str | None,
        data: st.DataObject,
    ) -> None:
        """Set a tag's conflict policy (an operator action), in one scope or every one, with
        its owners named or (by default) the adapters trusted where it is set; owners under
        allow are refused."""
        signer = self.model.signer(data)

        def call() -> int:
            with pytest.MonkeyPatch.context() as env:
                if trusting is not None:
                    env.setenv("FACTLEDGER_TRUST_ADAPTERS", trusting)
                return set_conflict_policy(
                    self.db_path,
                    tag,
                    on_conflict,
                    owners=owners,
                    scope=scope,
                    key=None if signer is None else self.keys[signer],
                )

        refused = on_conflict == "allow" and owners is not None
        if on_conflict not in ON_CONFLICT or tag not in FACT_TAGS or refused:
            with pytest.raises(InvalidInputError):
                call()
            return
        if not self.model.may_act(signer):
            with pytest.raises(NotAuthorizedError):
                call()
            StoreMachine.refused += 1
            return
        assert self.model.append() == call()
        named = owners if owners is not None else (trusting or "").split(",")
        self.model.policies[(scope or "", tag)] = (
            on_conflict,
            None if on_conflict == "allow" else frozenset(a for a in named if a),
        )

    @precondition(lambda self: PENDING in {held.status for held in self.model.held.values()})
    @rule(approving=st.booleans(), data=st.data())
    def decide(self, approving: bool, data: st.DataObject) -> None:
        """Approve or reject a held version (an operator action): only a pending one, not a
        denied or decided one or another event. An approved one becomes current unless a newer
        version already is."""
        model = self.model
        pending = sorted(p for p, held in model.held.items() if held.status == PENDING)
        target = data.draw(
            st.sampled_from(pending)
            if data.draw(st.integers(0, 3), label="other") > 0
            else st.sampled_from([*model.held, model.head]),
            label="target",
        )
        signer = model.signer(data)
        key = None if signer is None else self.keys[signer]
        call = (
            (lambda: approve(self.db_path, target, key=key))
            if approving
            else (lambda: reject(self.db_path, target, reason="r", key=key))
        )
        if target not in pending:
            with pytest.raises(InvalidInputError, match="not pending"):
                call()
            return
        if not model.may_act(signer):
            with pytest.raises(NotAuthorizedError):
                call()
            StoreMachine.refused += 1
            return
        assert model.append() == call()
        StoreMachine.decided += 1
        held = model.held[target]
        held.status = APPROVED if approving else REJECTED
        current = model.current(held.identity)
        if approving and (current is None or current.position < target):
            model.admit(held.identity, held.version)

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
        """An unsigned release, quarantine or conflict policy (naming the forger as its
        owner, or no owners: a policy as written before owners existed) appended through
        `eventlog` directly: it takes effect only while the log has no operator key."""
        model = self.model
        kind = data.draw(st.sampled_from(["release", "quarantine", "policy"]), label="kind")
        policy: tuple[str, Policy] | None = None
        payload: QuarantineApplied | QuarantineReleased | ConflictPolicySet
        if kind == "policy":
            target = 0
            tag = data.draw(st.sampled_from(FACT_TAGS))
            mode = data.draw(st.sampled_from(ON_CONFLICT))
            forged_owners = data.draw(st.sampled_from([None, (adapter,)]), label="owners")
            payload = ConflictPolicySet(tag=tag, on_conflict=mode)
            if forged_owners is not None:
                payload = ConflictPolicySet(tag=tag, on_conflict=mode, owners=forged_owners)
            owned = None if forged_owners is None or mode == "allow" else frozenset(forged_owners)
            policy = (tag, (mode, owned))
        elif model.quarantines and kind == "release":
            target = data.draw(st.sampled_from(sorted(model.quarantines)), label="target")
            payload = QuarantineReleased(quarantine_position=target, reason="forged")
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
        if policy is not None:
            model.policies[("", policy[0])] = policy[1]
        elif target:
            del model.quarantines[target]
        else:
            model.quarantines[position] = covered

    @rule(
        envelope=st.sampled_from(READER_ADAPTERS),
        agree=st.sampled_from([True, True, False]),
        reader=st.sampled_from(READERS),
        data=st.data(),
    )
    def forge_a_receipt(
        self,
        envelope: str | None,
        agree: bool,
        reader: tuple[str, str | None] | None,
        data: st.DataObject,
    ) -> None:
        """A receipt appended through `eventlog` directly, as a process that sets another
        task's id would: under its own adapter (or none), naming a writer's task and run, and
        now and then naming another adapter in its payload than in its envelope, or positions
        not before it. It exposes (its envelope's adapter, its task, its run) to the earlier
        positions it names, and only when its two adapters agree; no one else's writes are
        linked to it. Mostly, the task it names writes next, under one of the two adapters
        or another."""
        model = self.model
        task_id, run_id = reader or (None, None)
        others = [a for a in READER_ADAPTERS if a != envelope]
        named = envelope if agree else data.draw(st.sampled_from(others), label="named")
        included = tuple(
            data.draw(
                st.lists(
                    st.sampled_from([0, *range(1, model.head + 1), model.head + 1, model.head + 9]),
                    max_size=4,
                ),
                label="included",
            )
        )
        receipt = RecallRecorded(
            task_id=task_id,
            run_id=run_id,
            adapter=named,
            tags=("api",),
            limit=len(included) or 1,
            included=included,
            excluded=(),
            policy=MemoryTrustPolicy().settings(),
            head_position=model.head,
            rendered_hash=content_hash(b""),
        )
        log = open_log(self.db_path)
        try:
            event = NewEvent(
                payload=receipt,
                producer_task_id=task_id or "",
                run_id=run_id,
                source_adapter=envelope,
            )
            position = log.append(event).position
        finally:
            log.close()
        assert model.append(envelope) == position
        if named == envelope:
            model.expose(
                (envelope or "", task_id or "", run_id or ""),
                tuple(p for p in included if 0 < p < position),
            )
        StoreMachine.forged_receipts += 1
        self.store.close()
        self.store = self._open()
        self.kbs = self._facades()
        writer = data.draw(st.sampled_from([envelope, envelope, named, *ADAPTERS]), label="writer")
        if task_id in RUNS_OF:
            self.publish(RUNS_OF[task_id], "project", [("api", "users", "w")], writer, True, data)
        elif task_id is not None:
            self.add("learning", "w", ["api"], 1.0, task_id, writer, data)
        self.taint_of_every_write()

    @rule()
    def taint_of_every_write(self) -> None:
        """Exactly the writes the model holds tainted (an untrusted or quarantined ancestor,
        along receipts it honours and declared sources) are tainted, each by the earliest."""
        model = self.model
        policy = MemoryTrustPolicy(trusted_adapters=frozenset({TRUSTED}))
        expected = {
            position: source
            for position in sorted(model.sources)
            if (source := model.taint_source(position, TRUSTING)) is not None
        }
        with self.store.snapshot() as snap:
            assert expected == taint(snap, sorted(model.sources), policy)
        StoreMachine.tainted_writes += len(expected)

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
        """A facade's subscribe returns each key's newest version (an allowed adapter's) and,
        unless its allow-list is empty, receipts what it returned: that reaches its task."""
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
        if allow == []:
            return
        [receipt] = list(self.store.event_log.read(after=self.model.head))
        adapter = self._adapter(None)
        self.model.append(adapter)
        assert isinstance(receipt.payload, RecallRecorded)
        reader = (f"task-{RUNS[run]}", RUNS[run], adapter)
        assert reader == (receipt.producer_task_id, receipt.run_id, receipt.source_adapter)
        assert reader == (receipt.payload.task_id, receipt.payload.run_id, receipt.payload.adapter)
        assert tuple(f.position for f in expected) == receipt.payload.included
        self.model.expose((adapter or "", reader[0], reader[1] or ""), receipt.payload.included)

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


@pytest.mark.slow
def test_store_behaves_like_its_plain_python_model(
    tmp_path: Path, pytestconfig: pytest.Config
) -> None:
    """Random sequences of adds, batches (some with a bad row), removes, publishes, decays,
    prunes, recalls by tasks (whose later writes derive from what they read) and writes
    declaring their sources, quarantines and releases, conflict policies (naming their
    owners, or by default the adapters trusted where they are set; a non-owner's version is
    held even when written first) and approvals or rejections of held versions (signed or
    not, by operators or not), operator keys added and removed, unsigned operator actions
    (policies naming the forger as owner among them) and forged receipts (another task's,
    under another adapter, or with payload and envelope adapters that disagree) appended
    around the API, reopens and rebuild checks: every read and every receipt (tainted
    entries kept out, naming their source; a reader's own adapter trusted, and recorded in
    its receipt's policy) equals the model's answer, with each content hash the keyed hash of
    its text under the salt the log stored, exactly the writes the model holds tainted are,
    the head is always the model's, and whenever checked the read model equals a refold of
    the log. The same examples every run, unless --hypothesis-seed
    picks others."""
    StoreMachine.examples = StoreMachine.steps = 0
    StoreMachine.quarantines = StoreMachine.releases = 0
    StoreMachine.refused = StoreMachine.forged = StoreMachine.forged_receipts = 0
    StoreMachine.tainted = StoreMachine.tainted_writes = StoreMachine.own_shown = 0
    StoreMachine.held = StoreMachine.decided = StoreMachine.held_first = 0
    StoreMachine.keys = {name: read_operator_key(key_file(tmp_path, name)) for name in KEY_NAMES}
    run_state_machine_as_test(
        StoreMachine,
        settings=settings(
            max_examples=EXAMPLES,
            stateful_step_count=STEPS,
            deadline=None,
            derandomize=pytestconfig.getoption("--hypothesis-seed") is None,
            database=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        ),
    )
    print(
        f"model test: {StoreMachine.examples} examples, {StoreMachine.steps} checked states, "
        f"{StoreMachine.quarantines} quarantines, {StoreMachine.releases} releases, "
        f"{StoreMachine.refused} refused operator actions, {StoreMachine.forged} forged, "
        f"{StoreMachine.forged_receipts} forged receipts, "
        f"{StoreMachine.tainted} kept out as tainted, "
        f"{StoreMachine.own_shown} shown to their own adapter only, "
        f"{StoreMachine.tainted_writes} tainted writes checked, "
        f"{StoreMachine.held} held or denied ({StoreMachine.held_first} written first), "
        f"{StoreMachine.decided} decided"
    )
    assert StoreMachine.examples >= EXAMPLES
    assert StoreMachine.quarantines > 0 and StoreMachine.releases > 0
    assert StoreMachine.refused > 0 and StoreMachine.forged > 0
    assert StoreMachine.forged_receipts > 0 and StoreMachine.tainted_writes > 0
    assert StoreMachine.tainted > 0 and StoreMachine.held > 0 and StoreMachine.decided > 0
    assert StoreMachine.own_shown > 0
    assert StoreMachine.held_first > 0
