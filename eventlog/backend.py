"""The contract every log backend keeps. Nothing outside `eventlog` names a concrete backend.

The interface carries events, positions and stored bytes, never SQL: what a backend stores
them in is its own business. A read model kept in the same SQLite file as the log commits
with each append through the backend's own connection (`SQLiteEventLog.connection`); a read
model beside a log held elsewhere folds after the append has committed.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any, Literal, NamedTuple, Protocol, runtime_checkable

import msgspec

from eventlog.events import NewEvent, RecordedEvent
from eventlog.formats import LogFormat

Durability = Literal["full", "fast"]
"""`full`: an acknowledged append survives power loss. `fast`: it survives a process crash."""

Row = tuple[Any, ...]


class StoredRow(NamedTuple):
    """One log row exactly as stored: what verification re-hashes. In format v2 the row
    carries the text and salt stored beside it (None, both, when none are stored)."""

    position: int
    event_id: str
    body: bytes
    chain_hash: bytes
    text: bytes | None = None
    """The UTF-8 text from the content table; None when none is stored or it is over the
    read limit (`eventlog.formats.MAX_TEXT_BYTES`)."""
    salt: bytes | None = None
    """The salt from the content table; None when the event has no content row."""
    leaf: bytes | None = None
    """The leaf hash, computed by the backend while streaming a body over the read limit
    (`body` is then empty: the body is never held in memory)."""


class Head(msgspec.Struct, frozen=True, kw_only=True):
    """The last position and its chain value (position 0 and the genesis for an empty log)."""

    position: int
    chain_hash: str


class LogSnapshot(Protocol):
    """A consistent read of the log.

    Every reader of events (a log, a transaction, a snapshot, a read model's snapshot) reads
    the same way. `read(after=, until=, limit=)`, keyword-only: the events with
    after < position <= until (`until` defaults to the head when the read starts; a snapshot
    never reads past its own head), at most `limit` of them, in position order. Each argument
    is a non-negative int (`InvalidTypeError`, `InvalidInputError` otherwise), checked when
    `read` is called. `event_at(position)`: the event at that position, in one indexed
    lookup; `EventNotFoundError` (an `InvalidInputError` and a `LookupError`) when none is
    stored there, or it lies past the snapshot's head.
    """

    def head(self) -> Head: ...

    def read(
        self, *, after: int = 0, until: int | None = None, limit: int | None = None
    ) -> Iterator[RecordedEvent]: ...

    def event_at(self, position: int) -> RecordedEvent: ...


class LogTransaction(LogSnapshot, Protocol):
    """A write transaction: its appends commit together or not at all."""

    def append(self, event: NewEvent) -> RecordedEvent: ...

    def append_many(self, events: Sequence[NewEvent]) -> list[RecordedEvent]: ...


@runtime_checkable
class ErasingTransaction(Protocol):
    """A write transaction that removes erased texts when told to, after the read model in
    its own file folded the erasure (a SQLite file log). A PostgreSQL log needs none: its
    server removes them in the append that stores the erasure."""

    def erase_texts(self, erasure_position: int, positions: Sequence[int]) -> int: ...


class Link(NamedTuple):
    """One appended row as its chain links it: `chain = link(previous, leaf)`."""

    position: int
    previous: bytes
    leaf: bytes
    chain: bytes


@runtime_checkable
class LinkingTransaction(Protocol):
    """A write transaction that hands over how each row it appended links into the chain
    (a SQLite file log), so an index kept in the same file need not read them back."""

    def take_links(self) -> list[Link]:
        """The links of the rows appended since the last call, in order."""
        ...


@runtime_checkable
class ServerErasingLog(Protocol):
    """A log whose server removes an erasure's texts in the append that stores it (a
    PostgreSQL log); their dead rows stay in the table's pages until an operator reclaims
    them."""

    @property
    def content_table(self) -> str:
        """The table holding the texts, named as SQL names it (what `VACUUM FULL` rewrites)."""
        ...

    def require_erasure(self) -> None:
        """Refuse a log whose server cannot remove texts yet (made by an older version)."""


@runtime_checkable
class EventLog(Protocol):
    """An append-only, hash-chained event log."""

    @property
    def log_id(self) -> str: ...

    @property
    def log_format(self) -> LogFormat:
        """The format the log is stored in (`eventlog.formats`): its chain, where its texts
        sit, whether this version writes it."""
        ...

    @property
    def durability(self) -> Durability: ...

    def transaction(self) -> AbstractContextManager[LogTransaction]: ...

    def snapshot(self) -> AbstractContextManager[LogSnapshot]: ...

    def append(self, event: NewEvent) -> RecordedEvent: ...

    def append_many(self, events: Sequence[NewEvent]) -> list[RecordedEvent]: ...

    def read(
        self, *, after: int = 0, until: int | None = None, limit: int | None = None
    ) -> Iterator[RecordedEvent]:
        """Events after `after` up to `until`, at most `limit`, as `LogSnapshot.read`."""
        ...

    def event_at(self, position: int) -> RecordedEvent:
        """The event at `position`, as `LogSnapshot.event_at`."""
        ...

    def scan(
        self, *, after: int = 0, until: int | None = None, limit: int | None = None
    ) -> Iterator[StoredRow]:
        """The same window as `read`, as the stored rows verification re-hashes."""
        ...

    def head(self) -> Head: ...

    def close(self) -> None: ...


@runtime_checkable
class BoundLog(Protocol):
    """A log that binds the role it connects as to one adapter, and refuses that role's
    events naming any other (a PostgreSQL login made by `pg add-agent`)."""

    @property
    def bound_adapter(self) -> str | None:
        """The adapter this handle's role may write as, or None when it is bound to none."""
        ...
