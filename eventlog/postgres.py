"""The PostgreSQL log backend: one log shared by many hosts, positions in commit order.

An append takes a row lock on the one-row head table (`SELECT … FOR UPDATE`, which a writer
role may do without the table-wide privileges `LOCK TABLE` needs), reads the head and looks
up caller-given event ids in separate statements after taking it (under READ COMMITTED a
statement sees the rows committed before it started), then inserts and commits: two round
trips (a query of several statements, then a pipeline). Whoever holds the lock commits
before the next writer is given a position, so positions are dense and in commit order, and a
reader tailing `read(after=p)` never skips one.

A lost connection is regained for up to `busy_timeout_s`. An append whose commit was in flight
is resolved by its event ids after reconnecting (every id is indexed, generated or not), so it
is committed exactly once. Rows go through the log's `append_events` function, which checks
each, computes its chain link with SHA-256 and refuses edits, gaps and an agent role's events
naming another adapter (`eventlog.postgres_schema`); the client compares the links it gets
back with its own. Needs psycopg 3 (`pip install 'factledger[postgres]'`).
"""

from __future__ import annotations

import contextlib
import functools
import hmac
import itertools
import random
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any, NamedTuple, TypeVar

import psycopg
from msgspec import UNSET
from psycopg.conninfo import conninfo_to_dict
from psycopg.pq import TransactionStatus

from eventlog import postgres_schema as schema
from eventlog.backend import Durability, Head, Row, StoredRow
from eventlog.checks import MAX_CONTENT_BYTES
from eventlog.codec import read_row
from eventlog.drafts import Prepared, Sealed, check_distinct_ids, prepare, same_event, seal
from eventlog.errors import (
    CorruptLogError,
    EventIdConflictError,
    EventNotFoundError,
    FactledgerError,
    InvalidInputError,
    InvalidTypeError,
    LegacyFormatError,
    LogBusyError,
    PermissionDeniedError,
    StorageError,
)
from eventlog.events import NewEvent, RecordedEvent, Unreadable
from eventlog.formats import CURRENT, MAX_TEXT_BYTES, LogFormat, format_named
from eventlog.logs import get_logger
from eventlog.migration import Migration, Reading
from eventlog.rows import decoded_events, lookup_event, stored_row, stored_rows, window

log = get_logger("factledger.eventlog")
T = TypeVar("T")
Connection = psycopg.Connection[Any]

CONNECT_TIMEOUT_S = 10
OVERSIZE_CHUNK = 1024 * 1024
"""Bytes read at a time while hashing a body over the read limit."""

_SQL_SESSION = (
    "SELECT set_config('lock_timeout', %s, false),"
    " set_config('idle_in_transaction_session_timeout', %s, false),"
    " set_config('synchronous_commit', CASE WHEN %s THEN 'off'"
    " WHEN current_setting('synchronous_commit') = 'off' THEN 'on'"
    " ELSE current_setting('synchronous_commit') END, false),"
    " set_config('default_transaction_read_only', %s, false),"
    " coalesce(nullif(current_setting('factledger.schema', true), ''), %s)"
)
SQL_SCHEMA = "SELECT coalesce(nullif(current_setting('factledger.schema', true), ''), %s)"
_SQL_BEGIN = "BEGIN ISOLATION LEVEL READ COMMITTED"
_SQL_COMMIT = "COMMIT"
_SQL_ROLLBACK = "ROLLBACK"


_ROWS = (
    "SELECT e.position, e.event_id,"
    " CASE WHEN octet_length(e.body) <= {body_limit} THEN e.body END,"
    " e.chain_hash, {text}, {salt} FROM {{schema}}.events e {join}"
)
_CONTENT = {
    "text": "CASE WHEN octet_length(c.text) <= {text_limit} THEN c.text END",
    "salt": "c.salt",
    "join": "LEFT JOIN {{schema}}.content c ON c.position = e.position",
}
_NO_CONTENT = {"text": "NULL::bytea", "salt": "NULL::bytea", "join": ""}


def _rows_query(log_format: LogFormat, where: str) -> str:
    """The statement reading rows as `eventlog.rows.stored_row` takes them (v2 joins the
    content table), with a body or text over the read limit left out."""
    parts = _CONTENT if log_format.text_beside else _NO_CONTENT
    select = _ROWS.format(
        body_limit=log_format.max_body_bytes,
        **{name: part.format(text_limit=MAX_TEXT_BYTES) for name, part in parts.items()},
    )
    return select + where


