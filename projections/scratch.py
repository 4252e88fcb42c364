"""A private SQLite database to fold a read model into, outside the log's file: in memory for
time travel, or a temporary file beside the database for a rebuild's shadow."""

from __future__ import annotations

import os
import sqlite3
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from eventlog import ReadOnlyStoreError, StorageError

FILE_CACHE_KIB = 65536
"""Page cache of a file-backed scratch database: bounded, so memory stays flat."""


class ScratchDatabase:
    """Tables folded from a log; never part of the log's file, and gone once closed."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self._where = f"scratch database {path}" if path else "in-memory scratch database"
        try:
            self._conn = sqlite3.connect(
                str(path) if path else ":memory:", isolation_level=None, check_same_thread=False
            )
            self._conn.execute("PRAGMA journal_mode=OFF")
            self._conn.execute("PRAGMA synchronous=OFF")
            if path:
                self._conn.execute(f"PRAGMA cache_size=-{FILE_CACHE_KIB}")
        except sqlite3.Error as exc:
            self._discard()
            raise StorageError(f"cannot create the {self._where}: {exc}") from None
        self._sealed = False

    @classmethod
    def beside(cls, database: Path) -> ScratchDatabase:
        """A scratch database in a hidden temporary file next to `database` (same disk)."""
        try:
            handle, name = tempfile.mkstemp(
                prefix=f".{database.name}.rebuild-", suffix=".tmp", dir=database.parent
            )
        except OSError as exc:
            raise StorageError(f"cannot create a scratch file beside {database}: {exc}") from None
        os.close(handle)
        return cls(Path(name))

    def execute(self, statement: str, params: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        """Run one statement; writes are refused once the database is sealed."""
        if self._sealed and not statement.lstrip().upper().startswith(("SELECT", "WITH")):
            raise ReadOnlyStoreError("this view is read-only: it shows a past state of the log")
        try:
            return self._conn.execute(statement, params).fetchall()
        except sqlite3.Error as exc:
            raise StorageError(f"{self._where} failed: {exc}") from None

    def executemany(self, statement: str, rows: Iterable[Sequence[object]]) -> None:
        """Run one statement for many rows."""
        if self._sealed:
            raise ReadOnlyStoreError("this view is read-only: it shows a past state of the log")
        try:
            self._conn.executemany(statement, rows)
        except sqlite3.Error as exc:
            raise StorageError(f"{self._where} failed: {exc}") from None

    @contextmanager
    def bulk(self) -> Iterator[ScratchDatabase]:
        """One transaction around many writes (much faster than one per statement)."""
        self.execute("BEGIN")
        try:
            yield self
        except BaseException:
            self._conn.rollback()
            raise
        self.execute("COMMIT")

    def seal(self) -> None:
        """Refuse every write from now on."""
        self._sealed = True

    @contextmanager
    def snapshot(self) -> Iterator[ScratchDatabase]:
        """Reads, in the shape a log snapshot has."""
        yield self

    def close(self) -> None:
        """Free the database, and delete its file if it has one."""
        self._conn.close()
        self._discard()

    def _discard(self) -> None:
        if self.path is not None:
            self.path.unlink(missing_ok=True)

    def __enter__(self) -> ScratchDatabase:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
