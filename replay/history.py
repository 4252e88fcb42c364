"""Fact provenance: every version of a fact (`history`), who set each current value (`blame`),
and what changed between two log positions (`diff`), each with the events responsible.

`history` and `blame` read the ledger's read model at the log's head (`Ledger.at_head`: a
host's cache caught up, the file's tables when current, else a fold in memory), so they
always describe the whole log; `history` at a past position, and `diff`, fold the log from
the nearest snapshot at or before their first point (`replay.snapshots`). Nothing is written.
`history` also lists the quarantines and releases that touch the versions it shows, each
marked as having taken effect or not (an operator action the log's operators did not sign
is unauthorized). A version whose text an operator erased shows as `erased`, with the
erasure that removed it and never a value (`replay.erased`); `diff` marks such a value too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Literal, assert_never

import msgspec

from eventlog import (
    ConflictPolicySet,
    FactApproved,
    FactPublished,
    FactRejected,
    InvalidInputError,
    LogSnapshot,
    MemoryAdded,
    MemoryRemoved,
    MemoryReweighted,
    OperatorAdded,
    OperatorRemoved,
    QuarantineApplied,
    QuarantineReleased,
    RecallRecorded,
    RecordedEvent,
    Unreadable,
)
from eventlog.checks import check_optional_identifier, check_position
from eventlog.events import ContentErased, LogMigrated
from eventlog.signing import authorization_of
from projections.internal import (
    Identity,
    KnowledgeProjector,
    Queryable,
    TableWriter,
    batches,
    check_key,
    check_scope,
    check_tag,
    conflicts,
    fact_identity,
    folded_at,
    inquiries,
    matching_positions,
)
from replay.conflicts import HeldVersion, held_version
from replay.erased import ErasedBy, erased_by
from replay.snapshots import folded_past, kept, past_position

if TYPE_CHECKING:
    from replay.ledger import Ledger

Status = Literal["current", "superseded", "quarantined", "erased"]
Change = Literal["added", "changed", "removed"]


class FactVersion(msgspec.Struct, frozen=True, kw_only=True):
    """One published version of a fact, with the provenance of the event that wrote it."""

    position: int
    event_id: str
    ts_ns: int
    scope: str
    run_id: str | None
    tag: str
    key: str
    value: str | None
    """None when erased (`erased` says by whom and why)."""
    content_hash: str
    producer_task_id: str
    source_adapter: str | None
    replaced_position: int | None
    """The version that was current when this one was published."""
    status: Status
    erased: ErasedBy | None = None
    """The erasure that removed its text, if one did."""


class OperatorAction(msgspec.Struct, frozen=True, kw_only=True):
    """A quarantine or release touching versions a history shows, and whether it took effect."""

    position: int
    event_id: str
    kind: str
    ts_ns: int
    producer_task_id: str
    run_id: str | None
    source_adapter: str | None
    signed_by: str | None
    """The id of the key whose signature it carries, if any."""
    authorized: bool
    """False when it took no effect: the log had an operator key and it was not validly
    signed by one (`unauthorized_reason` says how)."""
    unauthorized_reason: str | None
    quarantine_position: int
    """The quarantine it applies, or releases."""
    covers: tuple[int, ...]
    """The versions shown that the quarantine covers (or would have covered, had it or the
    release been authorized)."""


class FactHistory(msgspec.Struct, frozen=True, kw_only=True):
    """Every version of the facts selected, oldest first, as of log position `at_position`,
    and the quarantines and releases touching them, authorized or not."""

    at_position: int
    versions: list[FactVersion]
    actions: list[OperatorAction]
    held: list[HeldVersion] = []
    """Versions a conflict policy kept from becoming current (denied, pending, decided)."""
    unreadable: list[UnreadableRow] = []
    """Rows of the log this version could not decode (whatever fact they were meant for):
    they changed nothing; each with its position and the writer its body names."""


class UnreadableRow(msgspec.Struct, frozen=True, kw_only=True):
    """A row of the log this version could not decode, folded as changing nothing."""

    position: int
    claimed_kind: str | None
    """The kind its body names, when it names one readably."""
    source_adapter: str | None
    producer_task_id: str
    reason: str


class BlameLine(msgspec.Struct, frozen=True, kw_only=True):
    """A current fact and the event that set it."""

    scope: str
    run_id: str | None
    """The run of a run-scoped fact (None in project scope)."""
    tag: str
    key: str
    value: str
    position: int
    event_id: str
    ts_ns: int
    producer_task_id: str
    source_adapter: str | None
    versions_before: int
    """Versions of the same fact published before this one (quarantined ones included)."""


class Blame(msgspec.Struct, frozen=True, kw_only=True):
    """Who set each current fact, as of log position `at_position`."""

    at_position: int
    facts: list[BlameLine]


class FactChange(msgspec.Struct, frozen=True, kw_only=True):
    """A fact whose current value differs between two points, and the event that made it so."""

    change: Change
    scope: str
    run_id: str | None
    tag: str
    key: str
    old_value: str | None
    """None when there is no old value, or it was erased since (`old_erased`)."""
    new_value: str | None
    """None when there is no new value, or it was erased since (`new_erased`)."""
    old_position: int | None
    new_position: int | None
    old_source_adapter: str | None
    """The adapter that wrote the old value (None: none, or no old value)."""
    new_source_adapter: str | None
    """The adapter that wrote the new value (None: none, or no new value)."""
    by_position: int
    """The last event in the window that changed this fact's current version: its publish,
    or a quarantine or release."""
    by_event_id: str
    by_kind: str
    by_producer_task_id: str
    by_source_adapter: str | None
    by_ts_ns: int
    old_erased: ErasedBy | None = None
    """The erasure that removed the old value's text since, if one did."""
    new_erased: ErasedBy | None = None
    """The erasure that removed the new value's text since, if one did."""


