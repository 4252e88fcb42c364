"""The write side of factledger: event types, canonical codec, BLAKE3 chain, log backends."""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from eventlog.backend import (
    Durability,
    EventLog,
    Head,
    LogTransaction,
    ReadSnapshot,
    StoredRow,
)
from eventlog.checks import MAX_CONTENT_BYTES
from eventlog.codec import content_hash, decode_record, encode_envelope
from eventlog.errors import (
    ChainBreak,
    CorruptLogError,
    EventIdConflictError,
    FactledgerError,
    InvalidInputError,
    InvalidTypeError,
    LogBusyError,
    ReadOnlyStoreError,
    StorageError,
    UnknownEventKindError,
)
from eventlog.events import (
    Envelope,
    EventPayload,
    Exclusion,
    FactPublished,
    MemoryAdded,
    MemoryRemoved,
    MemoryReweighted,
    NewEvent,
    Payload,
    QuarantineApplied,
    QuarantineReleased,
    RecallRecorded,
    RecordedEvent,
    TrustSettings,
)
from eventlog.sqlite import SQLiteEventLog
from eventlog.stored import chain_at
from eventlog.verify import ChainReport, ChainWalker, Problem, verify_chain

__all__ = [
    "MAX_CONTENT_BYTES",
    "ChainBreak",
    "ChainReport",
    "ChainWalker",
    "CorruptLogError",
    "Durability",
    "Envelope",
    "EventIdConflictError",
    "EventLog",
    "EventPayload",
    "Exclusion",
    "FactPublished",
    "FactledgerError",
    "Head",
    "InvalidInputError",
    "InvalidTypeError",
    "LogBusyError",
    "LogTransaction",
    "MemoryAdded",
    "MemoryRemoved",
    "MemoryReweighted",
    "NewEvent",
    "Payload",
    "Problem",
    "QuarantineApplied",
    "QuarantineReleased",
    "ReadOnlyStoreError",
    "ReadSnapshot",
    "RecallRecorded",
    "RecordedEvent",
    "SQLiteEventLog",
    "StorageError",
    "StoredRow",
    "TrustSettings",
    "UnknownEventKindError",
    "chain_at",
    "content_hash",
    "decode_record",
    "encode_envelope",
    "open_log",
    "verify_chain",
]


def open_log(
    target: str | os.PathLike[str],
    *,
    durability: Durability = "full",
    read_only: bool = False,
    clock_ns: Callable[[], int] = time.time_ns,
    busy_timeout_s: float = 30.0,
) -> SQLiteEventLog:
    """Open (or create) the log at `target`: a file path, or `:memory:`.

    The one place a backend is chosen; other backends plug in here.
    """
    return SQLiteEventLog(
        target,
        durability=durability,
        read_only=read_only,
        clock_ns=clock_ns,
        busy_timeout_s=busy_timeout_s,
    )
