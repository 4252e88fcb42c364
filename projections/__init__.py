"""The read side of factledger: projectors, the read model, and the public store API."""

from __future__ import annotations

from projections.entries import Fact, MemoryEntry
from projections.kb import CrossTaskKB, PublishCounter, get_global_counter
from projections.legacy import LegacyFile, LegacyImportError, legacy_events
from projections.projector import Projection, Projector, TableWriter, fold
from projections.prompt import load_persistent_memory, render
from projections.redaction import redact_value
from projections.store import SQLiteMemoryStore, default_projectors
from projections.trust import MemoryTrustPolicy, active_trust_policy
from projections.validation import MEMORY_TYPES, SCOPES, MemoryType, Scope

__all__ = [
    "MEMORY_TYPES",
    "SCOPES",
    "CrossTaskKB",
    "Fact",
    "LegacyFile",
    "LegacyImportError",
    "MemoryEntry",
    "MemoryTrustPolicy",
    "MemoryType",
    "Projection",
    "Projector",
    "PublishCounter",
    "SQLiteMemoryStore",
    "Scope",
    "TableWriter",
    "active_trust_policy",
    "default_projectors",
    "fold",
    "get_global_counter",
    "legacy_events",
    "load_persistent_memory",
    "redact_value",
    "render",
]