class FactDiff(msgspec.Struct, frozen=True, kw_only=True):
    """Facts added, changed and removed between `from_position` and `to_position`."""

    from_position: int
    to_position: int
    tag: str | None
    added: list[FactChange]
    changed: list[FactChange]
    removed: list[FactChange]


def history(
    ledger: Ledger,
    *,
    scope: str | None = None,
    tag: str | None = None,
    key: str | None = None,
    run_id: str | None = None,
    at: int | None = None,
) -> FactHistory:
    """Every version of the facts matching the filters (all facts without any), oldest first.

    `run_id` selects versions published in that run (for run-scoped facts, the fact's run).
    With `at`, the history as it was right after that position, folded from the nearest
    snapshot (`replay.snapshots`); a text erased since shows as erased.
    """
    filters = _filters(scope, tag, key, run_id)
    projectors = [KnowledgeProjector(ledger.log_id)]
    if at is None:
        with ledger.at_head(projectors) as (snap, model):
            return _history(snap, model, filters, lambda ps: erased_by(snap, model, ps))
    target = past_position(ledger, at)
    with (
        folded_past(ledger, target, projectors) as (then, model),
        ledger.at_head(projectors) as (now, live),
    ):
        return _history(then, model, filters, lambda ps: erased_by(now, live, ps))


def _history(
    snap: LogSnapshot,
    model: Queryable,
    filters: dict[str, str | None],
    erased_of: Callable[[list[int]], dict[int, ErasedBy]],
) -> FactHistory:
    rows = inquiries.fact_versions(model, **filters)
    event_ids = _event_ids(snap, [row.position for row in rows])
    erased = erased_of([row.position for row in rows])
    versions = [_version(row, event_ids[row.position], erased.get(row.position)) for row in rows]
    actions = _actions(snap, model, {row.position for row in rows})
    held = [held_version(row) for row in conflicts.held_matching(model, **filters)]
    return FactHistory(
        at_position=snap.head().position,
        versions=versions,
        actions=actions,
        held=held,
        unreadable=[
            UnreadableRow(
                position=row.position,
                claimed_kind=row.claimed_kind,
                source_adapter=row.source_adapter,
                producer_task_id=row.producer_task_id,
                reason=row.reason,
            )
            for row in inquiries.unreadable_rows(model)
        ],
    )


def blame(
    ledger: Ledger,
    *,
    scope: str | None = None,
    tag: str | None = None,
    run_id: str | None = None,
) -> Blame:
    """For each current fact matching the filters: the event, producer and adapter that set it,
    and how many versions came before. `run_id` as in `history`."""
    filters = _filters(scope, tag, None, run_id)
    del filters["key"]
    with ledger.at_head([KnowledgeProjector(ledger.log_id)]) as (snap, model):
        rows = inquiries.fact_blame(model, **filters)
        event_ids = _event_ids(snap, [row.position for row in rows])
        lines = [
            BlameLine(
                scope=row.scope,
                run_id=row.run_key or None,
                tag=row.tag,
                key=row.key,
                value=row.value,
                position=row.position,
                event_id=event_ids[row.position],
                ts_ns=row.ts_ns,
                producer_task_id=row.producer_task_id,
                source_adapter=row.source_adapter,
                versions_before=row.versions_before,
            )
            for row in rows
        ]
        return Blame(at_position=snap.head().position, facts=lines)


