"""What `replay` uses from the read side beyond the public API: projectors and the read
model's handles, the comparisons `rebuild` and `verify` make, the questions audits ask, the
one read path, the checks and settings the command line shares. Internal: these names may
change with the package; users import `projections` (docs/architecture.md).
"""

from __future__ import annotations

from projections import _conflicts as conflicts
from projections import _environment as environment
from projections import _inquiries as inquiries
from projections import _lineage as lineage
from projections import _reading as reading
from projections._agent_reads import (
    agent_reading,
    policy_for,
)
from projections._cache import (
    cache_hint,
    check_cache,
    linked_events,
    open_read_model,
)
from projections._comparison import (
    DriftReport,
    TableComparison,
    checkpoint_drift,
    compare_tables,
    read_model_drift,
    table_digests,
)
from projections._database import (
    ScratchDatabase,
)
from projections._erasures import (
    ErasureVerdict,
    judge_erasures,
)
from projections._errors import (
    MerkleIndexError,
)
from projections._knowledge import (
    Identity,
    KnowledgeProjector,
    fact_identity,
    matching_positions,
    run_key,
)
from projections._legacy import (
    LegacyFile,
    holds_legacy_table,
    legacy_events,
    legacy_identity,
)
from projections._merkle_index import (
    IndexTables,
    MerkleIndex,
    MerkleTip,
)
from projections._merkle_index import (
    in_cache as index_in_cache,
)
from projections._merkle_index import (
    in_log_file as index_in_log_file,
)
from projections._projector import (
    LiveReadModel,
    ProjectedTransaction,
    Projection,
    Projector,
    TableWriter,
    batches,
)
from projections._reads import (
    Queryable,
)
from projections._receipts import (
    ReceiptProjector,
    receipts,
)
from projections._secrets import (
    SecretsMode,
    chosen_mode,
)
from projections._snapshot_check import (
    SnapshotCheck,
    check_snapshot_files,
)
from projections._snapshots import (
    EVERY as SNAPSHOT_EVERY,
)
from projections._snapshots import (
    KEEP as SNAPSHOT_KEEP,
)
from projections._snapshots import (
    Taken as SnapshotsTaken,
)
from projections._snapshots import (
    directory_beside as snapshot_directory,
)
from projections._snapshots import (
    folded_at,
)
from projections._snapshots import (
    planned as planned_snapshots,
)
from projections._snapshots import (
    remove_all as remove_snapshots,
)
from projections._snapshots import (
    take as take_snapshots,
)
from projections._tags import (
    list_tags,
)
from projections._validation import (
    MEMORY_TYPES,
    SCOPES,
    MemoryType,
    check_allow_list,
    check_key,
    check_scope,
    check_tag,
)
from projections._view import (
    default_projectors,
    read_model_at_head,
    view_at,
)

__all__ = [
    "MEMORY_TYPES",
    "SCOPES",
    "SNAPSHOT_EVERY",
    "SNAPSHOT_KEEP",
    "DriftReport",
    "ErasureVerdict",
    "Identity",
    "IndexTables",
    "KnowledgeProjector",
    "LegacyFile",
    "LiveReadModel",
    "MemoryType",
    "MerkleIndex",
    "MerkleIndexError",
    "MerkleTip",
    "ProjectedTransaction",
    "Projection",
    "Projector",
    "Queryable",
    "ReceiptProjector",
    "ScratchDatabase",
    "SecretsMode",
    "SnapshotCheck",
    "SnapshotsTaken",
    "TableComparison",
    "TableWriter",
    "agent_reading",
    "batches",
    "cache_hint",
    "check_allow_list",
    "check_cache",
    "check_key",
    "check_scope",
    "check_snapshot_files",
    "check_tag",
    "checkpoint_drift",
    "chosen_mode",
    "compare_tables",
    "conflicts",
    "default_projectors",
    "environment",
    "fact_identity",
    "folded_at",
    "holds_legacy_table",
    "index_in_cache",
    "index_in_log_file",
    "inquiries",
    "judge_erasures",
    "legacy_events",
    "legacy_identity",
    "lineage",
    "linked_events",
    "list_tags",
    "matching_positions",
    "open_read_model",
    "planned_snapshots",
    "policy_for",
    "read_model_at_head",
    "read_model_drift",
    "reading",
    "receipts",
    "remove_snapshots",
    "run_key",
    "snapshot_directory",
    "table_digests",
    "take_snapshots",
    "view_at",
]
