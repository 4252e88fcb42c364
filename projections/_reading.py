"""The one read path: what a reader is shown, judged, escaped and receipted (internal).

Every read that shows memory to someone goes through `read`: the prompt path
(`projections._prompt`), agents' reads (`projections._agent_reads`, over MCP and the command
line), `CrossTaskKB.subscribe`, and the command line's history, blame, diff and as-of
(`replay.trusted`). A read is a `Reading`: who reads (named in its receipt, or none for an
operator's audit), the trust policy it reads under, and whether it shows only what that
policy trusts or every row marked with its verdict (`--all`). `read` takes a snapshot of the
live read model; the read's selection judges its rows there, with `projections._verdicts`
alone; `read` keeps any row not trusted out of a trusted-only read, escapes what is shown,
and appends the receipt: the positions shown, those kept out and why, the policy, the head
read at, and the BLAKE3 hash of what was shown. The receipt names the reader as the event's
own producer, run and adapter as well as in its payload, so a PostgreSQL login bound to an
adapter may append it.

The snapshot is closed before the receipt is appended: a host's cache of a log held
elsewhere folds each append, which it cannot do inside a read of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Generic, NamedTuple, TypeVar, cast

import msgspec

from eventlog import (
    Exclusion,
    InvalidTypeError,
    NewEvent,
    ReadOnlyStoreError,
    RecallRecorded,
    content_hash,
)
from eventlog.checks import MAX_POSITION
from projections import _reads as reads
from projections import _sql_reads as sql_reads
from projections._entries import Fact, MemoryEntry
from projections._projector import ReadModelSnapshot
from projections._reads import Queryable
from projections._store import MemoryStore
from projections._trust import TRUSTED as TRUSTED
from projections._trust import MemoryTrustPolicy
from projections._verdicts import Judged as Judged
from projections._verdicts import mark, verdicts
from projections._view import READ_ONLY, MemoryView
from projections._visible import escape_invisible

T = TypeVar("T")
S = TypeVar("S")
F = TypeVar("F", Fact, MemoryEntry)

NO_LIMIT = 0
"""The `limit` a receipt records for a read that returns everything it may."""
NAMED_EXCLUSIONS = 400
"""How many exclusions a receipt names at most (the first ones); reads count them all."""
FIRST_CHUNK = 32
"""Entries an entry read takes at first (at least its limit); then it doubles."""
UNFILTERED = MemoryTrustPolicy(enabled=False, propagate_taint=False)
"""The policy of a read that applies none (`CrossTaskKB.subscribe`: its allow-list is its
filter): only quarantine keeps a row out."""


@dataclass(frozen=True)
class NamedReader:
    """Who a receipt names: the task, run and adapter a read was made for (each may be none).
    The adapter is also the receipt event's own, so it must be one the log lets this handle
    write as: `of` falls back to the handle's (a PostgreSQL login's binding included)."""

    task_id: str | None
    run_id: str | None
    adapter: str | None

    @classmethod
    def of(
        cls, store: MemoryView, task_id: str | None, run_id: str | None, adapter: str | None
    ) -> NamedReader:
        """The reader `task_id`, `run_id`, `adapter` ('' as none), reading through `store`:
        with no adapter, the one `store` writes as."""
        chosen = adapter if adapter is not None else store.source_adapter
        return cls(task_id=task_id or None, run_id=run_id or None, adapter=chosen)


@dataclass(frozen=True)
class Reading:
    """How a read is made: for whom (None: an operator's audit, which is never receipted and
    shows every row), under which policy (with the reader's own adapter trusted:
    `reader_policy`), and whether every row is shown, marked with its verdict, or only those
    the policy trusts."""

    reader: NamedReader | None
    policy: MemoryTrustPolicy
    everything: bool = False

    def __post_init__(self) -> None:
        if self.reader is None:
            object.__setattr__(self, "everything", True)
        else:
            object.__setattr__(self, "policy", reader_policy(self.policy, self.reader.adapter))


def reader_policy(policy: MemoryTrustPolicy, adapter: str | None) -> MemoryTrustPolicy:
    """The policy a read by a reader writing under `adapter` is judged under: `policy` with
    that adapter trusted. An agent is shown its own adapter's writes on every path (the
    prompt, agents' reads over MCP and the command line); every `Reading` applies this."""
    return policy.trusting(adapter)


