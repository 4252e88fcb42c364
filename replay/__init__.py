"""The audit side of factledger: `Ledger`, one open log with verify, checkpoints and proofs,
rebuild, time travel, history, forensics and the operator actions as its methods (each also a
function of the log's path, for one call); and the `factledger` command line."""

from __future__ import annotations

from eventlog import __version__
from projections import (
    CacheChoiceError,
)
from projections.internal import (
    TableComparison,
)
from replay.audit import AuditProblem, AuditReport, CheckpointSummary
from replay.bootstrap import LogMade, init_log, init_postgres
from replay.checkpoints import Checkpoint, NoteSignature
from replay.conflicts import HeldVersion, policy_owners
from replay.cosignatures import cosignature_time
from replay.errors import (
    KeyFileError,
    LedgerClosedError,
    NotAuthorizedError,
    ReadOnlyLedgerError,
    UnsignedCheckpointError,
)
from replay.forensics import (
    BlastRadius,
    BlastSummary,
    Exposure,
    LiveEntry,
    LiveFact,
    Replacement,
    SuspectEvent,
    SuspectReceipt,
)
from replay.history import (
    Blame,
    BlameLine,
    FactChange,
    FactDiff,
    FactHistory,
    FactVersion,
    OperatorAction,
)
from replay.keys import (
    OperatorKey,
    PublicKey,
    generate_key,
    read_operator_key,
    read_public_key,
)
from replay.ledger import Ledger
from replay.lineage import Lineage, LineageNode
from replay.operators import Actor, Operator, Operators
from replay.proofs import (
    ConsistencyProof,
    InclusionProof,
    Prover,
    verify_consistency,
    verify_inclusion,
)
from replay.rebuild import RebuildReport
from replay.shortcuts import (
    add_operator,
    approve,
    as_of,
    blame,
    blast_radius,
    checkpoint,
    diff,
    export_log,
    history,
    lineage,
    list_operators,
    prove_consistency,
    prove_inclusion,
    quarantine,
    rebuild,
    reject,
    release,
    remove_operator,
    set_conflict_policy,
    verify,
)
from replay.transfer import ExportHeader, ImportReport

__all__ = [
    "Actor",
    "AuditProblem",
    "AuditReport",
    "Blame",
    "BlameLine",
    "BlastRadius",
    "BlastSummary",
    "CacheChoiceError",
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
    "Ledger",
    "LedgerClosedError",
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
    "ReadOnlyLedgerError",
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
    "cosignature_time",
    "diff",
    "export_log",
    "generate_key",
    "history",
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