def diff(
    ledger: Ledger,
    from_position: int,
    to_position: int,
    tag: str | None = None,
) -> FactDiff:
    """Facts whose current version differs between the state right after `from_position` and
    right after `to_position` (optionally under one tag), with the event responsible for each.
    A value erased since (as of the log's head, even when erased after `to_position`) is
    shown as erased, never as its text."""
    start = check_position("from_position", from_position)
    end = check_position("to_position", to_position)
    wanted = None if tag is None else check_tag(tag)
    if start > end:
        raise InvalidInputError(f"from_position {start} is after to_position {end}")
    event_log = ledger.event_log
    head = event_log.head().position
    if end > head:
        raise InvalidInputError(f"to_position {end} is past the log head {head}")
    projector = KnowledgeProjector(event_log.log_id)
    directory, erased_after = kept(ledger)
    folded = folded_at(
        event_log, start, [projector], directory=directory, erased_after=erased_after
    )
    try:
        before = _current(folded.database)
        with folded.database.bulk():
            events = event_log.read(after=start, until=end)
            causes = _fold_noting_causes(folded.database, projector, events)
        after = _current(folded.database)
    finally:
        folded.close()
    changes = [
        _change(identity, before.get(identity), after.get(identity), causes[identity])
        for identity in sorted(before.keys() | after.keys())
        if before.get(identity) != after.get(identity) and wanted in (None, identity[2])
    ]
    changes = _erasures_marked(ledger, changes)
    return FactDiff(
        from_position=start,
        to_position=end,
        tag=wanted,
        added=[c for c in changes if c.change == "added"],
        changed=[c for c in changes if c.change == "changed"],
        removed=[c for c in changes if c.change == "removed"],
    )


def _filters(
    scope: str | None, tag: str | None, key: str | None, run_id: str | None
) -> dict[str, str | None]:
    return {
        "scope": None if scope is None else check_scope(scope),
        "tag": None if tag is None else check_tag(tag),
        "key": None if key is None else check_key(key),
        "run_id": check_optional_identifier("run_id", run_id),
    }


def _event_ids(snap: LogSnapshot, positions: Iterable[int]) -> dict[int, str]:
    return {p: snap.event_at(p).event_id for p in positions}


def _actions(snap: LogSnapshot, model: Queryable, shown: set[int]) -> list[OperatorAction]:
    """Quarantines and releases whose quarantine covers any of the `shown` versions."""
    if not shown:
        return []
    refused = {row.position: row.reason for row in inquiries.unauthorized(model)}
    candidates = sorted(
        {
            p
            for row in inquiries.quarantines(model)
            for p in (row.position, row.released_by)
            if p is not None
        }
        | set(refused)
    )
    covered: dict[int, tuple[int, ...]] = {}
    actions = []
    for position in candidates:
        record = snap.event_at(position)
        payload = record.payload
        match payload:
            case QuarantineApplied():
                target = position
            case QuarantineReleased():
                target = payload.quarantine_position
            case (
                FactPublished()
                | MemoryAdded()
                | MemoryRemoved()
                | MemoryReweighted()
                | RecallRecorded()
                | OperatorAdded()
                | OperatorRemoved()
                | ConflictPolicySet()
                | FactApproved()
                | FactRejected()
                | LogMigrated()
                | ContentErased()
                | Unreadable()
            ):
                continue
            case _:
                assert_never(payload)
        if target not in covered:
            applied = record if target == position else None
            if applied is None and 1 <= target < position:
                applied = snap.event_at(target)
            found = []
            if applied is not None and isinstance(applied.payload, QuarantineApplied):
                found = matching_positions(model, target, applied.payload)
            covered[target] = tuple(p for p in found if p in shown)
        if covered[target]:
            actions.append(_action(record, target, covered[target], refused.get(position)))
    return actions


def _action(
    record: RecordedEvent, target: int, covers: tuple[int, ...], refused: str | None
) -> OperatorAction:
    signature = authorization_of(record.payload)
    return OperatorAction(
        position=record.position,
        event_id=record.event_id,
        kind=record.kind,
        ts_ns=record.ts_ns,
        producer_task_id=record.producer_task_id,
        run_id=record.run_id,
        source_adapter=record.source_adapter,
        signed_by=None if signature is None else signature.key_id,
        authorized=refused is None,
        unauthorized_reason=refused,
        quarantine_position=target,
        covers=covers,
    )


