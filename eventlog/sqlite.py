"""The SQLite log backend: WAL, append-only triggers, serialized appends with bounded retry."""

from __future__ import annotations

import functools
import os
import random
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import NamedTuple, TypeVar

from msgspec import UNSET

from eventlog.backend import Durability, Head, Link, StoredRow
from eventlog.checks import (
    MAX_CONTENT_BYTES,
    check_path,
)
from eventlog.codec import read_row
from eventlog.drafts import Prepared, check_distinct_ids, prepare, same_event, seal
from eventlog.errors import (
    EventIdConflictError,
    FactledgerError,
    InvalidInputError,
    LogBusyError,
    LogExistsError,
    LogMissingError,
    StorageError,
    StrayContentError,
)
from eventlog.events import NewEvent, RecordedEvent, Unreadable
from eventlog.formats import CURRENT, MAX_TEXT_BYTES, LogFormat, format_named, marker
from eventlog.logs import get_logger
from eventlog.migration import Migration, Reading
from eventlog.rows import (
    decoded_events,
    lookup_event,
    stored_row,
    stored_rows,
    window,
)

log = get_logger("factledger.eventlog")
T = TypeVar("T")
FirstEvents = Callable[[str], Sequence[NewEvent]]
"""Given a new log's id, the events it starts with."""

MEMORY = ":memory:"
FORMAT_PREFIX = "factledger-log"
"""The log's `format` in `fl_log_meta` is this, `/` and the format's number."""
OVERSIZE_CHUNK = 1024 * 1024
"""Bytes read at a time while hashing a body over the read limit."""
WAL_AUTOCHECKPOINT_PAGES = 4000
"""Fold the WAL back into the database every ~16 MiB rather than SQLite's default ~4 MiB:
an event touches several pages, and each checkpoint costs an extra fsync of the database."""

