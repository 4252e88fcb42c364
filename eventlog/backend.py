"""The contract every log backend keeps. Nothing outside `eventlog` names a concrete backend.

Projectors write in the same transaction as an append by taking the `LogTransaction` the
append runs in: `with log.transaction() as tx: records = tx.append_many(drafts); fold(tx, records)`.
SQL passed to `execute` uses `?` placeholders; a backend translates them if its driver differs.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any, Literal, NamedTuple, Protocol

import msgspec

from eventlog.events import NewEvent, RecordedEvent

Durability = Literal["full", "fast"]
"""`full`: an acknowledged append survives power loss. `fast`: it survives a process crash."""

Row = tuple[Any, ...]


class StoredRow(NamedTuple):
    """One log row exactly as stored: what verification re-hashes."""

    position: int
    event_id: str
    body: bytes
    chain_hash: bytes


class Head(msgspec.Struct, frozen=True, kw_only=True):
    """The last position and its chain value (position 0 and the genesis for an empty log)."""

    position: int
    chain_hash: str


class ReadSnapshot(Protocol):
    """A consistent read of the log and the tables beside it."""

    def head(self) -> Head: ...

    def execute(self, sql: str, params: Sequence[object] = ()) -> list[Row]: ...

    def read(self, after: int = 0, until: int | None = None) -> Iterator[RecordedEvent]: ...


class LogTransaction(ReadSnapshot, Protocol):
    """A write transaction: appends and table writes commit together or not at all."""

    def append(self, event: NewEvent) -> RecordedEvent: ...

    def append_many(self, events: Sequence[NewEvent]) -> list[RecordedEvent]: ...

    def executemany(self, sql: str, rows: Iterable[Sequence[object]]) -> None: ...


class EventLog(Protocol):
    """An append-only, hash-chained event log."""

    @property
    def log_id(self) -> str: ...

    @property
    def durability(self) -> Durability: ...

    def transaction(self) -> AbstractContextManager[LogTransaction]: ...

    def snapshot(self) -> AbstractContextManager[ReadSnapshot]: ...

    def append(self, event: NewEvent) -> RecordedEvent: ...

    def append_many(self, events: Sequence[NewEvent]) -> list[RecordedEvent]: ...

    def read(
        self, after: int = 0, limit: int | None = None, *, until: int | None = None
    ) -> Iterator[RecordedEvent]: ...

    def scan(self, after: int = 0, until: int | None = None) -> Iterator[StoredRow]: ...

    def head(self) -> Head: ...

    def close(self) -> None: ...
