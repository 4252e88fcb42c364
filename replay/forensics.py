"""Forensics of a poisoning incident: everything a suspect wrote and everywhere it reached."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, assert_never

import msgspec

from eventlog import (
    ConflictPolicySet,
    FactApproved,
    FactPublished,
    FactRejected,
    InvalidInputError,
    LegacyClaims,
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
from eventlog.checks import check_optional_identifier, check_position, check_positions
from eventlog.events import ContentErased, LogMigrated, RecordedPayload
from eventlog.signing import authorization_of, claims_of
from projections.internal import (
    Queryable,
    conflicts,
    default_projectors,
    inquiries,
)
from projections.internal import (
    lineage as graph,
)
from replay.conflicts import HeldVersion, held_version
from replay.erased import ErasedBy, erased_by
from replay.lineage import Descendant, descendant_levels
from replay.snapshots import folded_past, past_position

if TYPE_CHECKING:
    from replay.ledger import Ledger


class SuspectEvent(msgspec.Struct, frozen=True, kw_only=True):
    """One event the suspect wrote."""

    position: int
    kind: str
    subject: str
    producer_task_id: str
    source_adapter: str | None
    run_id: str | None
    ts_ns: int
    content_hash: str
    signed_by: str | None = None
    """For an operator action: the id of the key whose signature it carries, if any."""
    unauthorized: str | None = None
    """For an operator action that took no effect: why (the log's operators did not sign it)."""
    claims: LegacyClaims | None = None
    """For an import: what the legacy row said about itself, kept as claims. The producer,
    adapter, run and time above are the importer's; the claims count only for an import an
    operator signed (`signed_by`)."""
    erased: ErasedBy | None = None
    """The erasure that removed its text, if one did (its position, key and reason)."""


class SuspectReceipt(msgspec.Struct, frozen=True, kw_only=True):
    """A recall receipt the suspect wrote: a read, and the reader it named."""

    position: int
    producer_task_id: str
    source_adapter: str | None
    """The adapter that appended it (on PostgreSQL, the one its login is bound to)."""
    task_id: str | None
    run_id: str | None
    adapter: str | None
    """The adapter its payload names as the reader's."""
    included: tuple[int, ...]
    kept_out: int
    links: bool
    """Whether later writes by the reader it names (its `source_adapter`, `task_id` and
    `run_id`) are derived from what it included: false when it names no task, or names
    another adapter than the one that appended it."""
    ts_ns: int


class LiveFact(msgspec.Struct, frozen=True, kw_only=True):
    """A fact whose current value a suspect event set."""

    position: int
    scope: str
    run_id: str | None
    tag: str
    key: str
    producer_task_id: str
    source_adapter: str | None
    content_hash: str


class LiveEntry(msgspec.Struct, frozen=True, kw_only=True):
    """A memory entry a suspect event wrote that readers still see."""

    id: int
    type: str
    tags: str
    producer_task_id: str
    source_adapter: str | None
    content_hash: str
    claims: LegacyClaims | None = None
    """For an import: what the legacy row claimed, shown as claims, never as the entry's
    provenance unless an operator signed the import."""
    unsigned_import: bool = False
    """An import no operator signed: no trust policy trusts it."""


class Replacement(msgspec.Struct, frozen=True, kw_only=True):
    """A fact version and the version on the other side of a suspect overwrite."""

    position: int
    scope: str
    run_id: str | None
    tag: str
    key: str
    other_position: int
    other_producer: str
    other_adapter: str | None


class Exposure(msgspec.Struct, frozen=True, kw_only=True):
    """A prompt build (recall receipt) that included, or kept out, a suspect event."""

    receipt_position: int
    task_id: str | None
    run_id: str | None
    adapter: str | None
    event_position: int
    reason: str | None


class BlastSummary(msgspec.Struct, frozen=True, kw_only=True):
    """The size of a blast radius, counted before its details."""

    events: int
    """Events the suspect wrote (its reads aside)."""
    live: int
    """Current facts and visible memory entries those events set."""
    prompts_reached: int
    """Prompt builds (recall receipts) that included one of them."""
    descendants: int
    """Writes derived from them, at every level followed."""
    quarantined: int
    """Of the suspect's events, those a quarantine now covers (erased ones included)."""
    erased: int = 0
    """Of the suspect's events, those whose text an erasure removed."""


class BlastRadius(msgspec.Struct, frozen=True, kw_only=True):
    """What a suspect wrote, what of it is live, what it replaced, and which prompts it reached."""

    source_adapter: str | None
    producer_task_id: str | None
    positions: tuple[int, ...]
    since_position: int
    head_position: int
    summary: BlastSummary
    events: list[SuspectEvent]
    """Everything the suspect did but read: every kind of event except recall receipts."""
    live_facts: list[LiveFact]
    live_entries: list[LiveEntry]
    overwritten: list[Replacement]
    """Earlier versions a suspect event replaced (`other_*` is the replaced version)."""
    superseded: list[Replacement]
    """Suspect versions later replaced by someone else (`other_*` is the replacement)."""
    exposed: list[Exposure]
    shielded: list[Exposure]
    held: list[HeldVersion] = []
    """Suspect fact versions a conflict policy kept from becoming current."""
    descendants: list[list[Descendant]] = []
    """Writes derived from suspect events (by exposed readers after their exposure, or
    declared), level by level, each with the prompts it reached in turn."""
    receipts: list[SuspectReceipt] = []
    """The recall receipts the suspect wrote (its reads), each with the reader it named."""
    run_id: str | None = None


def blast_radius(
    ledger: Ledger,
    *,
    source_adapter: str | None = None,
    producer_task_id: str | None = None,
    positions: Iterable[int] | None = None,
    since_position: int | None = None,
    depth: int | None = None,
    run_id: str | None = None,
    at: int | None = None,
) -> BlastRadius:
    """Trace a suspect (every given selector must match) through the log and the receipts.
    Descendants are followed `depth` levels down the lineage graph (all, when None). With
    `at`, as it stood right after that position (the read model folded from the nearest
    snapshot, `replay.snapshots`); a text erased since shows as erased."""
    adapter = check_optional_identifier("source_adapter", source_adapter)
    producer = check_optional_identifier("producer_task_id", producer_task_id)
    run = check_optional_identifier("run_id", run_id)
    chosen = check_positions("positions", positions)
    since = 0 if since_position is None else check_position("since_position", since_position)
    bound = None if depth is None else check_position("depth", depth, minimum=1)
    if adapter is None and producer is None and run is None and not chosen:
        raise InvalidInputError(
            "blast_radius needs a selector: source_adapter, producer_task_id, run_id or positions"
        )
    suspect = _Suspect(adapter=adapter, producer=producer, run=run, chosen=chosen)
    if at is None:
        with ledger.at_head() as (snap, model):
            return _radius(
                snap, model, lambda ps: erased_by(snap, model, ps), suspect, since, bound
            )
    target = past_position(ledger, at)
    with (
        folded_past(ledger, target, default_projectors(ledger.log_id)) as (then, model),
        ledger.at_head() as (now, live),
    ):
        return _radius(then, model, lambda ps: erased_by(now, live, ps), suspect, since, bound)


class _Suspect(msgspec.Struct, frozen=True, kw_only=True):
    """A blast radius's selectors, checked."""

    adapter: str | None
    producer: str | None
    run: str | None
    chosen: tuple[int, ...]


def _radius(
    snap: LogSnapshot,
    model: Queryable,
    erased_of: Callable[[list[int]], dict[int, ErasedBy]],
    suspect: _Suspect,
    since: int,
    bound: int | None,
) -> BlastRadius:
    """The blast radius of `suspect` in the log read through `snap`, its read model `model`."""
    adapter, producer, run, chosen = suspect.adapter, suspect.producer, suspect.run, suspect.chosen
    wanted = set(chosen)
    head = snap.head().position
    found: list[tuple[RecordedEvent, str]] = []
    receipts: list[SuspectReceipt] = []
    for record in snap.read(after=since, until=head):
        if (
            (adapter is not None and record.source_adapter != adapter)
            or (producer is not None and record.producer_task_id != producer)
            or (run is not None and record.run_id != run)
            or (wanted and record.position not in wanted)
        ):
            continue
        subject = event_subject(record.payload)
        if subject is None:
            receipts.append(_receipt(record))
        else:
            found.append((record, subject))
    refused = {
        row.position: row.reason
        for row in inquiries.unauthorized(model, [r.position for r, _ in found])
    }
    erased = erased_of([r.position for r, _ in found])
    events = [
        _suspect(r, subject, refused.get(r.position), erased.get(r.position))
        for r, subject in found
    ]
    suspects = [e.position for e in events]
    suspect_set = set(suspects)
    touching = inquiries.receipts_touching(model, suspects)
    live_facts = [_live_fact(r) for r in inquiries.live_facts(model, suspects)]
    live_entries = [_live_entry(r) for r in inquiries.live_entries(model, suspects)]
    exposed = [_exposure(r) for r in touching if r.included]
    descendants = descendant_levels(snap, model, suspects, bound)
    summary = BlastSummary(
        events=len(events),
        live=len(live_facts) + len(live_entries),
        prompts_reached=len({e.receipt_position for e in exposed}),
        descendants=sum(len(level) for level in descendants),
        quarantined=len(inquiries.quarantined_among(model, suspects)),
        erased=len(erased),
    )
    return BlastRadius(
        source_adapter=adapter,
        producer_task_id=producer,
        run_id=run,
        positions=chosen,
        since_position=since,
        head_position=head,
        summary=summary,
        events=events,
        live_facts=live_facts,
        live_entries=live_entries,
        overwritten=[
            _replacement(r)
            for r in inquiries.replaced_by(model, suspects)
            if r.other_position not in suspect_set
        ],
        superseded=[
            _replacement(r)
            for r in inquiries.replaced_later(model, suspects)
            if r.other_position not in suspect_set
        ],
        exposed=exposed,
        shielded=[_exposure(r) for r in touching if not r.included],
        held=[held_version(r) for r in conflicts.held_versions(model, suspects)],
        descendants=descendants,
        receipts=receipts,
    )


def _suspect(
    record: RecordedEvent, subject: str, refused: str | None, erased: ErasedBy | None
) -> SuspectEvent:
    signature = authorization_of(record.payload)
    return SuspectEvent(
        position=record.position,
        kind=record.kind,
        subject=subject,
        producer_task_id=record.producer_task_id,
        source_adapter=record.source_adapter,
        run_id=record.run_id,
        ts_ns=record.ts_ns,
        content_hash=record.content_hash,
        signed_by=None if signature is None else signature.key_id,
        unauthorized=refused,
        claims=claims_of(record.payload),
        erased=erased,
    )


def _receipt(record: RecordedEvent) -> SuspectReceipt:
    receipt = record.payload
    assert isinstance(receipt, RecallRecorded)
    return SuspectReceipt(
        position=record.position,
        producer_task_id=record.producer_task_id,
        source_adapter=record.source_adapter,
        task_id=receipt.task_id,
        run_id=receipt.run_id,
        adapter=receipt.adapter,
        included=receipt.included,
        kept_out=len(receipt.excluded),
        links=graph.receipt_reader(record, receipt) is not None,
        ts_ns=record.ts_ns,
    )


def event_subject(payload: RecordedPayload) -> str | None:
    """What an event did, named without its content; None for a read (a recall receipt)."""
    match payload:
        case RecallRecorded():
            return None
        case FactPublished():
            return f"fact {payload.scope}/{payload.tag}/{payload.key}"
        case MemoryAdded():
            entry = f"{payload.type} entry tagged {','.join(payload.tags) or '-'}"
            claims = claims_of(payload)
            if claims is None:
                return entry
            signed = "signed" if authorization_of(payload) is not None else "unsigned"
            return f"{signed} import of legacy row {claims.id}: {entry}"
        case MemoryRemoved():
            return f"{payload.reason} entries {','.join(map(str, payload.entry_ids))}"
        case MemoryReweighted():
            return f"importance x{payload.factor:g} for every entry"
        case QuarantineApplied():
            return "quarantine of " + _selectors(payload)
        case QuarantineReleased():
            return f"release of the quarantine at {payload.quarantine_position}"
        case OperatorAdded():
            return f"operator key {payload.key_id} ({payload.name}) added"
        case OperatorRemoved():
            return f"operator key {payload.key_id} removed"
        case ConflictPolicySet():
            scope = payload.scope if isinstance(payload.scope, str) else "every scope"
            return f"conflict policy {payload.on_conflict} for tag {payload.tag} in {scope}"
        case FactApproved():
            return f"approval of the held version at {payload.position}"
        case FactRejected():
            return f"rejection of the held version at {payload.position}"
        case LogMigrated():
            return (
                f"migration of the {payload.previous_size} events of log "
                f"{payload.previous_log_id}, signed by {payload.key_id} ({payload.name})"
            )
        case ContentErased():
            count = len(payload.positions)
            return f"erasure of the text{'s' if count != 1 else ''} at {count} position" + (
                "s" if count != 1 else ""
            )
        case Unreadable():
            return "unreadable row: " + payload.reason
        case _:
            assert_never(payload)


def _selectors(payload: QuarantineApplied) -> str:
    chosen = []
    if payload.match_positions:
        chosen.append("positions " + ",".join(map(str, payload.match_positions)))
    if payload.match_producer_task_id is not None:
        chosen.append(f"producer {payload.match_producer_task_id}")
    if payload.match_source_adapter is not None:
        chosen.append(f"adapter {payload.match_source_adapter}")
    return " and ".join(chosen) or "nothing"


def _live_fact(row: inquiries.LiveFact) -> LiveFact:
    return LiveFact(
        position=row.position,
        scope=row.scope,
        run_id=row.run_id,
        tag=row.tag,
        key=row.key,
        producer_task_id=row.producer_task_id,
        source_adapter=row.source_adapter,
        content_hash=row.content_hash,
    )


def _live_entry(row: inquiries.LiveEntry) -> LiveEntry:
    return LiveEntry(
        id=row.id,
        type=row.type,
        tags=row.tags,
        producer_task_id=row.producer_task_id,
        source_adapter=row.source_adapter,
        content_hash=row.content_hash,
        claims=row.legacy_claims(),
        unsigned_import=bool(row.unsigned_import),
    )


def _replacement(row: inquiries.Succession) -> Replacement:
    return Replacement(
        position=row.position,
        scope=row.scope,
        run_id=row.run_id,
        tag=row.tag,
        key=row.key,
        other_position=row.other_position,
        other_producer=row.other_producer,
        other_adapter=row.other_adapter,
    )


def _exposure(row: inquiries.ReceiptItem) -> Exposure:
    return Exposure(
        receipt_position=row.receipt_position,
        task_id=row.task_id,
        run_id=row.run_id,
        adapter=row.adapter,
        event_position=row.event_position,
        reason=row.reason,
    )