class Judge:
    """Verdicts for a selection, in the read's snapshot, under the read's policy."""

    __slots__ = ("everything", "policy", "snap")

    def __init__(
        self, snap: ReadModelSnapshot, policy: MemoryTrustPolicy, everything: bool
    ) -> None:
        self.snap = snap
        self.policy = policy
        self.everything = everything

    def __call__(self, rows: Sequence[Judged]) -> list[Exclusion | None]:
        return verdicts(self.snap, self.policy, rows)


class Selection(NamedTuple, Generic[T]):
    """What a read selected: its rows with the verdict on each (`trust`) and the positions
    each shows, the rows it passed over, and whether more rows match past its limit."""

    rows: list[T]
    trust: list[str]
    shows: list[tuple[int, ...]]
    kept_out: list[Exclusion]
    more: bool = False


@dataclass(frozen=True)
class Read(Generic[S]):
    """What a reader was shown, the verdict on each row, what was kept out, and the receipt
    (None for an audit)."""

    shown: S
    trust: list[str]
    included: tuple[int, ...]
    kept_out: list[Exclusion]
    more: bool
    receipt_position: int | None


Select = Callable[[Judge], Selection[T]]
Show = Callable[[list[T]], tuple[S, bytes]]
"""Rows as the reader is shown them, and the bytes the receipt hashes."""


def read(
    store: MemoryView,
    reading: Reading,
    select: Select[T],
    *,
    tags: tuple[str, ...],
    limit: int,
    show: Show[T, S],
) -> Read[S]:
    """Select rows in one snapshot of `store`, judged under `reading.policy`; show them (only
    the trusted ones unless `reading.everything`); receipt the read for its reader."""
    if not isinstance(store, MemoryView):
        raise InvalidTypeError(f"store must be a MemoryView, not {type(store).__name__}")
    writable = None if reading.reader is None else writable_store(store)
    with store.snapshot() as found:
        snap = _model(found)
        head = snap.head().position
        chosen = select(Judge(snap, reading.policy, reading.everything))
    kept = [i for i, verdict in enumerate(chosen.trust) if reading.everything or verdict == TRUSTED]
    rows, trust = [chosen.rows[i] for i in kept], [chosen.trust[i] for i in kept]
    included = tuple(dict.fromkeys(p for i in kept for p in chosen.shows[i]))
    shown, rendered = show(rows)
    receipt = None
    if writable is not None and reading.reader is not None:
        receipt = _receipt(
            writable, reading, tags, limit, head, included, chosen.kept_out, rendered
        )
    return Read(
        shown=shown,
        trust=trust,
        included=included,
        kept_out=chosen.kept_out,
        more=chosen.more,
        receipt_position=receipt,
    )


def policy_given(store: object, trust_policy: object) -> MemoryTrustPolicy:
    """The policy a read through `store` is given: `trust_policy`, else the store's own
    (`MemoryView.trust_policy`: the environment's, or the adapters the store was opened to
    trust)."""
    if trust_policy is not None:
        if not isinstance(trust_policy, MemoryTrustPolicy):
            raise InvalidTypeError(
                f"trust_policy must be a MemoryTrustPolicy, not {type(trust_policy).__name__}"
            )
        return trust_policy
    if not isinstance(store, MemoryView):
        raise InvalidTypeError(f"store must be a MemoryView, not {type(store).__name__}")
    return store.trust_policy()


def writable_store(store: object) -> MemoryStore:
    """A named reader's reads are receipted, so they need a store that writes."""
    if isinstance(store, MemoryStore):
        return store
    if isinstance(store, MemoryView):
        raise ReadOnlyStoreError(READ_ONLY)
    raise InvalidTypeError(f"store must be a SQLiteMemoryStore, not {type(store).__name__}")


def _model(snap: Queryable) -> ReadModelSnapshot:
    """A snapshot that can hold rows to their events: a store's, or a view's of a whole log
    (`open_view`); a view of a past position, folded without its log, cannot judge."""
    if not (callable(getattr(snap, "head", None)) and callable(getattr(snap, "read", None))):
        raise InvalidTypeError(
            "reads are judged in a store, or a view of a log opened with open_view; "
            "a view of a past position cannot hold rows to their events"
        )
    return cast(ReadModelSnapshot, snap)