class Statements(NamedTuple):
    """The log's statements, rendered for one schema (and the format of its log)."""

    lock: str = "SELECT head_position, head_chain_hash FROM {schema}.lock_head()"
    head: str = "SELECT position, chain_hash FROM {schema}.head"
    by_event_ids: str = _rows_query(CURRENT, " WHERE e.event_id = ANY(%s)")
    count_event_ids: str = "SELECT count(*) FROM {schema}.events WHERE event_id = ANY(%s)"
    append: str = "SELECT {schema}.append_events(%b::text[], %b::bytea[], %b::bytea[], %b::bytea[])"
    read: str = _rows_query(
        CURRENT, " WHERE e.position > %s AND e.position <= %s ORDER BY e.position LIMIT %s"
    )
    body_chunk: str = (
        "SELECT substring(body FROM %s FOR %s) FROM {schema}.events WHERE position = %s"
    )
    meta: str = "SELECT value FROM {schema}.meta WHERE name = %s"
    binding: str = "SELECT adapter FROM {schema}.agents WHERE role = session_user"
    lock_holder: str = (
        "SELECT l.pid, a.state, extract(epoch FROM clock_timestamp() - a.state_change)::float8"
        " FROM {schema}.head h"
        " JOIN pg_catalog.pg_locks l ON l.locktype = 'transactionid'"
        " AND l.transactionid = h.xmax AND l.granted"
        " LEFT JOIN pg_catalog.pg_stat_activity a ON a.pid = l.pid"
        " WHERE l.pid <> pg_backend_pid()"
    )

    @classmethod
    def for_schema(cls, name: str, log_format: LogFormat = CURRENT) -> Statements:
        templates = cls()
        if log_format is not CURRENT:
            templates = templates._replace(
                by_event_ids=_rows_query(log_format, " WHERE e.event_id = ANY(%s)"),
                read=_rows_query(
                    log_format,
                    " WHERE e.position > %s AND e.position <= %s ORDER BY e.position LIMIT %s",
                ),
            )
        return cls(*(schema.render(template, name) for template in templates))


_BUSY_STATES = frozenset({"55P03", "40P01", "40001"})
"""lock_not_available (lock_timeout), deadlock_detected, serialization_failure."""
_LOST_STATES = frozenset({"57P01", "57P02", "57P03", "25P03"})
"""The server ended the session: admin or crash shutdown, starting up, idle-in-transaction."""
_PROBLEMS = {
    "25006": "{where} was opened read-only",
    "25P03": "the server ended this session of {where}: it was idle inside a transaction for "
    "longer than idle_in_transaction_session_timeout",
    "3D000": "{where}: no such database",
    "42883": "{where} was made by an earlier version: run `factledger pg init` on it",
    "53100": "no space left for {where}",
    "57014": "{where} canceled the statement",
    "57P01": "the server of {where} is shutting down",
    "57P02": "the server of {where} is shutting down",
    "57P03": "the server of {where} is not accepting connections yet",
}
"""What a SQLSTATE says about the database, for the messages of `translate`."""


def translate(exc: psycopg.Error, action: str, where: str) -> FactledgerError:
    """Turn a psycopg error into a factledger error, by SQLSTATE, never by message text.

    Lock timeouts, deadlocks and serialization failures are `LogBusyError`; a missing
    privilege, a refusal by the log's triggers and failed authentication are
    `PermissionDeniedError`; everything else is a `StorageError` keeping the server's message.
    Only the server's primary message is kept: never its CONTEXT (the trigger's source
    lines), DETAIL or HINT.
    """
    state = exc.sqlstate or ""
    text = (exc.diag.message_primary or str(exc)).strip()
    if state in _BUSY_STATES:
        return LogBusyError(f"cannot {action} {where}: other writers held it too long ({text})")
    if state == "42501" or state.startswith("28"):
        return PermissionDeniedError(f"cannot {action} {where}: {exc.diag.message_primary or text}")
    refusal = f"cannot {action} {where}: {exc.diag.message_primary}; nothing was written"
    if state == schema.REFUSED_EVENT:
        return InvalidInputError(refusal)
    if state == schema.LEGACY_FORMAT:
        return LegacyFormatError(refusal)
    problem = _PROBLEMS.get(state)
    if problem is not None:
        return StorageError(f"cannot {action}: {problem.format(where=where)} ({text})")
    return StorageError(f"cannot {action} ({where}): {text}")


def lost(exc: psycopg.Error, conn: Connection | None) -> bool:
    """Whether `exc` means the connection is gone (the work may be done again on a new one)."""
    state = exc.sqlstate or ""
    return (
        conn is None
        or conn.closed
        or conn.broken
        or state.startswith("08")
        or state in _LOST_STATES
    )


