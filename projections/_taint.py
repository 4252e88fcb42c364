"""Weakest-link trust: taint follows lineage (`projections._lineage`).

A write with an ancestor, however far up, that the policy in force does not trust (an import
no operator signed included), that is quarantined, or whose row its event does not bear out
is itself tainted, and names that ancestor as its source. Ancestors are judged by their
events in the log (the truth), not by read-model rows an attacker could edit.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from eventlog import EventNotFoundError, RecordedEvent
from eventlog.logs import get_logger
from eventlog.signing import is_unsigned_import
from projections import _sql_reads as sql_reads
from projections._drift import READ_MODEL_MISMATCH, entry_problems
from projections._lineage import ancestors
from projections._projector import ReadModelSnapshot
from projections._reads import entry_from_row
from projections._trust import MemoryTrustPolicy

log = get_logger("factledger.projections")

TAINTED = "tainted"
"""The reason a receipt gives for a write kept out because of a source upstream of it."""


def taint(
    snap: ReadModelSnapshot, positions: Iterable[int], policy: MemoryTrustPolicy
) -> dict[int, int]:
    """The positions among `positions` that `policy` holds out for a source upstream, each
    with that source (the earliest, when several): an ancestor the policy does not trust,
    one that is quarantined, or one whose row its event does not bear out. Empty when the
    policy does not propagate taint."""
    if not policy.propagate_taint:
        return {}
    upstream = ancestors(snap, sorted(set(positions)))
    if not upstream:
        return {}
    bad = _bad_sources(snap, sorted(set().union(*upstream.values())), policy)
    return {
        position: min(sources & bad)
        for position, sources in sorted(upstream.items())
        if sources & bad
    }


def _bad_sources(
    snap: ReadModelSnapshot, sources: Sequence[int], policy: MemoryTrustPolicy
) -> set[int]:
    """The sources among `sources` that taint: quarantined, untrusted by their event, or
    (an entry still shown) with a row its event does not bear out. Each event is read once."""
    bad = {row.position for row in sql_reads.LINEAGE_QUARANTINED_AMONG.among(snap, sources)}
    rows = {row.id: row for row in sql_reads.LINEAGE_ENTRIES_AMONG.among(snap, sources)}
    for position in sources:
        if position in bad:
            continue
        try:
            record: RecordedEvent | None = snap.event_at(position)
        except EventNotFoundError:
            record = None
        row = rows.get(position)
        entry = None if row is None else entry_from_row(row)
        unsigned = is_unsigned_import(record.payload) if record is not None else False
        if record is None or (
            policy.refusal(
                record.source_adapter,
                unsigned_import=unsigned or (entry is not None and entry.unsigned_import),
            )
            is not None
        ):
            bad.add(position)
            continue
        if entry is not None:
            problems = entry_problems(entry, record)
            if problems:
                log.error(
                    READ_MODEL_MISMATCH, table="fl_memory", position=position, fields=list(problems)
                )
                bad.add(position)
    return bad