def _receipt(
    store: MemoryStore,
    reading: Reading,
    tags: tuple[str, ...],
    limit: int,
    head: int,
    included: tuple[int, ...],
    kept_out: list[Exclusion],
    rendered: bytes,
) -> int:
    """Append the read's receipt, as its reader; return its position."""
    reader = reading.reader
    assert reader is not None
    receipt = RecallRecorded(
        task_id=reader.task_id,
        run_id=reader.run_id,
        adapter=reader.adapter,
        tags=tags,
        limit=limit,
        included=included,
        excluded=tuple(kept_out[:NAMED_EXCLUSIONS]),
        policy=reading.policy.settings(),
        head_position=head,
        rendered_hash=content_hash(rendered),
    )
    event = NewEvent(
        payload=receipt,
        producer_task_id=reader.task_id or "",
        run_id=reader.run_id,
        source_adapter=reader.adapter,
    )
    with store.write_transaction() as tx:
        return tx.append([event])[0].position


# -- showing rows ------------------------------------------------------------------------


def shown_as_stored(rows: list[T]) -> tuple[list[T], bytes]:
    """Rows as stored (for a caller that escapes what it prints), hashed as msgspec JSON."""
    return rows, msgspec.json.encode(rows)


def shown_escaped(rows: list[T]) -> tuple[list[T], bytes]:
    """Rows with every text field's invisible characters escaped (newlines and tabs kept in
    a fact's value and an entry's content), hashed as msgspec JSON."""
    escaped = [_escaped(row) for row in rows]
    return escaped, msgspec.json.encode(escaped)


def _escaped(row: T) -> T:
    if isinstance(row, Fact):
        return msgspec.structs.replace(
            row,
            tag=_field(row.tag),
            key=_field(row.key),
            value=escape_invisible(row.value),
            producer_task_id=_field(row.producer_task_id),
            run_id=None if row.run_id is None else _field(row.run_id),
            source_adapter=None if row.source_adapter is None else _field(row.source_adapter),
        )
    if isinstance(row, MemoryEntry):
        return msgspec.structs.replace(
            row,
            content=escape_invisible(row.content),
            tags=[_field(tag) for tag in row.tags],
            task_id=None if row.task_id is None else _field(row.task_id),
            source_agent=_field(row.source_agent),
            source_model=_field(row.source_model),
            source_adapter=None if row.source_adapter is None else _field(row.source_adapter),
        )
    raise InvalidTypeError(f"cannot show a {type(row).__name__} escaped")


def _field(text: str) -> str:
    return escape_invisible(text, keep_newlines=False)


# -- selections ----------------------------------------------------------------------------


def current_facts(identity: tuple[str, str, str], adapters: Sequence[str] | None) -> Select[Fact]:
    """One fact per key under (scope, run_key, tag), newest first: the current version, or
    (an allow-list given) the newest one an allowed adapter wrote. A trusted-only read shows
    instead of a current version it may not trust the newest earlier one it may."""

    def select(judge: Judge) -> Selection[Fact]:
        currents = reads.current_facts(judge.snap, identity, adapters)
        found = judge([Judged(fact.position, fact.source_adapter) for fact in currents])
        if judge.everything:
            return _everything(currents, found)
        shown: list[Fact] = []
        kept: list[Exclusion] = []
        for fact, verdict in zip(currents, found, strict=True):
            if verdict is None:
                shown.append(fact)
                continue
            kept.append(verdict)
            older = _versions(judge.snap, (*identity, fact.key), up_to=fact.position - 1)
            for (version, _), earlier in zip(older, _judged_versions(judge, older), strict=True):
                if earlier is None:
                    shown.append(version)
                    break
                kept.append(earlier)
        shown.sort(key=_position, reverse=True)
        return _trusted(shown, kept)

    return select


def fact_versions(identity: tuple[str, str, str, str], count: int | None) -> Select[Fact]:
    """The versions of one fact, oldest first: the newest `count` (all when None) of those
    the read shows."""

    def select(judge: Judge) -> Selection[Fact]:
        versions = _versions(judge.snap, identity, up_to=judge.snap.head().position)
        found = _judged_versions(judge, versions)
        pairs = [
            (fact, verdict)
            for (fact, _), verdict in zip(versions, found, strict=True)
            if judge.everything or verdict is None
        ][:count]
        pairs.reverse()
        rows = [fact for fact, _ in pairs]
        kept = [] if judge.everything else [verdict for verdict in found if verdict is not None]
        return Selection(rows, [mark(v) for _, v in pairs], _shows(rows), kept)

    return select


