"""The read model's connections: the only place the read side opens or configures SQLite.

The read model is SQLite on every host, whatever holds the log. `Database` runs the
statements of `projections._sql` and its siblings on a connection: the log's own (a read
model in the log's file, committed with each append), a host's cache file
(`CacheDatabase`), or a private one (`ScratchDatabase`: a scratch fold; `open_read_only`: a
legacy file). SQLite's errors become factledger's; a read-only connection refuses every
write by SQLite's own `query_only`.
"""

from __future__ import annotations

import os
import sqlite3
import tempfile
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Self

from eventlog import EventLog, ReadOnlyStoreError, SQLiteEventLog, StorageError
from eventlog.sqlite import translate

Row = tuple[Any, ...]

SCRATCH_CACHE_KIB = 65536
"""Page cache of a file-backed scratch database: bounded, so memory stays flat."""


_QUERY_BEGIN = "SAVEPOINT fl_query"
_QUERY_UNDO = "ROLLBACK TO fl_query"
_QUERY_END = "RELEASE fl_query"
"""A savepoint around each query of a read (`Database.query`), to undo one that wrote."""


class Database:
    """A connection the read model's statements run on; SQLite errors become ours."""

    def __init__(self, conn: sqlite3.Connection, where: str, *, owned: bool) -> None:
        self._conn = conn
        self._where = where
        self._owned = owned

    def execute(self, statement: str, params: Sequence[object] = ()) -> list[Row]:
        """Run one statement and return its rows."""
        try:
            return self._conn.execute(statement, params).fetchall()
        except sqlite3.Error as exc:
            raise self._translate(exc, "query the read model in") from None

    def query(self, statement: str, params: Sequence[object] = ()) -> list[Row]:
        """Run one statement that only reads, inside the open transaction, and return its
        rows. One that writes, whatever it starts with (it changed a row, or it returns no
        result columns, as DDL does), is undone and refused (`ReadOnlyStoreError`): the
        projectors alone write the read model. `PRAGMA query_only` would do it too, but each
        change of that flag expires every statement the connection has prepared."""
        changes = self._conn.total_changes
        try:
            self._conn.execute(_QUERY_BEGIN)
            try:
                cursor = self._conn.execute(statement, params)
                rows = cursor.fetchall()
            except BaseException:
                self._conn.execute(_QUERY_UNDO)
                raise
            wrote = cursor.description is None or self._conn.total_changes != changes
            if wrote:
                self._conn.execute(_QUERY_UNDO)
            self._conn.execute(_QUERY_END)
        except sqlite3.Error as exc:
            raise self._translate(exc, "query the read model in") from None
        if wrote:
            raise ReadOnlyStoreError(
                f"a query of the read model in {self._where} may not write it (only the "
                "projectors do, as they fold the log); its changes were rolled back"
            )
        return rows

    def executemany(self, statement: str, rows: Iterable[Sequence[object]]) -> None:
        """Run one statement for many rows."""
        try:
            self._conn.executemany(statement, rows)
        except sqlite3.Error as exc:
            raise self._translate(exc, "write the read model in") from None

    def close(self) -> None:
        """Close the connection if this object opened it; a log's connection stays open."""
        if self._owned:
            self._conn.close()

    def _translate(self, exc: sqlite3.Error, action: str) -> Exception:
        return translate(exc, action, self._where)


def _refuse_writes(conn: sqlite3.Connection) -> None:
    """Make `conn` read-only, whatever a statement says: SQLite's `query_only` refuses every
    change to a database, and an authorizer refuses what it leaves open: the pragma that
    would turn it off, and attaching a file (which creates it, as `VACUUM INTO` does)."""
    conn.execute("PRAGMA query_only = ON")
    conn.set_authorizer(_read_only)


def _read_only(action: int, name: str | None, value: str | None, *_: str | None) -> int:
    """Deny attaching a file and setting `query_only` (reading it is allowed)."""
    if action in (sqlite3.SQLITE_ATTACH, sqlite3.SQLITE_DETACH):
        return sqlite3.SQLITE_DENY
    setting = action == sqlite3.SQLITE_PRAGMA and value is not None
    if setting and (name or "").lower() == "query_only":
        return sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_OK


