"""The read side of factledger: projectors, the read model, and the public store API."""

from __future__ import annotations

from projections.entries import Fact, MemoryEntry
from projections.kb import CrossTaskKB, PublishCounter, get_global_counter
from projections.legacy import LegacyFile, LegacyImportError, legacy_events
from projections.projector import Projection, Projector, TableWriter, fold
from projections.prompt import load_persistent_memory, render
from projections.redaction import redact_value
from projections.sql import ScratchDatabase
from projections.store import SQLiteMemoryStore
from projections.trust import MemoryTrustPolicy, active_trust_policy
from projections.validation import MEMORY_TYPES, SCOPES, MemoryType, Scope
from projections.view import MemoryView, default_projectors, open_view, view_at

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
    "MemoryView",
    "Projection",
    "Projector",
    "PublishCounter",
    "SQLiteMemoryStore",
    "Scope",
    "ScratchDatabase",
    "TableWriter",
    "active_trust_policy",
    "default_projectors",
    "fold",
    "get_global_counter",
    "legacy_events",
    "load_persistent_memory",
    "open_view",
    "redact_value",
    "render",
    "view_at",
]