def newest_entries(
    kind: str | None,
    tags: tuple[str, ...],
    adapters: tuple[str, ...] | None,
    count: int,
) -> Select[MemoryEntry]:
    """The newest `count` visible entries of `kind`, with any of `tags`, written by
    `adapters` (an allow-list: None reads all, () none), newest first. A trusted-only read
    reads on past the entries it keeps out until it has `count`."""

    def select(judge: Judge) -> Selection[MemoryEntry]:
        if adapters == ():
            return Selection([], [], [], [])
        if judge.everything:
            rows = reads.entries(
                judge.snap,
                type=kind,
                tags=tags,
                adapters=adapters,
                limit=min(count + 1, MAX_POSITION),
            )
            found = judge([_judged_entry(entry) for entry in rows[:count]])
            everything = _everything(rows[:count], found)
            return everything._replace(more=len(rows) > count)
        shown: list[MemoryEntry] = []
        kept: list[Exclusion] = []
        before, chunk = None, max(FIRST_CHUNK, count)
        while True:
            rows = reads.entries(
                judge.snap, type=kind, tags=tags, adapters=adapters, limit=chunk, before=before
            )
            for entry, verdict in zip(rows, judge([_judged_entry(e) for e in rows]), strict=True):
                if len(shown) == count:
                    return _trusted(shown, kept)._replace(more=True)
                if verdict is None:
                    shown.append(entry)
                else:
                    kept.append(verdict)
            if len(rows) < chunk:
                return _trusted(shown, kept)
            before, chunk = rows[-1].id, min(2 * chunk, MAX_POSITION)

    return select


def judged_rows(rows: Sequence[T], judged: Callable[[T], Sequence[Judged]]) -> Select[T]:
    """`rows` read elsewhere (a history, a blame, a diff, a state in the past), each judged
    in the live read model by the versions it shows (`judged`): a row is trusted when every
    one of them is, and marked with the first verdict against it otherwise."""

    def select(judge: Judge) -> Selection[T]:
        parts = [judged(row) for row in rows]
        found = iter(judge([part for row_parts in parts for part in row_parts]))
        shown: list[T] = []
        trust: list[str] = []
        shows: list[tuple[int, ...]] = []
        kept: list[Exclusion] = []
        for row, row_parts in zip(rows, parts, strict=True):
            against = [verdict for _ in row_parts if (verdict := next(found)) is not None]
            if against and not judge.everything:
                kept.extend(against)
                continue
            shown.append(row)
            trust.append(mark(against[0] if against else None))
            shows.append(tuple(part.position for part in row_parts))
        return Selection(shown, trust, shows, kept)

    return select


def _everything(rows: list[F], found: list[Exclusion | None]) -> Selection[F]:
    """Every row, marked with its verdict."""
    return Selection(rows, [mark(v) for v in found], _shows(rows), [])


def _trusted(rows: list[F], kept: list[Exclusion]) -> Selection[F]:
    """Rows all trusted, and those passed over on the way."""
    return Selection(rows, [TRUSTED] * len(rows), _shows(rows), kept)


def _versions(
    snap: ReadModelSnapshot, identity: tuple[str, str, str, str], *, up_to: int
) -> list[tuple[Fact, bool]]:
    """Versions of one fact identity at or below `up_to`, newest first, with their
    quarantine flags."""
    rows = sql_reads.FACT_VERSIONS_NEWEST_FIRST.rows(snap, (*identity, up_to))
    return [(reads.fact_from_row(row), bool(row.quarantined)) for row in rows]


def _judged_versions(judge: Judge, versions: list[tuple[Fact, bool]]) -> list[Exclusion | None]:
    return judge([Judged(fact.position, fact.source_adapter, flag) for fact, flag in versions])


def _judged_entry(entry: MemoryEntry) -> Judged:
    return Judged(entry.position, entry.source_adapter, entry=entry)


def _position(row: Fact | MemoryEntry) -> int:
    return row.position


def _shows(rows: Iterable[Fact | MemoryEntry]) -> list[tuple[int, ...]]:
    return [(row.position,) for row in rows]