_BUSY_SERVER = (
    "the database system is starting up",
    "the database system is shutting down",
    "the database system is in recovery mode",
    "too many clients",
    "remaining connection slots are reserved",
)
"""What a server says (in English) when it refuses a connection only for now."""


def _may_connect_later(exc: psycopg.Error) -> bool:
    """Whether a failed connection attempt is worth repeating (the server is away or busy).

    libpq gives no SQLSTATE for a refusal at connect, only the server's message after
    `FATAL:`; a refusal that is not a busy server's (a role no longer allowed to log in, a
    wrong password) is final, where retrying it held the caller for `busy_timeout_s`."""
    state = exc.sqlstate
    if state:
        return state.startswith("08") or state in {"57P01", "57P02", "57P03", "53300"}
    message = str(exc)
    return "FATAL:" not in message or any(busy in message for busy in _BUSY_SERVER)


class PostgresEventLog:
    """An event log in a PostgreSQL schema, shared by every process and host that reaches it.

    One connection per handle, used by one thread at a time. `busy_timeout_s` bounds both the
    wait for the head lock (PostgreSQL's `lock_timeout`) and the time spent regaining a lost
    connection; a session idle inside a transaction for `idle_timeout_s` is ended by the
    server (`idle_in_transaction_session_timeout`), releasing the lock it held. The schema is
    `factledger` unless the DSN sets another (`?options=-c%20factledger.schema%3Dname`).
    """

    def __init__(
        self,
        dsn: str,
        *,
        durability: Durability = "full",
        read_only: bool = False,
        clock_ns: Callable[[], int] = time.time_ns,
        busy_timeout_s: float = 30.0,
        idle_timeout_s: float = 20.0,
        max_content_bytes: int = MAX_CONTENT_BYTES,
    ) -> None:
        if durability not in ("full", "fast"):
            raise InvalidInputError(f"durability must be 'full' or 'fast', got {durability!r}")
        if not isinstance(dsn, str):
            raise InvalidTypeError(f"dsn must be str, not {type(dsn).__name__}")
        try:
            params = conninfo_to_dict(dsn)
        except psycopg.Error:
            raise InvalidInputError("dsn is not a valid PostgreSQL connection string") from None
        self._dsn = dsn
        self._options: dict[str, Any] = {
            key: value
            for key, value in (
                ("connect_timeout", CONNECT_TIMEOUT_S),
                ("application_name", "factledger"),
            )
            if key not in params
        }
        self._durability: Durability = durability
        self._read_only = read_only
        self._clock_ns = clock_ns
        self._busy_timeout_s = busy_timeout_s
        self._idle_timeout_s = idle_timeout_s
        self._max_content_bytes = max_content_bytes
        self._where = f"PostgreSQL database {params.get('dbname') or params.get('user') or ''}"
        self._schema = ""
        self._sql = Statements()
        self._format = CURRENT
        self._lock = threading.RLock()
        self._tx: _Transaction | None = None
        self._conn: Connection | None = self._first_connection()
        try:
            self._log_id = self._ensure_schema()
            self._bound_adapter = self._binding()
        except BaseException:
            self.close()
            raise
        self._genesis = self._format.chain.genesis(self._log_id)
        self._reading = Reading(self._format, Migration(self._log_id))

    # -- connections ---------------------------------------------------------------------

    def _connect(self) -> Connection:
        """A new session, configured: timeouts, durability, read-only, and the schema."""
        conn = psycopg.connect(self._dsn, autocommit=True, **self._options)
        try:
            row = conn.execute(
                _SQL_SESSION,
                (
                    f"{max(1, round(self._busy_timeout_s * 1000))}ms",
                    f"{max(1, round(self._idle_timeout_s * 1000))}ms",
                    self._durability == "fast",
                    "on" if self._read_only else "off",
                    schema.DEFAULT_SCHEMA,
                ),
            ).fetchone()
            name = schema.check_name("schema", row[-1] if row else None)
        except BaseException:
            conn.close()
            raise
        if not self._schema:
            self._schema = name
            self._sql = Statements.for_schema(name, self._format)
            info = conn.info
            self._where = f"PostgreSQL log {name} in database {info.dbname} at {info.host}"
        elif name != self._schema:
            conn.close()
            raise StorageError(f"{self._where}: the schema changed to {name} on reconnecting")
        return conn

    def _first_connection(self) -> Connection:
        """Connect at open: waits only while the server says it is starting up."""
        deadline = time.monotonic() + self._busy_timeout_s
        while True:
            try:
                return self._connect()
            except psycopg.Error as exc:
                if exc.sqlstate != "57P03" or time.monotonic() >= deadline:
                    raise translate(exc, "open", self._where) from None
            time.sleep(0.1)

    def _live(self) -> Connection:
        """This handle's connection, regained (for up to `busy_timeout_s`) if it was lost."""
        conn = self._conn
        if conn is not None and not conn.closed and not conn.broken:
            return conn
        self._discard()
        deadline = time.monotonic() + self._busy_timeout_s
        delay = 0.05
        while True:
            try:
                self._conn = self._connect()
            except psycopg.Error as exc:
                if not _may_connect_later(exc) or time.monotonic() >= deadline:
                    raise translate(exc, "reconnect to", self._where) from None
                time.sleep(delay * random.uniform(0.5, 1.5))
                delay = min(delay * 2, 1.0)
                continue
            log.info("log_reconnected", where=self._where)
            return self._conn

    def _discard(self) -> None:
        """Forget a connection that failed; the next use opens a new one."""
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    def _run(self, work: Callable[[Connection, int], T], action: str, *, unsettled: str = "") -> T:
        """Run `work(connection, attempt)`, again on a new connection when one is lost, for
        up to `busy_timeout_s`. `work` must be safe to repeat; `unsettled` says what a caller
        must know when it cannot be (an append that may have committed)."""
        deadline = time.monotonic() + self._busy_timeout_s
        for attempt in itertools.count():
            try:
                conn = self._live()
            except FactledgerError as exc:
                if attempt == 0:
                    raise
                raise StorageError(f"cannot {action} {self._where}: {exc}{unsettled}") from None
            try:
                return work(conn, attempt)
            except psycopg.Error as exc:
                if not lost(exc, conn):
                    raise translate(exc, action, self._where) from None
                if time.monotonic() >= deadline:
                    raise StorageError(
                        f"cannot {action} {self._where}: the connection was lost for more than "
                        f"{self._busy_timeout_s:g}s ({exc}){unsettled}"
                    ) from None
                log.warning("log_connection_lost", action=action, where=self._where)
                self._discard()
        raise AssertionError("unreachable")

    def _ensure_schema(self) -> str:
        conn = self._live()
        try:
            if not schema.has_log(conn, self._schema):
                if self._read_only:
                    raise StorageError(f"{self._where} holds no factledger log")
                log_id = str(uuid.uuid4())
                with conn.transaction():
                    schema.create(conn, self._schema, log_id, CURRENT.chain.genesis(log_id))
            meta = {
                name: row[0] if row else None
                for name in ("log_id", "format")
                for row in [conn.execute(self._sql.meta, (name,)).fetchone()]
            }
        except psycopg.Error as exc:
            raise translate(exc, "open", self._where) from None
        self._format = format_named(schema.FORMAT_PREFIX, meta["format"], self._where)
        self._sql = Statements.for_schema(self._schema, self._format)
        if meta["log_id"] is None:
            raise StorageError(f"{self._where} holds a log with no log id")
        return str(meta["log_id"])

    def _binding(self) -> str | None:
        """The adapter this session's role is bound to (`pg add-agent`), if any: bindings are
        never changed, so it is read once."""
        try:
            row = self._live().execute(self._sql.binding).fetchone()
        except psycopg.Error as exc:
            raise translate(exc, "open", self._where) from None
        return None if row is None else str(row[0])

    # -- properties ----------------------------------------------------------------------

    @property
    def bound_adapter(self) -> str | None:
        """The adapter the database lets this handle's role write as, or None when it binds
        the role to none: every event this handle appends must name it."""
        return self._bound_adapter

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
        """`full` (a commit is flushed before it is acknowledged) or `fast`
        (`synchronous_commit=off`: a server crash may lose the last acknowledged commits)."""
        return self._durability

    @property
    def read_only(self) -> bool:
        """Whether this handle refuses every write (and its sessions are read-only)."""
        return self._read_only

    @property
    def schema(self) -> str:
        """The PostgreSQL schema holding the log."""
        return self._schema

    @property
    def content_table(self) -> str:
        """The table holding the log's texts, qualified by its schema: an erasure deletes
        their rows, and `VACUUM FULL` on it rewrites the pages the dead rows still hold."""
        return schema.render(schema.CONTENT_TABLE, self._schema)

    def require_erasure(self) -> None:
        """Refuse (`StorageError`) a log whose schema predates erasure: its server would
        store an erasure and keep the texts it names. `pg init` gives it what it needs."""
        with self._lock:
            ready = self._run(lambda conn, _: schema.has_erasure(conn, self._schema), "read")
        if not ready:
            raise StorageError(
                f"{self._where} predates erasure: its server would keep the texts an erasure "
                "names; run `factledger pg init` on it (as its administrator) first; nothing "
                "was written"
            )

    @property
    def genesis(self) -> bytes:
        """The chain value before the first event."""
        return self._genesis

    # -- transactions --------------------------------------------------------------------

    def transaction(self) -> AbstractContextManager[_Transaction]:
        """A write transaction: its appends commit together, or none does. If the connection
        is lost while it commits, the outcome is settled by event id after reconnecting."""
        return _WriteScope(self)

    def snapshot(self) -> AbstractContextManager[_Snapshot | _Transaction]:
        """A consistent read: the head when first asked, and the rows up to it."""
        return _ReadScope(self)

    def _prepare(self, events: Sequence[NewEvent]) -> list[Prepared]:
        if self._read_only:
            raise StorageError(f"cannot write: {self._where} was opened read-only")
        self._format.check_writable(self._where)
        prepared = [
            prepare(event, clock_ns=self._clock_ns, max_content_bytes=self._max_content_bytes)
            for event in events
        ]
        check_distinct_ids(prepared)
        return prepared

    def _busy(self, conn: Connection) -> LogBusyError:
        """The error for a head lock not taken within `lock_timeout`, naming who holds it."""
        holder = ""
        try:
            row = conn.execute(self._sql.lock_holder).fetchone()
        except psycopg.Error:
            row = None
        if row is not None:
            pid, state, seconds = row
            holder = f" (server process {pid}"
            holder += f", {state} for {seconds:.1f}s)" if state else ")"
        log.warning("log_busy", where=self._where, holder=row[0] if row else None)
        return LogBusyError(
            f"cannot append to {self._where}: another writer held the log's head lock for "
            f"more than {self._busy_timeout_s:g}s (lock_timeout){holder}; the server ends a "
            "session idle inside its transaction after its idle_in_transaction_session_timeout"
        )

    # -- convenience ---------------------------------------------------------------------

    def append(self, event: NewEvent) -> RecordedEvent:
        """Append one event in its own transaction and return it as recorded."""
        return self.append_many([event])[0]

    def append_many(self, events: Sequence[NewEvent]) -> list[RecordedEvent]:
        """Append events in one transaction: all of them or none, committed exactly once
        even when the connection is lost while it commits."""
        prepared = self._prepare(events)
        with self._lock:
            if self._tx is not None:
                raise FactledgerError("a transaction is already open on this log handle")

            def write(conn: Connection, attempt: int) -> list[RecordedEvent]:
                tx = _Transaction(self, conn)
                try:
                    records = tx.append_prepared(prepared, resolving=attempt > 0)
                    tx.commit()
                except BaseException:
                    tx.abandon()
                    raise
                return records

            return self._run(
                write,
                "append to",
                unsettled="; the append may have committed: look its events up by event_id",
            )

    def head(self) -> Head:
        """The last position and its chain value."""
        with self._lock:
            if self._tx is not None:
                return self._tx.head()
            position, chain_value = self._run(self._read_head, "read the head of")
        return Head(position=position, chain_hash=chain_value.hex())

    def _read_head(self, conn: Connection, attempt: int = 0) -> tuple[int, bytes]:
        row = conn.execute(self._sql.head).fetchone()
        if row is None:
            raise StorageError(f"{self._where} has lost its head row")
        return int(row[0]), bytes(row[1])

    def read(
        self, *, after: int = 0, until: int | None = None, limit: int | None = None
    ) -> Iterator[RecordedEvent]:
        """Events after `after` up to `until` (default: the head when the read began), at most
        `limit`, in position order (`LogSnapshot.read`), a chunk at a time, holding the
        handle only while a chunk is fetched."""
        span = window(after, until, limit)
        last = span.until if span.until is not None else self.head().position
        return decoded_events(self._fetch, self._reading, span.after, last, span.limit)

    def event_at(self, position: int) -> RecordedEvent:
        """The event at `position`, in one round trip (`LogSnapshot.event_at`)."""
        return lookup_event(self._fetch, self._reading, position)

    def scan(
        self, *, after: int = 0, until: int | None = None, limit: int | None = None
    ) -> Iterator[StoredRow]:
        """Stored rows in the window `read` takes, chunk by chunk as it does."""
        span = window(after, until, limit)
        last = span.until if span.until is not None else self.head().position
        return stored_rows(self._fetch, span.after, last, span.limit)

    def _fetch(self, after: int, last: int, count: int) -> list[StoredRow]:
        """One chunk of rows (`eventlog.rows.Fetch`), through the open transaction if any."""
        with self._lock:
            tx = self._tx
            if tx is not None:
                return tx.guard(lambda: tx.fetch(after, last, count), "read")
            return self._run(lambda conn, _: self._rows(conn, after, last, count), "read")

    def _rows(self, conn: Connection, after: int, last: int, count: int) -> list[StoredRow]:
        rows = conn.execute(self._sql.read, (after, last, count)).fetchall()
        oversize_leaf = functools.partial(self._oversize_leaf, conn)
        return [stored_row(row, oversize_leaf) for row in rows]

    def _oversize_leaf(self, conn: Connection, position: int) -> bytes:
        """The leaf hash of a body over the read limit, read a chunk at a time."""
        hasher = self._format.chain.new()
        hasher.update(b"\x00")
        start = 1
        while True:
            row = conn.execute(self._sql.body_chunk, (start, OVERSIZE_CHUNK, position)).fetchone()
            chunk = bytes(row[0]) if row and row[0] is not None else b""
            hasher.update(chunk)
            if len(chunk) < OVERSIZE_CHUNK:
                return hasher.digest()
            start += OVERSIZE_CHUNK

    def close(self) -> None:
        """Close the connection. The handle must not be used afterwards."""
        with self._lock:
            self._discard()


