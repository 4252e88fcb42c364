"""The audit side of factledger: verify, checkpoints and proofs, rebuild, time travel,
history, forensics, and the `factledger` command line."""

from __future__ import annotations

from replay.audit import AuditProblem, AuditReport, CheckpointSummary, verify
from replay.checkpoints import Checkpoint, checkpoint, generate_key, load_key
from replay.forensics import (
    BlastRadius,
    Exposure,
    LiveEntry,
    LiveFact,
    Replacement,
    SuspectEvent,
    blast_radius,
)
from replay.history import (
    Blame,
    BlameLine,
    FactChange,
    FactDiff,
    FactHistory,
    FactVersion,
    blame,
    diff,
    history,
)
from replay.lineage import Lineage, LineageNode, lineage
from replay.proofs import (
    ConsistencyProof,
    InclusionProof,
    Prover,
    prove_consistency,
    prove_inclusion,
    verify_consistency,
    verify_inclusion,
)
from replay.quarantine import quarantine, release
from replay.rebuild import RebuildReport, TableComparison, rebuild
from replay.timetravel import as_of
from replay.transfer import ExportHeader, ImportReport, export_log, import_legacy

__all__ = [
    "AuditProblem",
    "AuditReport",
    "Blame",
    "BlameLine",
    "BlastRadius",
    "Checkpoint",
    "CheckpointSummary",
    "ConsistencyProof",
    "ExportHeader",
    "Exposure",
    "FactChange",
    "FactDiff",
    "FactHistory",
    "FactVersion",
    "ImportReport",
    "InclusionProof",
    "Lineage",
    "LineageNode",
    "LiveEntry",
    "LiveFact",
    "Prover",
    "RebuildReport",
    "Replacement",
    "SuspectEvent",
    "TableComparison",
    "as_of",
    "blame",
    "blast_radius",
    "checkpoint",
    "diff",
    "export_log",
    "generate_key",
    "history",
    "import_legacy",
    "lineage",
    "load_key",
    "prove_consistency",
    "prove_inclusion",
    "quarantine",
    "rebuild",
    "release",
    "verify",
    "verify_consistency",
    "verify_inclusion",
]