def _refused_write(exc: sqlite3.Error) -> bool:
    """Whether SQLite refused a statement as a write on a read-only connection (or the
    authorizer refused it)."""
    code = getattr(exc, "sqlite_errorcode", None)
    return code is not None and (code & 0xFF) in (sqlite3.SQLITE_READONLY, sqlite3.SQLITE_AUTH)


def in_log_file(event_log: EventLog) -> Database:
    """The read model kept in the log's own SQLite file, on the log's connection: use it only
    inside the log's `transaction()` or `snapshot()`, so its rows commit with each append."""
    if not isinstance(event_log, SQLiteEventLog):
        raise StorageError(
            f"a read model in the log's own file needs a SQLite log, not {type(event_log).__name__}"
        )
    where = "in-memory database" if event_log.path == ":memory:" else f"database {event_log.path}"
    return Database(event_log.connection, where, owned=False)


def open_read_only(path: Path) -> Database:
    """Another SQLite file (a legacy store), opened read-only."""
    where = f"database {path}"
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        _refuse_writes(conn)
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.Error as exc:
        raise translate(exc, "read", where) from None
    return Database(conn, where, owned=True)


CACHE_BUSY_TIMEOUT_S = 30.0
"""How long a process waits for another one folding into the same cache file."""


class CacheDatabase(Database):
    """A host's read model of a log held elsewhere: a SQLite file of its own (or memory).

    Several processes may share the file. Writes take SQLite's write lock (`BEGIN
    IMMEDIATE`, waiting up to `CACHE_BUSY_TIMEOUT_S`), so folds are serialized; a read sees
    one committed state. `lock` serializes the threads sharing this handle. The file is not
    synced on every commit (`synchronous=NORMAL`): losing the last commits to a power cut
    leaves the cache behind, which catch-up repairs.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        where = "in-memory cache" if self.path == ":memory:" else f"cache {self.path}"
        try:
            if self.path != ":memory:":
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StorageError(f"cannot open {where}: {exc.strerror or exc}") from None
        try:
            conn = sqlite3.connect(
                self.path,
                timeout=CACHE_BUSY_TIMEOUT_S,
                isolation_level=None,
                check_same_thread=False,
            )
        except sqlite3.Error as exc:
            raise translate(exc, "open", where) from None
        super().__init__(conn, where, owned=True)
        self.lock = threading.RLock()
        try:
            conn.execute("PRAGMA synchronous=NORMAL")
            # An erased text's bytes must not stay in the cache's free space.
            conn.execute("PRAGMA secure_delete=ON")
        except sqlite3.Error as exc:
            conn.close()
            raise translate(exc, "configure", where) from None

    def fold_wal(self) -> None:
        """Copy the write-ahead log back into the file and truncate it (after an erasure is
        folded, so its overwritten bytes are in no WAL frame); a reader holding frames
        leaves the rest to the next checkpoint."""
        with self.lock:
            self._run("PRAGMA wal_checkpoint(TRUNCATE)", "checkpoint")

    def use_wal(self) -> None:
        """Let readers and a writer work at once (WAL). Call it once the file is known to be
        a cache: it changes the file, and another file must be left as it was."""
        with self.lock:
            self._run("PRAGMA journal_mode=WAL", "configure")

    @property
    def in_transaction(self) -> bool:
        """Whether a read or write transaction is open on this handle."""
        return self._conn.in_transaction

    @contextmanager
    def write(self) -> Iterator[CacheDatabase]:
        """One write transaction, holding the cache's write lock: it commits on a clean exit
        and rolls back on any exception."""
        with self.lock:
            self._run("BEGIN IMMEDIATE", "lock")
            try:
                yield self
            except BaseException:
                self._conn.rollback()
                raise
            self._run("COMMIT", "commit to")

    @contextmanager
    def read(self) -> Iterator[CacheDatabase]:
        """One read transaction: every query inside sees the same committed state (the
        enclosing transaction's, when one is already open on this handle)."""
        with self.lock:
            if self._conn.in_transaction:
                yield self
                return
            self._run("BEGIN", "read")
            try:
                yield self
            finally:
                if self._conn.in_transaction:
                    self._conn.rollback()

    def _run(self, statement: str, action: str) -> None:
        try:
            self._conn.execute(statement)
        except sqlite3.Error as exc:
            raise translate(exc, action, self._where) from None

    def close(self) -> None:
        """Close the connection."""
        with self.lock:
            super().close()


SEALED = "this view is read-only: it shows a past state of the log"


class FoldDatabase(Database):
    """A database a past state is folded into, then sealed for reading (`ScratchDatabase`,
    `SnapshotDatabase`)."""

    _sealed = False

    def seal(self) -> None:
        """Refuse every write from now on (`_refuse_writes`): a statement that would change
        the database raises `ReadOnlyStoreError`, however it is written."""
        try:
            _refuse_writes(self._conn)
        except sqlite3.Error as exc:
            raise translate(exc, "seal", self._where) from None
        self._sealed = True

    def _translate(self, exc: sqlite3.Error, action: str) -> Exception:
        if self._sealed and _refused_write(exc):
            return ReadOnlyStoreError(SEALED)
        return super()._translate(exc, action)

    @contextmanager
    def snapshot(self) -> Iterator[Self]:
        """Reads, in the shape a store's snapshot has."""
        yield self


class ScratchDatabase(FoldDatabase):
    """A private database to fold a read model into, outside the log's file: in memory (time
    travel, history) or a temporary file beside the log (a rebuild's shadow). Never durable,
    and gone once closed."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        where = f"scratch database {path}" if path else "in-memory scratch database"
        try:
            conn = sqlite3.connect(
                str(path) if path else ":memory:", isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as exc:
            self._discard()
            raise translate(exc, "create", where) from None
        super().__init__(conn, where, owned=True)
        try:
            conn.execute("PRAGMA journal_mode=OFF")
            conn.execute("PRAGMA synchronous=OFF")
            if path:
                conn.execute(f"PRAGMA cache_size=-{SCRATCH_CACHE_KIB}")
        except sqlite3.Error as exc:
            self.close()
            raise translate(exc, "configure", where) from None

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

    def close(self) -> None:
        """Free the database, and delete its file if it has one."""
        super().close()
        self._discard()

    def _discard(self) -> None:
        if self.path is not None:
            self.path.unlink(missing_ok=True)

    def __enter__(self) -> ScratchDatabase:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def copy_to(self, target: Path) -> None:
        """Copy the whole database into a new file `target` (SQLite's backup API), kept in
        WAL mode so that a fold into it can stay uncommitted (`SnapshotDatabase`)."""
        where = f"snapshot {target}"
        try:
            copy = sqlite3.connect(str(target), isolation_level=None)
        except sqlite3.Error as exc:
            raise translate(exc, "create", where) from None
        try:
            self._conn.backup(copy)
            copy.execute("PRAGMA journal_mode=WAL")
        except sqlite3.Error as exc:
            raise translate(exc, "write", where) from None
        finally:
            copy.close()

    @classmethod
    def copy_of(cls, source: Path, directory: Path) -> ScratchDatabase:
        """A scratch file in `directory` holding a copy of the SQLite file `source`, read
        through a read-only connection (which never changes it)."""
        scratch = cls.beside(directory / source.name)
        try:
            original = sqlite3.connect(f"{source.resolve().as_uri()}?mode=ro", uri=True)
            try:
                original.backup(scratch._conn)
            finally:
                original.close()
        except sqlite3.Error as exc:
            scratch.close()
            raise translate(exc, "copy", f"snapshot {source}") from None
        return scratch


class SnapshotDatabase(FoldDatabase):
    """A snapshot file (`projections._snapshots`) opened to fold a few events into inside
    one write transaction that is never committed: in WAL mode its pages go to the WAL as
    frames no commit ever marks, so the file is left as it was, even by a crash, and closing
    rolls it back. A second user finds the file locked (`LogBusyError`, at once)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        where = f"snapshot {path}"
        try:
            conn = sqlite3.connect(
                f"{path.resolve().as_uri()}?mode=rw",
                uri=True,
                isolation_level=None,
                check_same_thread=False,
                timeout=0,
            )
        except sqlite3.Error as exc:
            raise translate(exc, "open", where) from None
        super().__init__(conn, where, owned=True)
        try:
            conn.execute(f"PRAGMA cache_size=-{SCRATCH_CACHE_KIB}")
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            conn.close()
            raise translate(exc, "open", where) from None

    @contextmanager
    def bulk(self) -> Iterator[SnapshotDatabase]:
        """Writes inside the transaction already open (never committed)."""
        yield self

    def close(self) -> None:
        """Roll back whatever was folded and close the file, unchanged."""
        try:
            if self._conn.in_transaction:
                self._conn.rollback()
        except sqlite3.Error:
            pass
        finally:
            super().close()
