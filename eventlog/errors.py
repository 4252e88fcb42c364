"""The exceptions factledger raises. Every one derives from `FactledgerError`."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from eventlog.verify import Problem


class FactledgerError(Exception):
    """Base class of every error factledger raises on purpose."""


class InvalidInputError(FactledgerError, ValueError):
    """A value was of the right type but not acceptable (empty, too large, malformed)."""


class EventNotFoundError(InvalidInputError, LookupError):
    """No event is stored at the position asked for (`event_at`): before the first, past the
    head of the read, or missing from the log."""

    def __init__(self, position: int) -> None:
        super().__init__(f"no event is stored at position {position}")
        self.position = position


class InvalidTypeError(FactledgerError, TypeError):
    """A value was of the wrong type."""


class EventIdConflictError(InvalidInputError):
    """An `event_id` already in the log was reused for a different event."""


class StorageError(FactledgerError):
    """The storage under the log failed or refused (not a database, read-only, disk full)."""


class LogBusyError(StorageError):
    """Other writers held the log for longer than the retry budget allows."""


class LogMissingError(StorageError):
    """The target holds no usable factledger log: nothing at all, or the remains of one (the
    factledger tables named in `remnants`) whose events or log id are gone."""

    def __init__(self, message: str, *, remnants: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.remnants = remnants


class LogExistsError(InvalidInputError):
    """A new log was to be created with its first events where a log already is."""


class PermissionDeniedError(StorageError):
    """The database refused this role the action: a privilege it lacks, a change the log's
    triggers refuse, or an event naming an adapter the role is not bound to."""


class CorruptLogError(FactledgerError):
    """A stored row cannot be decoded into an event."""

    def __init__(self, message: str, *, position: int) -> None:
        super().__init__(message)
        self.position = position


class StrayContentError(CorruptLogError):
    """The log's file holds a text for a position past its head (a copied, rewound or edited
    file): a write there is refused rather than the text silently deleted or mismatched."""


class UnknownEventKindError(CorruptLogError):
    """A stored row names an event kind this version does not know."""

    def __init__(self, kind: str, *, position: int) -> None:
        super().__init__(f"unknown event kind {kind!r} at position {position}", position=position)
        self.kind = kind


class ReadOnlyStoreError(FactledgerError):
    """A write was attempted through a read-only view."""


class LegacyFormatError(ReadOnlyStoreError):
    """A write was attempted to a log of a format this version reads but never writes (v1):
    `factledger migrate` copies it into a new log."""


class ChainBreak(FactledgerError):
    """Raised by `ChainWalker.feed` at the first row that does not verify."""

    def __init__(self, position: int, problem: Problem, reason: str) -> None:
        super().__init__(reason)
        self.position = position
        self.problem = problem
        self.reason = reason