class _WriteScope:
    """One write transaction on a log handle, holding the handle's lock throughout."""

    __slots__ = ("_owner", "_tx")

    def __init__(self, owner: PostgresEventLog) -> None:
        self._owner = owner
        self._tx: _Transaction | None = None

    def __enter__(self) -> _Transaction:
        owner = self._owner
        if owner._read_only:
            raise StorageError(f"cannot write: {owner._where} was opened read-only")
        owner.log_format.check_writable(owner._where)
        owner._lock.acquire()
        try:
            if owner._tx is not None:
                raise FactledgerError("a transaction is already open on this log handle")
            self._tx = owner._tx = _Transaction(owner, owner._live())
        except BaseException:
            owner._lock.release()
            raise
        return self._tx

    def __exit__(self, kind: object, error: object, trace: object) -> None:
        owner, tx = self._owner, self._tx
        assert tx is not None
        try:
            if kind is not None:
                tx.abandon()
            else:
                tx.commit_or_settle()
        finally:
            owner._tx = None
            owner._lock.release()


class _ReadScope:
    """One consistent read (inside the handle's write transaction, if one is open)."""

    __slots__ = ("_owner",)

    def __init__(self, owner: PostgresEventLog) -> None:
        self._owner = owner

    def __enter__(self) -> _Snapshot | _Transaction:
        owner = self._owner
        owner._lock.acquire()
        return owner._tx if owner._tx is not None else _Snapshot(owner)

    def __exit__(self, kind: object, error: object, trace: object) -> None:
        self._owner._lock.release()