_ERASURE_SCHEMA = (
    # The positions whose text an erasure removed, and the erasure's position: a text row
    # leaves `fl_content` only for a position recorded here. These triggers stop mistakes;
    # an attacker holding the file is stopped by `verify`, which accepts a missing text only
    # where a signed erasure, authorized at its position, names it.
    """CREATE TABLE IF NOT EXISTS fl_erased (
        position INTEGER PRIMARY KEY,
        erasure_position INTEGER NOT NULL CHECK (erasure_position > position)
    )""",
    """CREATE TRIGGER IF NOT EXISTS fl_erased_no_update BEFORE UPDATE ON fl_erased
    BEGIN SELECT RAISE(ABORT, 'fl_erased is append-only: UPDATE refused'); END""",
    """CREATE TRIGGER IF NOT EXISTS fl_erased_no_delete BEFORE DELETE ON fl_erased
    BEGIN SELECT RAISE(ABORT, 'fl_erased is append-only: DELETE refused'); END""",
    """CREATE TRIGGER IF NOT EXISTS fl_content_no_delete BEFORE DELETE ON fl_content
    WHEN NOT EXISTS (SELECT 1 FROM fl_erased WHERE position = OLD.position)
    BEGIN SELECT RAISE(ABORT, 'fl_content: only an erasure removes a text'); END""",
)
"""What lets an erasure remove texts: created with a log, and added to a log file made
before erasure existed when it is first opened for writing."""

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS fl_log_meta (
        name TEXT PRIMARY KEY,
        value TEXT NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS fl_events (
        position INTEGER PRIMARY KEY,
        event_id TEXT NOT NULL,
        body BLOB NOT NULL,
        chain_hash BLOB NOT NULL
    )""",
    # Ids the log generates are unique by construction and carry GENERATED_ID_PREFIX, which
    # callers may not use; only caller-given ids need an index (and a page per commit).
    """CREATE UNIQUE INDEX IF NOT EXISTS fl_events_caller_id ON fl_events (event_id)
    WHERE substr(event_id, 1, 3) <> 'fl:'""",
    """CREATE TRIGGER IF NOT EXISTS fl_events_no_update BEFORE UPDATE ON fl_events
    BEGIN SELECT RAISE(ABORT, 'fl_events is append-only: UPDATE refused'); END""",
    """CREATE TRIGGER IF NOT EXISTS fl_events_no_delete BEFORE DELETE ON fl_events
    BEGIN SELECT RAISE(ABORT, 'fl_events is append-only: DELETE refused'); END""",
    """CREATE TABLE IF NOT EXISTS fl_content (
        position INTEGER PRIMARY KEY,
        text BLOB NOT NULL,
        salt BLOB NOT NULL
    )""",
    """CREATE TRIGGER IF NOT EXISTS fl_content_no_update BEFORE UPDATE ON fl_content
    BEGIN SELECT RAISE(ABORT, 'fl_content is append-only: UPDATE refused'); END""",
    *_ERASURE_SCHEMA,
    """CREATE TRIGGER IF NOT EXISTS fl_log_meta_no_update BEFORE UPDATE ON fl_log_meta
    BEGIN SELECT RAISE(ABORT, 'fl_log_meta is append-only: UPDATE refused'); END""",
    """CREATE TRIGGER IF NOT EXISTS fl_log_meta_no_delete BEFORE DELETE ON fl_log_meta
    BEGIN SELECT RAISE(ABORT, 'fl_log_meta is append-only: DELETE refused'); END""",
)
_SQL_HAS_LOG = "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'fl_events'"
_SQL_FACTLEDGER_TABLES = (
    "SELECT name FROM sqlite_master WHERE type = 'table' AND substr(name, 1, 3) = 'fl_' "
    "ORDER BY name"
)
_SQL_META_INSERT = "INSERT OR IGNORE INTO fl_log_meta (name, value) VALUES (?, ?)"
_SQL_META_GET = "SELECT value FROM fl_log_meta WHERE name = ?"
_SQL_HEAD = "SELECT position, chain_hash FROM fl_events ORDER BY position DESC LIMIT 1"
_SQL_INSERT = "INSERT INTO fl_events (position, event_id, body, chain_hash) VALUES (?, ?, ?, ?)"
_SQL_INSERT_CONTENT = "INSERT INTO fl_content (position, text, salt) VALUES (?, ?, ?)"
_SQL_HAS_ERASED = "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'fl_erased'"
_SQL_OLD_CONTENT_TRIGGER = "DROP TRIGGER IF EXISTS fl_content_no_delete"
_SQL_ERASED_INSERT = "INSERT OR IGNORE INTO fl_erased (position, erasure_position) VALUES (?, ?)"
_SQL_CONTENT_DELETE = "DELETE FROM fl_content WHERE position = ?"
_SQL_STRAY_CONTENT = "SELECT min(position) FROM fl_content WHERE position >= ?"
_SQL_ROWS = (
    "SELECT e.position, CAST(e.event_id AS {event_id}), "
    "CASE WHEN length(CAST(e.body AS BLOB)) <= {body_limit} THEN CAST(e.body AS BLOB) END, "
    "CAST(e.chain_hash AS BLOB), {text}, {salt}{leaf} FROM fl_events e {join}"
)
_SQL_CONTENT = {
    "text": "CASE WHEN length(CAST(c.text AS BLOB)) <= {text_limit} THEN CAST(c.text AS BLOB) END",
    "salt": "CAST(c.salt AS BLOB)",
    "join": "LEFT JOIN fl_content c ON c.position = e.position",
}
_SQL_NO_CONTENT = {"text": "NULL", "salt": "NULL", "join": ""}
_WHERE_SCAN = " WHERE e.position > ? AND e.position <= ? ORDER BY e.position LIMIT ?"
_WHERE_EVENT_ID = " WHERE e.event_id = ? AND substr(e.event_id, 1, 3) <> 'fl:'"


class _Queries(NamedTuple):
    """The row-reading statements of a log in one format (v2 joins the content table).

    `scan` reads each row in the shape of a `StoredRow` (the id as text, every other value
    as bytes, no leaf), so a chunk needs no conversion in Python; `scan_bytes` reads it as
    `eventlog.rows.stored_row` takes it, for a chunk whose id an edit left undecodable."""

    scan: str
    scan_bytes: str
    by_event_id: str

    @classmethod
    def of(cls, log_format: LogFormat) -> _Queries:
        parts = _SQL_CONTENT if log_format.text_beside else _SQL_NO_CONTENT
        content = {name: part.format(text_limit=MAX_TEXT_BYTES) for name, part in parts.items()}
        limit = log_format.max_body_bytes
        shaped = _SQL_ROWS.format(event_id="TEXT", leaf=", NULL", body_limit=limit, **content)
        raw = _SQL_ROWS.format(event_id="BLOB", leaf="", body_limit=limit, **content)
        return cls(shaped + _WHERE_SCAN, raw + _WHERE_SCAN, raw + _WHERE_EVENT_ID)


_REMNANTS = (
    "{where} holds factledger tables ({tables}) but no log events table: the log was removed "
    "from it; nothing was written"
)
_EXISTS = "{where} already holds a factledger log; nothing was written"

_BUSY_CODES = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED})
_UNUSABLE = "{where} is not a usable SQLite database"
_PROBLEMS = {
    sqlite3.SQLITE_READONLY: "{where} is read-only",
    sqlite3.SQLITE_FULL: "no space left for {where}",
    sqlite3.SQLITE_NOTADB: _UNUSABLE,
    sqlite3.SQLITE_CORRUPT: _UNUSABLE,
    sqlite3.SQLITE_CANTOPEN: "unable to open {where}",
}
"""What a primary result code says about the database, for the messages of `translate`."""


def _primary_code(exc: sqlite3.Error) -> int | None:
    """SQLite's primary result code (the low byte of an extended one), if SQLite raised it.

    Errors sqlite3 raises itself (a closed connection, a bad parameter) carry no code.
    """
    code: int | None = getattr(exc, "sqlite_errorcode", None)
    return None if code is None else code & 0xFF


def _is_busy(exc: sqlite3.Error) -> bool:
    return _primary_code(exc) in _BUSY_CODES


def translate(exc: sqlite3.Error, action: str, where: str) -> FactledgerError:
    """Turn a sqlite3 error into a factledger error that says what failed and where.

    Mapped by SQLite's result code, never by the message: busy or locked is `LogBusyError`;
    every other failure is a `StorageError`, which keeps SQLite's message (an append-only
    trigger's refusal, for one).
    """
    text = str(exc)
    code = _primary_code(exc)
    if code in _BUSY_CODES:
        return LogBusyError(f"cannot {action}: {where} is locked by another writer ({text})")
    problem = _PROBLEMS.get(code) if code is not None else None
    if problem is not None:
        return StorageError(f"cannot {action}: {problem.format(where=where)} ({text})")
    return StorageError(f"cannot {action} ({where}): {text}")


class SQLiteEventLog:
    """An event log in one SQLite file (or in memory), safe for many processes and threads.

    Appends are serialized by SQLite's write lock, taken with `BEGIN IMMEDIATE` and retried
    with jittered backoff for up to `busy_timeout_s` seconds before `LogBusyError`.

    A log is created where the file holds none. With `first_events`, the log must be new:
    the events `first_events(log_id)` returns (its first operator's registration) are
    appended in the transaction that creates it, so no other process ever sees the log
    without them; a file that holds a log already is `LogExistsError`, and left unchanged.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        durability: Durability = "full",
        read_only: bool = False,
        clock_ns: Callable[[], int] = time.time_ns,
        busy_timeout_s: float = 30.0,
        max_content_bytes: int = MAX_CONTENT_BYTES,
        first_events: FirstEvents | None = None,
    ) -> None:
        if durability not in ("full", "fast"):
            raise InvalidInputError(f"durability must be 'full' or 'fast', got {durability!r}")
        self._path = check_path(path)
        self._where = "in-memory database" if self._path == MEMORY else f"database {self._path}"
        self._durability: Durability = durability
        self._read_only = read_only
        self._clock_ns = clock_ns
        self._busy_timeout_s = busy_timeout_s
        self._max_content_bytes = max_content_bytes
        self._lock = threading.RLock()
        self._in_transaction = False
        self._conn = self._connect()
        self._set_format(CURRENT)
        try:
            self._log_id = self._ensure_schema(first_events)
            self._set_format(self._stored_format())
        except BaseException:
            self._conn.close()
            raise
        self._genesis = self._format.chain.genesis(self._log_id)
        self._reading = Reading(self._format, Migration(self._log_id))
        if not read_only and self._format is CURRENT:
            self._with_retry(self._add_erasure_schema, "prepare erasure in")

    def _add_erasure_schema(self) -> None:
        """Give a log file made before erasure existed the tables and triggers it needs."""
        if self._conn.execute(_SQL_HAS_ERASED).fetchone()[0]:
            return
        with self.transaction():
            if not self._conn.execute(_SQL_HAS_ERASED).fetchone()[0]:
                self._conn.execute(_SQL_OLD_CONTENT_TRIGGER)
                for statement in _ERASURE_SCHEMA:
                    self._conn.execute(statement)

    def _set_format(self, log_format: LogFormat) -> None:
        self._format = log_format
        self._queries = _Queries.of(log_format)

    def _stored_format(self) -> LogFormat:
        row = self._with_retry(
            lambda: self._conn.execute(_SQL_META_GET, ("format",)).fetchone(), "read the format of"
        )
        return format_named(FORMAT_PREFIX, None if row is None else str(row[0]), self._where)

    # -- opening -------------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        if self._path != MEMORY:
            target = Path(self._path)
            try:
                if target.is_dir():
                    raise StorageError(f"cannot open {self._where}: the path is a directory")
                if target.exists() and not target.is_file():
                    raise StorageError(
                        f"cannot open {self._where}: the path is not a regular file (a named "
                        "pipe, a device or a socket), which SQLite would wait on"
                    )
                if self._read_only and not target.exists():
                    raise LogMissingError(f"cannot open {self._where}: no such file")
                if not self._read_only:
                    target.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StorageError(f"cannot open {self._where}: {exc.strerror or exc}") from None
        try:
            if self._read_only and self._path != MEMORY:
                uri = Path(self._path).resolve().as_uri() + "?mode=ro"
                conn = sqlite3.connect(
                    uri, uri=True, timeout=0.2, isolation_level=None, check_same_thread=False
                )
            else:
                conn = sqlite3.connect(
                    self._path, timeout=0.2, isolation_level=None, check_same_thread=False
                )
        except sqlite3.Error as exc:
            raise translate(exc, "open", self._where) from None
        try:
            self._with_retry(lambda: self._configure(conn), "configure")
        except BaseException:
            conn.close()
            raise
        return conn

    def _configure(self, conn: sqlite3.Connection) -> None:
        if not self._read_only:
            conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=" + ("FULL" if self._durability == "full" else "NORMAL"))
        conn.execute("PRAGMA cache_size=-32000")
        conn.execute(f"PRAGMA wal_autocheckpoint={WAL_AUTOCHECKPOINT_PAGES}")
        conn.execute("PRAGMA temp_store=MEMORY")
        if not self._read_only:
            # What a write frees (an erased text, a read-model row replaced) is overwritten
            # with zeros, so an erased text's bytes do not stay in the file's free space.
            conn.execute("PRAGMA secure_delete=ON")

    def _ensure_schema(self, first_events: FirstEvents | None) -> str:
        has_log = self._with_retry(self._has_log, "read the schema of")
        if not has_log and self._read_only:
            remnants = self._remnants()
            if remnants:
                raise LogMissingError(
                    _REMNANTS.format(where=self._where, tables=", ".join(remnants)),
                    remnants=remnants,
                )
            raise LogMissingError(f"{self._where} holds no factledger log")
        if has_log and first_events is not None:
            raise LogExistsError(_EXISTS.format(where=self._where))
        if not has_log:
            with self.transaction() as tx:
                self._create(tx, first_events)
        elif "fl_log_meta" not in (tables := self._remnants()):
            raise LogMissingError(
                f"{self._where} has a factledger log table but no log metadata table "
                "(fl_log_meta, which holds the log id): it was removed",
                remnants=tables,
            )
        row = self._with_retry(
            lambda: self._conn.execute(_SQL_META_GET, ("log_id",)).fetchone(), "read the id of"
        )
        if row is None:
            raise LogMissingError(
                f"{self._where} has a factledger log table but no log id: its log metadata "
                "was removed",
                remnants=self._remnants(),
            )
        return str(row[0])

    def _has_log(self) -> bool:
        return bool(self._conn.execute(_SQL_HAS_LOG).fetchone()[0])

    def _create(self, tx: _Transaction, first_events: FirstEvents | None) -> None:
        """Create the log under the write lock, with its first events, unless another process
        made it since this one looked (then a log to be made with first events is refused)."""
        if tx._run(self._has_log, "read the schema of"):
            if first_events is not None:
                raise LogExistsError(_EXISTS.format(where=self._where))
            return
        remnants = self._remnants()
        if remnants:
            raise LogMissingError(
                _REMNANTS.format(where=self._where, tables=", ".join(remnants)), remnants=remnants
            )
        log_id = str(uuid.uuid4())
        tx._create_schema(log_id)
        if first_events is not None:
            self._genesis = CURRENT.chain.genesis(log_id)
            tx.append_many(first_events(log_id))

    def _remnants(self) -> tuple[str, ...]:
        """The factledger tables the file holds (`fl_` names), sorted."""
        rows = self._with_retry(
            lambda: self._conn.execute(_SQL_FACTLEDGER_TABLES).fetchall(), "read the schema of"
        )
        return tuple(str(row[0]) for row in rows)

    # -- properties ----------------------------------------------------------------------

    @property
    def log_id(self) -> str:
        """The id this log was created with; the chain's genesis is derived from it."""
        return self._log_id

    @property
    def log_format(self) -> LogFormat:
        """The format the log is stored in (`eventlog.formats`)."""
        return self._format

    @property
    def durability(self) -> Durability:
        """`full` (synchronous=FULL) or `fast` (synchronous=NORMAL)."""
        return self._durability

    @property
    def read_only(self) -> bool:
        """Whether this handle refuses every write."""
        return self._read_only

    @property
    def bound_adapter(self) -> str | None:
        """None: a file binds no adapter (whoever may write it writes as any)."""
        return None

    @property
    def path(self) -> str:
        """The database path, or `:memory:`."""
        return self._path

    @property
    def genesis(self) -> bytes:
        """The chain value before the first event."""
        return self._genesis

    @property
    def connection(self) -> sqlite3.Connection:
        """The connection a read model kept in this same file uses, so that its rows commit
        in this log's transactions. Use it only inside `transaction()` or `snapshot()`,
        which hold this handle's lock; never commit or roll back through it."""
        return self._conn

    # -- transactions --------------------------------------------------------------------

    def _with_retry(self, work: Callable[[], T], action: str) -> T:
        deadline = time.monotonic() + self._busy_timeout_s
        delay = 0.0005
        while True:
            try:
                return work()
            except sqlite3.Error as exc:
                if not _is_busy(exc) or time.monotonic() >= deadline:
                    if _is_busy(exc):
                        log.warning("log_busy_budget_spent", action=action, path=self._path)
                        raise LogBusyError(
                            f"cannot {action} {self._where}: other writers held it for more "
                            f"than {self._busy_timeout_s:g}s"
                        ) from None
                    raise translate(exc, action, self._where) from None
            time.sleep(delay * random.uniform(0.5, 1.5))
            delay = min(delay * 2, 0.05)

    def transaction(self) -> AbstractContextManager[_Transaction]:
        """A write transaction: everything done through it commits together, or nothing does."""
        return _WriteScope(self)

    def _begin(self, statement: str, action: str) -> None:
        """Start a transaction, retrying while other writers hold the lock."""
        try:
            self._conn.execute(statement)
        except sqlite3.Error as exc:
            if not _is_busy(exc):
                raise translate(exc, action, self._where) from None
            self._with_retry(lambda: self._conn.execute(statement), action)

    def _rollback(self) -> None:
        if self._conn.in_transaction:
            try:
                self._conn.execute("ROLLBACK")
            except sqlite3.Error:
                log.warning("rollback_failed", path=self._path)

    def snapshot(self) -> AbstractContextManager[_Snapshot]:
        """A consistent read of the log and the tables beside it."""
        return _ReadScope(self)

    # -- convenience ---------------------------------------------------------------------

    def append(self, event: NewEvent) -> RecordedEvent:
        """Append one event in its own transaction and return it as recorded."""
        with self.transaction() as tx:
            return tx.append(event)

    def append_many(self, events: Sequence[NewEvent]) -> list[RecordedEvent]:
        """Append events in one transaction: all of them or none."""
        with self.transaction() as tx:
            return tx.append_many(events)

    def head(self) -> Head:
        """The last position and its chain value."""
        with self.snapshot() as snap:
            return snap.head()

    def read(
        self, *, after: int = 0, until: int | None = None, limit: int | None = None
    ) -> Iterator[RecordedEvent]:
        """Events after `after` up to `until` (default: the head when the read began), at most
        `limit`, in position order (`LogSnapshot.read`).

        Reads in chunks, holding the handle only while a chunk is fetched: memory stays constant
        and writers are not blocked for the length of the read.
        """
        span = window(after, until, limit)
        last = span.until if span.until is not None else self.head().position
        return decoded_events(self._fetch, self._reading, span.after, last, span.limit)

    def event_at(self, position: int) -> RecordedEvent:
        """The event at `position`, in one lookup (`LogSnapshot.event_at`)."""
        return lookup_event(self._fetch, self._reading, position)

    def scan(
        self, *, after: int = 0, until: int | None = None, limit: int | None = None
    ) -> Iterator[StoredRow]:
        """Stored rows in the window `read` takes, chunk by chunk as it does."""
        span = window(after, until, limit)
        last = span.until if span.until is not None else self.head().position
        return stored_rows(self._fetch, span.after, last, span.limit)

    def _fetch(self, after: int, last: int, count: int) -> list[StoredRow]:
        """One chunk of rows (`eventlog.rows.Fetch`), holding the handle only while it runs."""
        with self._lock:
            return self._with_retry(lambda: self._rows(self._conn, after, last, count), "read")

    def _rows(self, conn: sqlite3.Connection, after: int, last: int, count: int) -> list[StoredRow]:
        oversize_leaf = functools.partial(self._oversize_leaf, conn)
        try:
            shaped = conn.execute(self._queries.scan, (after, last, count)).fetchall()
        except sqlite3.OperationalError:  # an id edited into bytes that are not UTF-8
            rows = conn.execute(self._queries.scan_bytes, (after, last, count)).fetchall()
            return [stored_row(row, oversize_leaf) for row in rows]
        new = tuple.__new__
        return [
            new(StoredRow, row) if row[2] is not None else stored_row(row[:6], oversize_leaf)
            for row in shaped
        ]

    def _oversize_leaf(self, conn: sqlite3.Connection, position: int) -> bytes:
        """The leaf hash of a body over the read limit, streamed a chunk at a time."""
        hasher = self._format.chain.new()
        hasher.update(b"\x00")
        with conn.blobopen("fl_events", "body", position, readonly=True) as blob:
            while chunk := blob.read(OVERSIZE_CHUNK):
                hasher.update(chunk)
        return hasher.digest()

    def fold_wal(self) -> bool:
        """Copy the write-ahead log back into the database file and truncate it, so that
        bytes an erasure overwrote are in no WAL frame; False when a reader still holds
        frames (the next checkpoint, or the last connection closing, finishes it)."""
        with self._lock:
            row = self._with_retry(
                lambda: self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone(),
                "checkpoint",
            )
        return row is not None and not row[0]

    def close(self) -> None:
        """Close the connection. The handle must not be used afterwards."""
        with self._lock:
            self._conn.close()


class _WriteScope:
    """One write transaction on a log handle: the handle's lock and SQLite's write lock are
    held throughout; a clean exit commits, and any exception rolls everything back."""

    __slots__ = ("_owner",)

    def __init__(self, owner: SQLiteEventLog) -> None:
        self._owner = owner

    def __enter__(self) -> _Transaction:
        owner = self._owner
        if owner._read_only:
            raise StorageError(f"cannot write: {owner._where} was opened read-only")
        owner._lock.acquire()
        try:
            if owner._in_transaction:
                raise FactledgerError("a transaction is already open on this log handle")
            owner._begin("BEGIN IMMEDIATE", "lock")
        except BaseException:
            owner._lock.release()
            raise
        owner._in_transaction = True
        return _Transaction(owner, owner._conn)

    def __exit__(self, kind: object, error: object, trace: object) -> None:
        owner = self._owner
        try:
            if kind is not None:
                owner._rollback()
                return
            try:
                owner._conn.execute("COMMIT")
            except BaseException as exc:
                owner._rollback()
                if isinstance(exc, sqlite3.Error):
                    raise translate(exc, "commit to", owner._where) from None
                raise
        finally:
            owner._in_transaction = False
            owner._lock.release()


class _ReadScope:
    """One consistent read on a log handle (inside its write transaction, if one is open)."""

    __slots__ = ("_began", "_owner")

    def __init__(self, owner: SQLiteEventLog) -> None:
        self._owner = owner
        self._began = False

    def __enter__(self) -> _Snapshot:
        owner = self._owner
        owner._lock.acquire()
        try:
            if not owner._in_transaction:
                owner._begin("BEGIN", "read")
                self._began = True
        except BaseException:
            owner._lock.release()
            raise
        return _Snapshot(owner, owner._conn)

    def __exit__(self, kind: object, error: object, trace: object) -> None:
        owner = self._owner
        try:
            if self._began and owner._conn.in_transaction:
                try:
                    owner._conn.execute("COMMIT")
                except sqlite3.Error as exc:
                    owner._rollback()
                    if kind is None:
                        raise translate(exc, "end a read of", owner._where) from None
        finally:
            owner._lock.release()


class _Snapshot:
    """Reads through one connection inside an open read (or write) transaction."""

    def __init__(self, owner: SQLiteEventLog, conn: sqlite3.Connection) -> None:
        self._owner = owner
        self._conn = conn

    def head(self) -> Head:
        position, chain_value = self._head_raw()
        return Head(position=position, chain_hash=chain_value.hex())

    def _head_raw(self) -> tuple[int, bytes]:
        row = self._run(lambda: self._conn.execute(_SQL_HEAD).fetchone(), "read the head of")
        if row is None:
            return 0, self._owner.genesis
        return int(row[0]), bytes(row[1])

    def read(
        self, *, after: int = 0, until: int | None = None, limit: int | None = None
    ) -> Iterator[RecordedEvent]:
        span = window(after, until, limit)
        last = span.until if span.until is not None else self._head_raw()[0]
        return decoded_events(self._fetch, self._owner._reading, span.after, last, span.limit)

    def event_at(self, position: int) -> RecordedEvent:
        return lookup_event(self._fetch, self._owner._reading, position)

    def _fetch(self, after: int, last: int, count: int) -> list[StoredRow]:
        return self._run(lambda: self._owner._rows(self._conn, after, last, count), "read")

    def _run(self, work: Callable[[], T], action: str) -> T:
        try:
            return work()
        except sqlite3.Error as exc:
            raise translate(exc, action, self._owner._where) from None


class _Transaction(_Snapshot):
    """A write transaction holding SQLite's write lock, so its head only moves by its appends."""

    def __init__(self, owner: SQLiteEventLog, conn: sqlite3.Connection) -> None:
        super().__init__(owner, conn)
        self._head: tuple[int, bytes] | None = None
        self._links: list[Link] = []

    def _head_raw(self) -> tuple[int, bytes]:
        if self._head is None:
            self._head = super()._head_raw()
        return self._head

    def _create_schema(self, log_id: str) -> None:
        def create() -> None:
            for statement in _SCHEMA:
                self._conn.execute(statement)
            self._conn.execute(_SQL_META_INSERT, ("log_id", log_id))
            self._conn.execute(_SQL_META_INSERT, ("format", marker(FORMAT_PREFIX)))

        self._run(create, "create the log in")

    def append(self, event: NewEvent) -> RecordedEvent:
        return self.append_many([event])[0]

    def append_many(self, events: Sequence[NewEvent]) -> list[RecordedEvent]:
        owner = self._owner
        owner.log_format.check_writable(owner._where)
        prepared = [
            prepare(event, clock_ns=owner._clock_ns, max_content_bytes=owner._max_content_bytes)
            for event in events
        ]
        check_distinct_ids(prepared)
        position, previous = self._head_raw()
        rows: list[tuple[int, str, bytes, bytes]] = []
        contents: list[tuple[int, bytes, bytes]] = []
        links: list[Link] = []
        records: list[RecordedEvent] = []
        for item in prepared:
            existing = self._existing(item) if item.caller_event_id else None
            if existing is not None:
                records.append(existing)
                continue
            position += 1
            sealed = seal(item, position, previous)
            links.append(Link(position, previous, sealed.leaf, sealed.chain_hash))
            previous = sealed.chain_hash
            rows.append((position, item.event_id, sealed.body, previous))
            contents.append((position, sealed.text, sealed.salt))
            records.append(sealed.record)
        if rows:

            def insert() -> None:
                self._refuse_stray_content(rows[0][0])
                self._conn.executemany(_SQL_INSERT, rows)
                self._conn.executemany(_SQL_INSERT_CONTENT, contents)

            self._run(insert, "append to")
            self._links += links
        self._head = (position, previous)
        return [self._as_read(record) for record in records]

    def take_links(self) -> list[Link]:
        """How each row appended since the last call links into the chain, in order."""
        links, self._links = self._links, []
        return links

    def erase_texts(self, erasure_position: int, positions: Sequence[int]) -> int:
        """Remove the texts and salts stored for `positions`, which the erasure at
        `erasure_position` names (the caller has checked that it took effect); return how
        many were still stored. The freed pages are overwritten (`secure_delete`); call
        `fold_wal` after the commit to take them out of the write-ahead log too."""
        marked = [(p, erasure_position) for p in positions if p < erasure_position]

        def erase() -> int:
            self._conn.executemany(_SQL_ERASED_INSERT, marked)
            return self._conn.executemany(_SQL_CONTENT_DELETE, [(p,) for p, _ in marked]).rowcount

        return self._run(erase, "erase texts in") if marked else 0

    def _as_read(self, record: RecordedEvent) -> RecordedEvent:
        """An appended event as readers take it (its migration claims honoured or not)."""
        if record.payload.migrated is UNSET:
            return record
        return self._owner._reading.honour(record, self._fetch)

    def _refuse_stray_content(self, first: int) -> None:
        """Refuse to write at `first` when a text is already stored there or later."""
        (stray,) = self._conn.execute(_SQL_STRAY_CONTENT, (first,)).fetchone()
        if stray is not None:
            raise StrayContentError(
                f"cannot append to {self._owner._where}: the file holds a text for position "
                f"{stray}, past the log's head {first - 1} (a copied, rewound or edited file); "
                "nothing was written",
                position=stray,
            )

    def _existing(self, item: Prepared) -> RecordedEvent | None:
        """The recorded event a retry refers to, or None; a different event is a conflict."""
        owner = self._owner
        row = self._run(
            lambda: self._conn.execute(owner._queries.by_event_id, (item.event_id,)).fetchone(),
            "read",
        )
        if row is None:
            return None
        record = read_row(
            stored_row(row, lambda p: owner._oversize_leaf(self._conn, p)), owner.log_format
        )
        if isinstance(record.payload, Unreadable) or not same_event(record, item.event):
            raise EventIdConflictError(
                f"event_id {item.event_id!r} is already used by a different event "
                f"at position {record.position}"
            )
        return record
