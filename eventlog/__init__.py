"""The write side of factledger: event types, canonical codec, the chain, log backends."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from eventlog.backend import (
    BoundLog,
    Durability,
    EventLog,
    Head,
    LogSnapshot,
    LogTransaction,
    StoredRow,
)
from eventlog.checks import MAX_CONTENT_BYTES, is_dsn
from eventlog.codec import content_hash, decode_record, encode_envelope, read_row
from eventlog.errors import (
    ChainBreak,
    CorruptLogError,
    EventIdConflictError,
    EventNotFoundError,
    FactledgerError,
    InvalidInputError,
    InvalidTypeError,
    LegacyFormatError,
    LogBusyError,
    LogExistsError,
    LogMissingError,
    PermissionDeniedError,
    ReadOnlyStoreError,
    StorageError,
    UnknownEventKindError,
)
from eventlog.events import (
    ON_CONFLICT,
    OPERATOR_KINDS,
    Authorization,
    ConflictPolicySet,
    Envelope,
    EventPayload,
    Exclusion,
    FactApproved,
    FactPublished,
    FactRejected,
    LegacyClaims,
    MemoryAdded,
    MemoryRemoved,
    MemoryReweighted,
    NewEvent,
    OperatorAdded,
    OperatorRemoved,
    Payload,
    QuarantineApplied,
    QuarantineReleased,
    RecallRecorded,
    RecordedEvent,
    TrustSettings,
    Unreadable,
    is_operator_action,
)
from eventlog.sqlite import SQLiteEventLog
from eventlog.stored import chain_at
from eventlog.verify import ChainReport, ChainWalker, Problem, verify_chain
from eventlog.version import __version__

if TYPE_CHECKING:
    from eventlog.postgres import PostgresEventLog

__all__ = [
    "MAX_CONTENT_BYTES",
    "ON_CONFLICT",
    "OPERATOR_KINDS",
    "Authorization",
    "BoundLog",
    "ChainBreak",
    "ChainReport",
    "ChainWalker",
    "ConflictPolicySet",
    "CorruptLogError",
    "Durability",
    "Envelope",
    "EventIdConflictError",
    "EventLog",
    "EventNotFoundError",
    "EventPayload",
    "Exclusion",
    "FactApproved",
    "FactPublished",
    "FactRejected",
    "FactledgerError",
    "Head",
    "InvalidInputError",
    "InvalidTypeError",
    "LegacyClaims",
    "LegacyFormatError",
    "LogBusyError",
    "LogExistsError",
    "LogMissingError",
    "LogSnapshot",
    "LogTransaction",
    "MemoryAdded",
    "MemoryRemoved",
    "MemoryReweighted",
    "NewEvent",
    "OperatorAdded",
    "OperatorRemoved",
    "Payload",
    "PermissionDeniedError",
    "Problem",
    "QuarantineApplied",
    "QuarantineReleased",
    "ReadOnlyStoreError",
    "RecallRecorded",
    "RecordedEvent",
    "SQLiteEventLog",
    "StorageError",
    "StoredRow",
    "TrustSettings",
    "UnknownEventKindError",
    "Unreadable",
    "__version__",
    "chain_at",
    "content_hash",
    "decode_record",
    "encode_envelope",
    "is_operator_action",
    "open_log",
    "read_row",
    "verify_chain",
]


def open_log(
    target: str | os.PathLike[str],
    *,
    durability: Durability = "full",
    read_only: bool = False,
    clock_ns: Callable[[], int] = time.time_ns,
    busy_timeout_s: float = 30.0,
) -> SQLiteEventLog | PostgresEventLog:
    """Open (or create) the log at `target`: a file path, `:memory:`, or a PostgreSQL URI
    (`postgresql://…`, which needs `pip install 'factledger[postgres]'`).

    The one place a backend is chosen; other backends plug in here.
    """
    if is_dsn(target):
        try:
            from eventlog.postgres import PostgresEventLog
        except ModuleNotFoundError as exc:
            if exc.name != "psycopg":
                raise
            raise StorageError(
                "a PostgreSQL log needs psycopg: pip install 'factledger[postgres]'"
            ) from None
        return PostgresEventLog(
            target,
            durability=durability,
            read_only=read_only,
            clock_ns=clock_ns,
            busy_timeout_s=busy_timeout_s,
        )
    return SQLiteEventLog(
        target,
        durability=durability,
        read_only=read_only,
        clock_ns=clock_ns,
        busy_timeout_s=busy_timeout_s,
    )