class _Snapshot:
    """The log as of one head: positions up to it never change, so reads need no transaction
    and survive a reconnect."""

    def __init__(self, owner: PostgresEventLog) -> None:
        self._owner = owner
        self._head: Head | None = None

    def head(self) -> Head:
        if self._head is None:
            self._head = self._owner.head()
        return self._head

    def read(
        self, *, after: int = 0, until: int | None = None, limit: int | None = None
    ) -> Iterator[RecordedEvent]:
        span = window(after, until, limit)
        head = self.head().position
        last = head if span.until is None else min(span.until, head)
        return decoded_events(
            self._owner._fetch, self._owner._reading, span.after, last, span.limit
        )

    def event_at(self, position: int) -> RecordedEvent:
        """One round trip when the event is there: a head not fixed yet will be at least
        any position stored now. When it is not, the head is fixed and asked again, so the
        answer holds for the rest of this read."""
        if self._head is None:
            with contextlib.suppress(EventNotFoundError):
                return lookup_event(self._owner._fetch, self._owner._reading, position)
        return lookup_event(
            self._owner._fetch, self._owner._reading, position, self.head().position
        )


class _Transaction:
    """A write transaction holding the head lock from its first use; appended rows are sent
    with the next round trip (a lookup, a read, or the commit)."""

    def __init__(self, owner: PostgresEventLog, conn: Connection) -> None:
        self._owner = owner
        self._conn = conn
        self._sql = owner._sql
        self._head: tuple[int, bytes] | None = None
        self._pending: list[Sealed] = []
        self._written: list[str] = []

    # -- the LogTransaction interface ----------------------------------------------------

    def head(self) -> Head:
        position, chain_value = self.guard(self._locked_head, "read the head of")
        return Head(position=position, chain_hash=chain_value.hex())

    def read(
        self, *, after: int = 0, until: int | None = None, limit: int | None = None
    ) -> Iterator[RecordedEvent]:
        span = window(after, until, limit)
        last = span.until if span.until is not None else self.head().position
        return decoded_events(
            self._guarded_fetch, self._owner._reading, span.after, last, span.limit
        )

    def event_at(self, position: int) -> RecordedEvent:
        return lookup_event(self._guarded_fetch, self._owner._reading, position)

    def _guarded_fetch(self, after: int, last: int, count: int) -> list[StoredRow]:
        return self.guard(lambda: self.fetch(after, last, count), "read")

    def append(self, event: NewEvent) -> RecordedEvent:
        return self.append_many([event])[0]

    def append_many(self, events: Sequence[NewEvent]) -> list[RecordedEvent]:
        prepared = self._owner._prepare(events)
        return self.guard(lambda: self.append_prepared(prepared, resolving=False), "append to")

    # -- the work ------------------------------------------------------------------------

    def guard(self, work: Callable[[], T], action: str) -> T:
        """Run `work`, turning psycopg errors into ours; a lost connection ends the
        transaction (the server rolls it back)."""
        try:
            return work()
        except psycopg.Error as exc:
            where = self._owner._where
            if lost(exc, self._conn):
                self._owner._discard()
                raise StorageError(
                    f"cannot {action} {where}: the connection was lost and the server rolled "
                    f"this transaction back ({exc})"
                ) from None
            raise translate(exc, action, where) from None

    def _sync(self, lookup: Sequence[str]) -> list[Row]:
        """Begin and take the head lock (the first time), send pending rows, and look up event
        ids, each in its own statement.

        Beginning is one simple-protocol query of several statements: one round trip that
        leaves the server waiting on a Sync. (A pipeline ends with a Flush request after its
        Sync, and a server idle inside a transaction after a Flush does not arm
        `idle_in_transaction_session_timeout`: a silent holder would never be cut off.)
        """
        conn, sql = self._conn, self._sql
        if self._head is not None:
            sent = self._send_pending()
            if sent is not None:
                sent.check(self._owner._where)
            return conn.execute(sql.by_event_ids, (list(lookup),)).fetchall() if lookup else []
        cursor = psycopg.ClientCursor(conn)
        statements = [_SQL_BEGIN, sql.lock, *([sql.by_event_ids] if lookup else [])]
        try:
            cursor.execute("; ".join(statements), (list(lookup),) if lookup else None)
        except psycopg.errors.LockNotAvailable:
            self.abandon()
            raise self._owner._busy(conn) from None
        cursor.nextset()
        row = cursor.fetchone()
        assert row is not None
        self._head = (int(row[0]), bytes(row[1]))
        return cursor.fetchall() if cursor.nextset() else []

    def _send_pending(self) -> _Sent | None:
        """Send the pending rows; the server's chain values for them are checked when its
        reply is read (`_Sent.check`)."""
        if not self._pending:
            return None
        sent = send_rows(self._conn, self._sql, self._pending)
        self._pending = []
        return sent

    def _locked_head(self) -> tuple[int, bytes]:
        if self._head is None:
            self._sync(())
        assert self._head is not None
        return self._head

    def fetch(self, after: int, last: int, count: int) -> list[StoredRow]:
        self._sync(())
        return self._owner._rows(self._conn, after, last, count)

    def append_prepared(
        self, prepared: Sequence[Prepared], *, resolving: bool
    ) -> list[RecordedEvent]:
        """Append checked drafts. `resolving` (a retry after a lost connection) looks up every
        id, generated ones too, so an append that did commit is not written twice."""
        lookup = [item.event_id for item in prepared if resolving or item.caller_event_id]
        rows = self._sync(lookup) if self._head is None or lookup else []
        found = {row[1]: row for row in rows}
        position, previous = self._locked_head()
        new_rows: list[Sealed] = []
        records: list[RecordedEvent] = []
        for item in prepared:
            row = found.get(item.event_id)
            if row is not None:
                records.append(self._recorded(row, item))
                continue
            position += 1
            sealed = seal(item, position, previous)
            previous = sealed.chain_hash
            new_rows.append(sealed)
            records.append(sealed.record)
        self._pending.extend(new_rows)
        self._written.extend(sealed.record.event_id for sealed in new_rows)
        self._head = (position, previous)
        return [self._as_read(record) for record in records]

    def _as_read(self, record: RecordedEvent) -> RecordedEvent:
        """An appended event as readers take it (its migration claims honoured or not)."""
        if record.payload.migrated is UNSET:
            return record
        return self._owner._reading.honour(record, self._guarded_fetch)

    def _recorded(self, row: Row, item: Prepared) -> RecordedEvent:
        """The recorded event a retry refers to; a different event under its id is a
        conflict."""
        owner = self._owner
        stored = stored_row(row, lambda p: owner._oversize_leaf(self._conn, p))
        record = read_row(stored, owner.log_format)
        if isinstance(record.payload, Unreadable) or not same_event(record, item.event):
            raise EventIdConflictError(
                f"event_id {stored.event_id!r} is already used by a different event at "
                f"position {stored.position}"
            )
        return record

    def commit(self) -> None:
        """Send pending rows and COMMIT in one round trip."""
        if self._head is None:
            return
        # A refused row fails the pipeline either while COMMIT is queued or when the pipeline
        # ends, as the server's reply happens to arrive; the first error is the one raised
        # either way, and psycopg is never left to log the second ("pipeline aborted").
        first: psycopg.Error | None = None
        sent: _Sent | None = None
        try:
            with self._conn.pipeline():
                try:
                    sent = self._send_pending()
                    self._conn.execute(_SQL_COMMIT)
                except psycopg.Error as exc:
                    first = exc
        except psycopg.Error as exc:
            first = first or exc
        if first is not None:
            raise first
        if sent is not None:
            sent.check(self._owner._where)

    def commit_or_settle(self) -> None:
        """Commit; if the connection is lost on the way, find out by event id whether the
        commit happened, and raise if it did not."""
        owner = self._owner
        try:
            self.commit()
            return
        except psycopg.Error as exc:
            if not lost(exc, self._conn):
                self.abandon()
                raise translate(exc, "commit to", owner._where) from None
            owner._discard()
        ids = self._written
        if not ids:
            return
        found = owner._run(
            lambda conn, _: _count(conn.execute(self._sql.count_event_ids, (ids,)).fetchone()),
            "confirm the commit to",
        )
        if found == len(ids):
            log.info("log_commit_confirmed", where=owner._where, events=found)
            return
        raise StorageError(
            f"cannot commit to {owner._where}: the connection was lost while committing, and "
            f"{found} of its {len(ids)} events are in the log (checked by event id after "
            "reconnecting)" + ("; nothing was written" if found == 0 else "")
        )

    def abandon(self) -> None:
        """Roll back, if a transaction is open on a working connection."""
        conn = self._conn
        self._pending = []
        if conn.closed or conn.broken or conn.info.transaction_status == TransactionStatus.IDLE:
            return
        try:
            conn.execute(_SQL_ROLLBACK)
        except psycopg.Error:
            log.warning("rollback_failed", where=self._owner._where)
            self._owner._discard()