def _erasures_marked(ledger: Ledger, changes: list[FactChange]) -> list[FactChange]:
    """`changes`, each value erased as of the log's head marked so and shown as None."""
    sides = {p for c in changes for p in (c.old_position, c.new_position) if p is not None}
    if not sides:
        return changes
    with ledger.at_head([KnowledgeProjector(ledger.log_id)]) as (snap, model):
        erased = erased_by(snap, model, sides)
    return [_marked(change, erased) for change in changes]


def _marked(change: FactChange, erased: dict[int, ErasedBy]) -> FactChange:
    old = None if change.old_position is None else erased.get(change.old_position)
    new = None if change.new_position is None else erased.get(change.new_position)
    if old is None and new is None:
        return change
    return msgspec.structs.replace(
        change,
        old_value=None if old is not None else change.old_value,
        new_value=None if new is not None else change.new_value,
        old_erased=old,
        new_erased=new,
    )


def _version(row: inquiries.Version, event_id: str, erased: ErasedBy | None) -> FactVersion:
    status: Status = (
        "erased"
        if erased is not None
        else "current"
        if row.is_current
        else "quarantined"
        if row.quarantined
        else "superseded"
    )
    return FactVersion(
        position=row.position,
        event_id=event_id,
        ts_ns=row.ts_ns,
        scope=row.scope,
        run_id=row.run_id,
        tag=row.tag,
        key=row.key,
        value=None if erased is not None else row.value,
        content_hash=row.content_hash,
        producer_task_id=row.producer_task_id,
        source_adapter=row.source_adapter,
        replaced_position=row.replaced_position,
        status=status,
        erased=erased,
    )


def _fold_noting_causes(
    scratch: TableWriter, projector: KnowledgeProjector, events: Iterable[RecordedEvent]
) -> dict[Identity, RecordedEvent]:
    """Fold `events`; return, per fact, the last of them that moved its current version: a
    publish that became current (not one a conflict policy held or denied), or an operator
    action (a quarantine, a release, an approval) that changed which version is."""
    causes: dict[Identity, RecordedEvent] = {}
    batch: list[RecordedEvent] = []

    def fold_batch() -> None:
        projector.apply(scratch, batch)
        published = [r.position for r in batch if isinstance(r.payload, FactPublished)]
        held = inquiries.held_among(scratch, published)
        for record in batch:
            payload = record.payload
            if isinstance(payload, FactPublished) and record.position not in held:
                identity = fact_identity(payload.scope, record.run_id, payload.tag, payload.key)
                causes[identity] = record
        batch.clear()

    for chunk in batches(events):
        for record in chunk:
            payload = record.payload
            match payload:
                case (
                    FactPublished()
                    | MemoryAdded()
                    | MemoryRemoved()
                    | MemoryReweighted()
                    | RecallRecorded()
                    | OperatorAdded()
                    | OperatorRemoved()
                    | ConflictPolicySet()
                    | LogMigrated()
                    | Unreadable()
                ):
                    batch.append(record)
                case (
                    QuarantineApplied()
                    | QuarantineReleased()
                    | FactApproved()
                    | FactRejected()
                    | ContentErased()
                ):
                    fold_batch()
                    before = _current(scratch)
                    projector.apply(scratch, [record])
                    after = _current(scratch)
                    for identity in before.keys() | after.keys():
                        if before.get(identity) != after.get(identity):
                            causes[identity] = record
                case _:
                    assert_never(payload)
        fold_batch()
    return causes


def _current(db: Queryable) -> dict[Identity, inquiries.CurrentValue]:
    return inquiries.current_fact_values(db)


def _change(
    identity: Identity,
    old: inquiries.CurrentValue | None,
    new: inquiries.CurrentValue | None,
    cause: RecordedEvent,
) -> FactChange:
    change: Change = "added" if old is None else "removed" if new is None else "changed"
    scope, run, tag, key = identity
    return FactChange(
        change=change,
        scope=scope,
        run_id=run or None,
        tag=tag,
        key=key,
        old_value=None if old is None else old.value,
        new_value=None if new is None else new.value,
        old_position=None if old is None else old.position,
        new_position=None if new is None else new.position,
        old_source_adapter=None if old is None else old.source_adapter,
        new_source_adapter=None if new is None else new.source_adapter,
        by_position=cause.position,
        by_event_id=cause.event_id,
        by_kind=cause.kind,
        by_producer_task_id=cause.producer_task_id,
        by_source_adapter=cause.source_adapter,
        by_ts_ns=cause.ts_ns,
    )
