"""The trust verdict on what a reader is about to be shown: computed here, and only here.

Every read path (the prompt, agents' reads over MCP and the command line, `CrossTaskKB`)
judges its rows with `verdicts`, in a snapshot of the live read model, whether it shows only
what is trusted or every row marked with its verdict. In this order, a row is:

1. `erased` when an operator's erasure removed its text (whatever the policy: the read model
   in the snapshot says so, even for a row read from a past state folded before the erasure);
2. `quarantined` when its row says so or an operator's quarantine covers its position now
   (whatever the policy: a quarantine is not a matter of trust);
3. kept out by the policy for the adapter it was written under
   (`MemoryTrustPolicy.refusal`: `untrusted_adapter`, `untagged_not_trusted`, and
   `unsigned_import` for an import no operator signed);
4. `read_model_mismatch` when it is a memory entry its event does not bear out
   (`projections._drift`);
5. `tainted` when a source upstream of it is any of these (`projections._taint`), naming that
   source;

and `trusted` otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from eventlog import Exclusion
from projections import _sql_knowledge as sql_knowledge
from projections import _sql_reads as sql_reads
from projections._drift import READ_MODEL_MISMATCH, unconfirmed_entries
from projections._entries import MemoryEntry
from projections._projector import ReadModelSnapshot
from projections._taint import TAINTED, taint
from projections._trust import ERASED, QUARANTINED, TRUSTED, MemoryTrustPolicy


class Judged(NamedTuple):
    """A row to judge: the position that wrote it and the adapter it names; whether the read
    model it came from flags it quarantined; and, for a memory entry, the entry itself, held
    to its event."""

    position: int
    source_adapter: str | None
    quarantined: bool = False
    entry: MemoryEntry | None = None


def verdicts(
    snap: ReadModelSnapshot, policy: MemoryTrustPolicy, rows: Sequence[Judged]
) -> list[Exclusion | None]:
    """For each of `rows`, in order: None when a reader under `policy` may see it, else the
    exclusion saying why not (the module's docstring lists the reasons, in the order they
    are tried)."""
    positions = sorted({row.position for row in rows})
    quarantined = {r.position for r in sql_reads.LINEAGE_QUARANTINED_AMONG.among(snap, positions)}
    erased = {r.position for r in sql_knowledge.ERASED_AMONG.among(snap, positions)}
    reasons = [
        ERASED
        if row.position in erased
        else QUARANTINED
        if row.quarantined or row.position in quarantined
        else policy.refusal(
            row.source_adapter, unsigned_import=row.entry is not None and row.entry.unsigned_import
        )
        for row in rows
    ]
    held = [row.entry for row, reason in zip(rows, reasons, strict=True) if reason is None]
    mismatched = unconfirmed_entries(snap, [entry for entry in held if entry is not None])
    found = [
        Exclusion(position=row.position, reason=reason)
        if reason is not None
        else Exclusion(position=row.position, reason=READ_MODEL_MISMATCH)
        if row.entry is not None and row.entry.id in mismatched
        else None
        for row, reason in zip(rows, reasons, strict=True)
    ]
    trusted = [row.position for row, seen in zip(rows, found, strict=True) if seen is None]
    sources = taint(snap, trusted, policy)
    return [
        Exclusion(position=row.position, reason=TAINTED, source=sources[row.position])
        if seen is None and row.position in sources
        else seen
        for row, seen in zip(rows, found, strict=True)
    ]


def mark(verdict: Exclusion | None) -> str:
    """A verdict as a row's `trust`: `trusted`, or the reason it is kept out."""
    return TRUSTED if verdict is None else verdict.reason
