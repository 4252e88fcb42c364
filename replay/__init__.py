"""The audit side of factledger: verify, checkpoints and proofs, rebuild, time travel,
history, forensics, and the `factledger` command line."""

from __future__ import annotations

from eventlog import __version__
from projections import TableComparison
from replay.audit import AuditProblem, AuditReport, CheckpointSummary, verify
from replay.bootstrap import LogMade, init_log, init_postgres
from replay.checkpoints import Checkpoint, NoteSignature, checkpoint
from replay.conflicts import HeldVersion, approve, policy_owners, reject, set_conflict_policy
from replay.errors import KeyFileError, NotAuthorizedError, UnsignedCheckpointError
from replay.forensics import (
    BlastRadius,
    Exposure,
    LiveEntry,
    LiveFact,
    Replacement,
    SuspectEvent,
    SuspectReceipt,
    blast_radius,
)
from replay.history import (
    Blame,
    BlameLine,
    FactChange,
    FactDiff,
    FactHistory,
    FactVersion,
    OperatorAction,
    blame,
    diff,
    history,
)
from replay.keys import (
    OperatorKey,
    PublicKey,
    generate_key,
    read_operator_key,
    read_public_key,
)
from replay.lineage import Lineage, LineageNode, lineage
from replay.operators import (
    Actor,
    Operator,
    Operators,
    add_operator,
    list_operators,
    remove_operator,
)
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
from replay.rebuild import RebuildReport, rebuild
from replay.timetravel import as_of
from replay.transfer import ExportHeader, ImportReport, export_log, import_legacy

__all__ = [
    "Actor",
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
    "HeldVersion",
    "ImportReport",
    "InclusionProof",
    "KeyFileError",
    "Lineage",
    "LineageNode",
    "LiveEntry",
    "LiveFact",
    "LogMade",
    "NotAuthorizedError",
    "NoteSignature",
    "Operator",
    "OperatorAction",
    "OperatorKey",
    "Operators",
    "Prover",
    "PublicKey",
    "RebuildReport",
    "Replacement",
    "SuspectEvent",
    "SuspectReceipt",
    "TableComparison",
    "UnsignedCheckpointError",
    "__version__",
    "add_operator",
    "approve",
    "as_of",
    "blame",
    "blast_radius",
    "checkpoint",
    "diff",
    "export_log",
    "generate_key",
    "history",
    "import_legacy",
    "init_log",
    "init_postgres",
    "lineage",
    "list_operators",
    "policy_owners",
    "prove_consistency",
    "prove_inclusion",
    "quarantine",
    "read_operator_key",
    "read_public_key",
    "rebuild",
    "reject",
    "release",
    "remove_operator",
    "set_conflict_policy",
    "verify",
    "verify_consistency",
    "verify_inclusion",
]
