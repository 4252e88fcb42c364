"""A private in-memory SQLite database to fold a read model into, outside the live file."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from eventlog import FactledgerError, ReadOnlyStoreError


class ScratchDatabase:
    """Tables folded from a log (time travel, rebuild shadows); never part of the log's file."""

    def __init__(self) -> None:
        self._conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        self._conn.execute("PRAGMA journal_mode=OFF")
        self._conn.execute("PRAGMA synchronous=OFF")
        self._sealed = False

    def execute(self, statement: str, params: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        """Run one statement; writes are refused once the database is sealed."""
        if self._sealed and not statement.lstrip().upper().startswith(("SELECT", "WITH")):
            raise ReadOnlyStoreError("this view is read-only: it shows a past state of the log")
        try:
            return self._conn.execute(statement, params).fetchall()
        except sqlite3.Error as exc:
            raise FactledgerError(f"scratch read model failed: {exc}") from None

    def executemany(self, statement: str, rows: Iterable[Sequence[object]]) -> None:
        """Run one statement for many rows."""
        if self._sealed:
            raise ReadOnlyStoreError("this view is read-only: it shows a past state of the log")
        self._conn.executemany(statement, rows)

    def seal(self) -> None:
        """Refuse every write from now on."""
        self._sealed = True

    @contextmanager
    def snapshot(self) -> Iterator[ScratchDatabase]:
        """Reads, in the shape a log snapshot has."""
        yield self

    def close(self) -> None:
        """Free the database."""
        self._conn.close()
