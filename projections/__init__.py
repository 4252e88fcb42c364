"""The read side of factledger: projectors, the read model, and the public store API."""

from __future__ import annotations

from eventlog import __version__
from projections import conflicts, inquiries, lineage, reading
from projections.agent_reads import (
    AgentEntries,
    AgentFacts,
    AgentIdentity,
    agent_reading,
    policy_for,
    read_entries,
    read_facts,
    read_history,
    read_tags,
    recall,
)
from projections.cache import (
    CacheProjection,
    cache_hint,
    check_cache,
    linked_events,
    open_read_model,
)
from projections.comparison import (
    Drift,
    DriftReport,
    TableComparison,
    checkpoint_drift,
    compare_tables,
    read_model_drift,
    table_digests,
)
from projections.database import ScratchDatabase
from projections.drift import READ_MODEL_MISMATCH
from projections.entries import Fact, MemoryEntry
from projections.errors import (
    CacheChoiceError,
    CacheRefusedError,
    LegacyImportError,
    SyncTimeoutError,
)
from projections.kb import CrossTaskKB, PublishCounter, get_global_counter
from projections.knowledge import (
    Identity,
    KnowledgeProjector,
    fact_identity,
    matching_positions,
    run_key,
)
from projections.legacy import LegacyFile, holds_legacy_table, legacy_events
from projections.lineage import LineageProjector
from projections.projector import (
    ModelSnapshot,
    ProjectedTransaction,
    Projection,
    Projector,
    ReadModel,
    TableWriter,
    batches,
    fold,
)
from projections.prompt import Recall, load_persistent_memory, recall_memory, render
from projections.reads import Readable, Reader, Row
from projections.receipts import Receipt, ReceiptProjector, receipts
from projections.redaction import redact_value
from projections.store import SQLiteMemoryStore
from projections.tables import table_digest, table_exists, table_rows
from projections.tags import TagCount, TagListing, list_tags
from projections.taint import TAINTED, taint
from projections.trust import (
    QUARANTINED,
    TRUSTED,
    UNTAGGED_NOT_TRUSTED,
    UNTRUSTED_ADAPTER,
    MemoryTrustPolicy,
    active_trust_policy,
)
from projections.validation import (
    MEMORY_TYPES,
    SCOPES,
    MemoryType,
    Scope,
    check_allow_list,
    check_key,
    check_scope,
    check_tag,
)
from projections.view import (
    MemoryView,
    default_projectors,
    open_view,
    read_model_at_head,
    view_at,
)
from projections.visible import escape_invisible

__all__ = [
    "MEMORY_TYPES",
    "QUARANTINED",
    "READ_MODEL_MISMATCH",
    "SCOPES",
    "TAINTED",
    "TRUSTED",
    "UNTAGGED_NOT_TRUSTED",
    "UNTRUSTED_ADAPTER",
    "AgentEntries",
    "AgentFacts",
    "AgentIdentity",
    "CacheChoiceError",
    "CacheProjection",
    "CacheRefusedError",
    "CrossTaskKB",
    "Drift",
    "DriftReport",
    "Fact",
    "Identity",
    "KnowledgeProjector",
    "LegacyFile",
    "LegacyImportError",
    "LineageProjector",
    "MemoryEntry",
    "MemoryTrustPolicy",
    "MemoryType",
    "MemoryView",
    "ModelSnapshot",
    "ProjectedTransaction",
    "Projection",
    "Projector",
    "PublishCounter",
    "ReadModel",
    "Readable",
    "Reader",
    "Recall",
    "Receipt",
    "ReceiptProjector",
    "Row",
    "SQLiteMemoryStore",
    "Scope",
    "ScratchDatabase",
    "SyncTimeoutError",
    "TableComparison",
    "TableWriter",
    "TagCount",
    "TagListing",
    "__version__",
    "active_trust_policy",
    "agent_reading",
    "batches",
    "cache_hint",
    "check_allow_list",
    "check_cache",
    "check_key",
    "check_scope",
    "check_tag",
    "checkpoint_drift",
    "compare_tables",
    "conflicts",
    "default_projectors",
    "escape_invisible",
    "fact_identity",
    "fold",
    "get_global_counter",
    "holds_legacy_table",
    "inquiries",
    "legacy_events",
    "lineage",
    "linked_events",
    "list_tags",
    "load_persistent_memory",
    "matching_positions",
    "open_read_model",
    "open_view",
    "policy_for",
    "read_entries",
    "read_facts",
    "read_history",
    "read_model_at_head",
    "read_model_drift",
    "read_tags",
    "reading",
    "recall",
    "recall_memory",
    "receipts",
    "redact_value",
    "render",
    "run_key",
    "table_digest",
    "table_digests",
    "table_exists",
    "table_rows",
    "taint",
    "view_at",
]
