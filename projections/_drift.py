"""The read model held to the log, one row at a time: a row checked against the event that
wrote it.

The read model is a cache of the log, in the same file: whoever can write the file can edit
it without touching the chain. So a row is believed only as far as its event bears it out.
Before a memory entry is rendered into a prompt, `unconfirmed_entries` reads the event at
the entry's position in the same snapshot and compares what the prompt shows: the text and
its hash, the type, the adapter and the producer (an import's row may show the legacy
row's claims, but only if the import could have been honoured: signed), and whether it is
flagged an import no operator signed. It also holds the row's visibility to the read model's
own quarantine table: a row shown (`hidden` cleared by hand) while a quarantine covers its
position is kept out. Comparing a whole read model with a refold of the log is
`projections._comparison`.
"""

from __future__ import annotations

import hmac
from collections.abc import Sequence
from typing import assert_never

from eventlog import (
    ConflictPolicySet,
    CorruptLogError,
    EventNotFoundError,
    FactApproved,
    FactPublished,
    FactRejected,
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
from eventlog.events import ContentErased, LogMigrated
from eventlog.logs import get_logger
from eventlog.signing import authorization_of, claims_of, is_unsigned_import
from projections import _sql_reads as sql_reads
from projections._entries import MemoryEntry
from projections._projector import ReadModelSnapshot

log = get_logger("factledger.projections")

READ_MODEL_MISMATCH = "read_model_mismatch"
"""The receipt's reason for an entry kept out because its row disagrees with its event."""


def entry_problems(entry: MemoryEntry, record: RecordedEvent | None) -> tuple[str, ...]:
    """The fields of `entry` (a row of `fl_memory`) that its event does not bear out: () when
    it does; ('event',) when its position holds no event that writes an entry."""
    if record is None or record.position != entry.id or entry.position != entry.id:
        return ("event",)
    payload = record.payload
    own_producer = record.producer_task_id or None
    imported = False
    match payload:
        case FactPublished():
            kind, text = "cross_task", payload.value
            writers = [(record.source_adapter, own_producer)]
        case MemoryAdded():
            kind, text = payload.type, payload.content
            claims = claims_of(payload)
            imported = claims is not None
            if claims is None:
                writers = [(record.source_adapter, payload.task_id)]
            else:
                writers = [(record.source_adapter, own_producer)]
                if authorization_of(payload) is not None:
                    writers.append((claims.source_adapter, claims.task_id))
        case (
            MemoryRemoved()
            | MemoryReweighted()
            | RecallRecorded()
            | QuarantineApplied()
            | QuarantineReleased()
            | OperatorAdded()
            | OperatorRemoved()
            | ConflictPolicySet()
            | FactApproved()
            | FactRejected()
            | LogMigrated()
            | ContentErased()
            | Unreadable()
        ):
            return ("event",)
        case _:
            assert_never(payload)
    wrong = []
    if (
        record.text_state != "intact"
        or entry.content != text
        or not same_text(entry.content_hash, record.content_hash)
    ):
        wrong.append("content")
    if entry.type != kind:
        wrong.append("type")
    if all(entry.source_adapter != adapter for adapter, _ in writers):
        wrong.append("source_adapter")
    if (entry.source_adapter, entry.task_id) not in writers and "source_adapter" not in wrong:
        wrong.append("task_id")
    if (entry.unsigned_import and not imported) or (
        is_unsigned_import(payload) and not entry.unsigned_import
    ):
        wrong.append("unsigned_import")
    return tuple(wrong)


def unconfirmed_entries(
    snap: ReadModelSnapshot, entries: Sequence[MemoryEntry]
) -> dict[int, tuple[str, ...]]:
    """The entries among `entries` whose rows their events in `snap` do not bear out, by
    position, with the fields that differ (`hidden` for a row shown that a quarantine
    covers). Each is logged as an error."""
    positions = [entry.id for entry in entries]
    covered = {row.position for row in sql_reads.LINEAGE_QUARANTINED_AMONG.among(snap, positions)}
    found: dict[int, tuple[str, ...]] = {}
    for entry in entries:
        problems = entry_problems(entry, _event_at(snap, entry.id))
        if entry.id in covered:
            problems = (*problems, "hidden")
        if problems:
            log.error(
                READ_MODEL_MISMATCH, table="fl_memory", position=entry.id, fields=list(problems)
            )
            found[entry.id] = problems
    return found


def _event_at(snap: ReadModelSnapshot, position: int) -> RecordedEvent | None:
    try:
        return snap.event_at(position)
    except (EventNotFoundError, CorruptLogError):
        return None


def same_text(first: str, second: str) -> bool:
    """Constant-time comparison of two hashes or chain values as text."""
    return hmac.compare_digest(first.encode("utf-8", "replace"), second.encode("utf-8", "replace"))