class _Sent(NamedTuple):
    """Rows sent to `append_events`, and the cursor its reply arrives on."""

    cursor: psycopg.Cursor[Any]
    rows: Sequence[Sealed]

    def check(self, where: str) -> None:
        """Compare the chain values the server computed with those computed here: a server
        that keeps another chain than the one its rows seal is caught at once."""
        row = self.cursor.fetchone()
        links = [bytes(link) for link in row[0]] if row and row[0] is not None else []
        for sealed, link in itertools.zip_longest(self.rows, links[: len(self.rows)]):
            if link is None or not hmac.compare_digest(link, sealed.chain_hash):
                raise CorruptLogError(
                    f"{where} computed a chain value at position {sealed.record.position} "
                    "that differs from the one its body seals: the server does not keep this "
                    "log's chain (run `factledger verify`)",
                    position=sealed.record.position,
                )


def send_rows(conn: Connection, statements: Statements, rows: Sequence[Sealed]) -> _Sent:
    """Append sealed events and their texts through the log's write path, in one statement:
    the server checks each row and computes its chain value."""
    cursor = conn.execute(
        statements.append,
        [
            [s.record.event_id for s in rows],
            [s.body for s in rows],
            [s.text for s in rows],
            [s.salt for s in rows],
        ],
    )
    return _Sent(cursor, rows)


def _count(row: Row | None) -> int:
    return int(row[0]) if row else 0
