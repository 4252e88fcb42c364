"""A host's read model of a log held elsewhere: a local SQLite cache that tails the log.

The log (PostgreSQL, or any `EventLog`) is the truth; each host keeps its read model in a
SQLite file of its own and folds the log into it by position. Before an event is folded its
stored bytes are re-linked to the chain (`eventlog.ChainWalker`), from the chain value the
cache recorded with its checkpoint (the genesis of the log's id for an empty cache): a host
never folds an event whose chain does not link.

An append commits in the log first; then the cache folds it, before the store's call
returns (read-your-writes). A crash in between leaves the cache behind, never wrong, and
the next read or `sync` catches it up. Rows and checkpoints commit in one cache
transaction under the cache's write lock, so processes sharing the file fold each position
once, whichever gets there first.

The cache records the id of the log it folds. A cache of another log, one ahead of the log,
or one whose checkpoint holds a chain value the log does not, is refused
(`CacheRefusedError`) and left as it is: it may be the only record of history the log lost.
A deleted cache is rebuilt from the log, and so is one whose checkpoints were edited or
emptied, even under a handle that opened it long before (each read checks them).
"""

from __future__ import annotations

import hmac
import itertools
import os
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from eventlog import (
    ChainBreak,
    ChainWalker,
    CorruptLogError,
    EventLog,
    Head,
    NewEvent,
    Problem,
    RecordedEvent,
    SQLiteEventLog,
    StorageError,
    StoredRow,
    chain_at,
)
from eventlog.checks import check_path, is_dsn
from eventlog.events import ContentErased
from eventlog.logs import get_logger
from eventlog.migration import Migration, Reading
from eventlog.stored import LogUpTo, genesis_of
from projections import _sql as sql
from projections._database import CacheDatabase
from projections._errors import CacheChoiceError, CacheRefusedError
from projections._projector import (
    LiveReadModel,
    Projection,
    Projector,
    ReadModelSnapshot,
    advance,
    await_position,
    batches,
    checkpoint_rows,
    checkpoints_at,
    copy_tables,
    folded_to,
    recreate,
    reset_checkpoints,
)
from projections._reads import Queryable
from projections._tables import table_exists

log = get_logger("factledger.projections")

LOG_ID = "log_id"


def open_read_model(
    event_log: EventLog,
    projectors: Sequence[Projector],
    *,
    cache: str | os.PathLike[str] | None = None,
) -> LiveReadModel:
    """The one place a read model is chosen, not yet opened: a host's cache file when `cache`
    is given; else the log's own file for a SQLite log; else a cache in memory, folded from
    the log when opened."""
    if cache is None and isinstance(event_log, SQLiteEventLog):
        return Projection(event_log, projectors)
    database = CacheDatabase(":memory:" if cache is None else check_cache(cache))
    return CacheProjection(event_log, database, projectors)


def cache_hint(remnants: Sequence[str]) -> str:
    """For a file found holding no log: a hint when its tables are a host's cache of a log
    held elsewhere (read it with that log named), else ''. The file is still reported as
    holding no log: the hint never turns a missing log into a clean verdict."""
    if sql.CACHE_META_TABLE not in remnants:
        return ""
    return (
        f"; it holds a host's cache ({sql.CACHE_META_TABLE}): if it is one, name the log it "
        "caches (--dsn, or log= in the library) and give this file as the cache"
    )


def check_cache(cache: str | os.PathLike[str]) -> str:
    """A host's cache path: a file on this host, never a `postgresql://` DSN
    (`CacheChoiceError`, naming no part of the DSN, which may hold a password)."""
    path = check_path(cache)
    if is_dsn(path):
        raise CacheChoiceError(
            "the cache must be a SQLite file on this host, not a postgresql:// DSN: give the "
            "DSN as the log and this host's cache file as the cache (--dsn and --db)"
        )
    return path


class CacheProjection:
    """Keeps projectors folded, in a host's cache, up to the head of a log held elsewhere.

    Reads catch up before they answer (one head query when the cache is current). An append
    commits in the log at `append()`, then is folded: see `transaction`.
    """

    def __init__(
        self, event_log: EventLog, cache: CacheDatabase, projectors: Sequence[Projector]
    ) -> None:
        self._log = event_log
        self._cache = cache
        self._projectors = tuple(projectors)
        self._genesis = Head(position=0, chain_hash=genesis_of(event_log).hex())
        self._known: Head | None = None
        """The log head this handle last saw the cache reach: reads skip the cache's write
        lock while the log's head is still this."""
        self._folded_erasure = False
        """Whether a fold since the last WAL checkpoint held an erasure."""

    @property
    def projectors(self) -> tuple[Projector, ...]:
        """The projectors this cache keeps current."""
        return self._projectors

    @property
    def database(self) -> CacheDatabase:
        """The cache's tables; query them inside `snapshot()` or `transaction()`."""
        return self._cache

    def open(self) -> None:
        """Claim the cache for this log, hold its checkpoints to the log, start over any
        projector that is new or at another version, and catch up."""
        with self._cache.read() as db:
            self._refuse_other_files(db)
        self._cache.use_wal()
        with self._cache.write() as db:
            self._claim(db)
            db.execute(sql.CHECKPOINT_DDL)
            rows = checkpoint_rows(db)
            for named in {head for row in rows.values() if (head := row.head()) is not None}:
                self._check(named)
            if self._state_of(rows) is None:
                if rows or any(table_exists(db, t) for p in self._projectors for t in p.tables):
                    log.warning("cache_rebuild", path=self._cache.path, reason="projectors")
                for projector in self._projectors:
                    recreate(db, projector)
                reset_checkpoints(db, self._projectors, self._genesis)
        self._known = None
        self.catch_up()

    def current_at(self, head: Head) -> bool:
        """Whether every projector's checkpoint is `head` at its code's version; ask inside
        a `snapshot()`."""
        return checkpoints_at(self._cache, self._projectors, head)

    def catch_up(self, head: Head | None = None) -> Head:
        """Fold what the log holds past the cache up to `head` (default: the log's head now),
        re-linking its chain as it goes; return where the cache is then. A cache past a head
        read here is held to the log (another process may have folded further since)."""
        from_log = head is None
        head = self._log.head() if head is None else head
        if head == self._known:
            return head
        with self._cache.lock:
            state: Head | None = None
            while state is None or state.position < head.position:
                with self._cache.write() as db:
                    state = self._state(db)
                    if state.position < head.position:
                        # A batch per transaction: the write lock is let go between them, so
                        # a long catch-up does not starve other processes sharing the cache.
                        until = min(head.position, state.position + sql.BATCH)
                        state = self._fold(db, state, until)
            if self._folded_erasure:
                self._cache.fold_wal()
                self._folded_erasure = False
        if state.position == head.position:
            if not _same_chain(state.chain_hash, head.chain_hash):
                raise self._diverged(state.position)
        elif from_log:
            self._check(state)
        self._known = state
        return state

    def sync(self, min_position: int | None = None, timeout: float = 5.0) -> int:
        """Fold up to at least `min_position` (default: the log's head now), waiting up to
        `timeout` seconds for the log to reach it; return the position the cache is at."""
        return await_position(
            lambda: self.catch_up().position,
            min_position,
            timeout,
            head=lambda: self._log.head().position,
        )

    @contextmanager
    def snapshot(self) -> Iterator[ReadModelSnapshot]:
        """A consistent read of the cache, caught up to the log's head first."""
        with self._cache.lock:
            if self._cache.in_transaction:
                with self._cache.read() as db:
                    yield _CacheSnapshot(self, db)
                return
            self.catch_up()
            with self.checked_read() as db:
                yield _CacheSnapshot(self, db)

    @contextmanager
    def checked_read(self) -> Iterator[CacheDatabase]:
        """One read of the cache whose checkpoints name one position at the code's versions:
        a cache whose checkpoints were edited or emptied since this handle opened it is
        opened again first (rebuilt from the log), so its edited rows are never served."""
        with self._cache.read() as db:
            if self._state_of(checkpoint_rows(db)) is not None:
                yield db
                return
        log.warning("cache_rebuild", path=self._cache.path, reason="checkpoints changed")
        self.open()
        with self._cache.read() as db:
            yield db

    @contextmanager
    def transaction(self) -> Iterator[CacheTransaction]:
        """Appends and read-model queries, this handle's other threads held off meanwhile.

        Unlike a read model in the log's own file, each `append()` is its own transaction of
        the log and commits there and then: leaving the `with` by an exception does not undo
        it. Each is folded into the cache before `append()` returns.
        """
        with self._cache.lock:
            tx = CacheTransaction(self)
            try:
                yield tx
            finally:
                tx.end_read()

    def replace(self, source: Queryable, folded: Head) -> int:
        """Replace the cache's tables with `source`'s (a read model folded from this log up to
        `folded`) and its checkpoints with `folded`, in one cache transaction; then catch up.
        Returns the position the cache is at afterwards."""
        if folded.position:
            stored = chain_at(self._log, folded.position)
            if stored is None or not _same_chain(stored, folded.chain_hash):
                raise CorruptLogError(
                    f"the log changed at or before position {folded.position} while the read "
                    "model was being refolded; nothing was replaced",
                    position=folded.position,
                )
        with self._cache.write() as db:
            self._claim(db)
            copy_tables(db, source, self._projectors)
            reset_checkpoints(db, self._projectors, folded)
        self._known = None
        return self.catch_up().position

    def close(self) -> None:
        """Close the cache's connection (the log is its owner's to close)."""
        self._cache.close()

    # -- folding ---------------------------------------------------------------------------

    def _fold(self, db: CacheDatabase, state: Head, until: int) -> Head:
        """Fold the log's rows after `state` up to `until` into `db`, in its transaction;
        return where that leaves the cache."""
        reached = state
        for batch in batches(self._linked(state, until)):
            advance(db, self._projectors, batch)
            if any(isinstance(record.payload, ContentErased) for record in batch):
                self._folded_erasure = True
            reached = Head(position=batch[-1].position, chain_hash=batch[-1].chain_hash)
        if reached == state:
            raise CorruptLogError(
                f"the log's head is past position {state.position}, but it holds no row after it",
                position=state.position + 1,
            )
        log.debug("cache_folded", from_position=state.position, to_position=reached.position)
        return reached

    def _linked(self, state: Head, until: int) -> Iterator[RecordedEvent]:
        """The log's events after `state` up to `until`, each only once its stored bytes
        link to the chain from `state`'s chain value."""
        try:
            yield from linked_events(self._log, after=state, until=until)
        except ChainBreak as brk:
            if brk.position <= state.position:
                raise self._diverged(state.position) from None
            log.warning(
                "cache_fold_refused",
                path=self._cache.path,
                position=brk.position,
                problem=str(brk.problem),
            )
            raise

    # -- the cache against the log -----------------------------------------------------------

    def _refuse_other_files(self, db: CacheDatabase) -> None:
        """Refuse a file that is no cache at all, such as a log's own file."""
        tables = {row.name for row in sql.CACHE_TABLES.rows(db)}
        if tables and sql.CACHE_META_TABLE not in tables:
            raise CacheRefusedError(
                f"{self._cache.path} is not a read-model cache: it holds other tables (is it a "
                "log's own file?); it was left untouched",
                path=self._cache.path,
            )

    def _claim(self, db: CacheDatabase) -> None:
        """Record the log this cache folds, or refuse a cache of another log (or a file that
        is no cache at all)."""
        self._refuse_other_files(db)
        db.execute(sql.CACHE_META_DDL)
        meta = sql.CACHE_META_GET.first(db, (LOG_ID,))
        if meta is None:
            db.execute(sql.CACHE_META_PUT, (LOG_ID, self._log.log_id))
        elif meta.value != self._log.log_id:
            raise CacheRefusedError(
                f"the cache {self._cache.path} folds log {meta.value}, not log "
                f"{self._log.log_id}; it was kept as it is",
                path=self._cache.path,
            )

    def _check(self, state: Head) -> None:
        """Refuse a cache checkpoint past the log's head, or holding a chain value the log
        does not hold at that position."""
        if not state.position:
            if not _same_chain(state.chain_hash, self._genesis.chain_hash):
                raise self._diverged(0)
            return
        head = self._log.head()
        if state.position > head.position:
            raise CacheRefusedError(
                f"the cache {self._cache.path} has folded up to position {state.position}, past "
                f"the log's head {head.position}: the log has lost events this host saw. The "
                "cache was kept as evidence; move it aside to rebuild it from the log",
                path=self._cache.path,
                position=state.position,
            )
        stored = chain_at(self._log, state.position)
        if stored is None or not _same_chain(stored, state.chain_hash):
            raise self._diverged(state.position)

    def _diverged(self, position: int) -> CacheRefusedError:
        return CacheRefusedError(
            f"the cache {self._cache.path} disagrees with the log's chain at position "
            f"{position}: the log's history differs from what this host folded. The cache was "
            "kept as evidence; move it aside to rebuild it from the log",
            path=self._cache.path,
            position=position,
        )

    def _state(self, db: Queryable) -> Head:
        """Where the cache is: the one checkpoint every projector shares."""
        state = self._state_of(checkpoint_rows(db))
        if state is None:
            raise StorageError(
                f"the cache {self._cache.path} was reset by a process with other projectors; "
                "open the store again"
            )
        return state

    def _state_of(self, found: dict[object, sql.Checkpoint]) -> Head | None:
        """The checkpoint every projector shares at its code's version (`checkpoint_rows`),
        or None."""
        if set(found) != {p.name for p in self._projectors}:
            return None
        heads = {folded_to(found[p.name], p) for p in self._projectors}
        if len(heads) != 1:
            return None
        [head] = heads
        return head


class _CacheSnapshot:
    """One read transaction of the cache, and the position it shows."""

    __slots__ = ("_db", "_head", "_projection")

    def __init__(self, projection: CacheProjection, db: CacheDatabase) -> None:
        self._projection = projection
        self._db = db
        self._head: Head | None = None

    def head(self) -> Head:
        """The log position (and chain value) this read of the cache shows."""
        if self._head is None:
            self._head = self._projection._state(self._db)
        return self._head

    def read(
        self, *, after: int = 0, until: int | None = None, limit: int | None = None
    ) -> Iterator[RecordedEvent]:
        """The log's events, never past the position this read of the cache shows
        (`LogSnapshot.read`)."""
        return LogUpTo(self._projection._log, self.head()).read(
            after=after, until=until, limit=limit
        )

    def event_at(self, position: int) -> RecordedEvent:
        """The log's event at `position`, if this read of the cache shows it, in one
        lookup in the log (`LogSnapshot.event_at`)."""
        return LogUpTo(self._projection._log, self.head()).event_at(position)

    def execute(self, statement: str, params: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        """Query the cache in this read (a statement that writes is refused)."""
        return self._db.query(statement, params)


class CacheTransaction:
    """Appends committed in the log one call at a time, and read-model queries between them.

    Queries between two appends read one state of the cache, caught up to the log first.
    """

    def __init__(self, projection: CacheProjection) -> None:
        self._projection = projection
        self._read: AbstractContextManager[CacheDatabase] | None = None
        self._snapshot: _CacheSnapshot | None = None

    def append(self, events: Sequence[NewEvent]) -> list[RecordedEvent]:
        """Append `events` in one transaction of the log, which commits here (the enclosing
        `with` cannot undo it), then fold them into the cache before returning."""
        self.end_read()
        if self._projection.database.in_transaction:
            raise StorageError(
                f"cannot append through the cache {self._projection.database.path} while a "
                "read of it is open on this handle (a snapshot): the cache folds each append, "
                "which it cannot do inside a read; end the read first. Nothing was appended"
            )
        records = self._projection._log.append_many(events)
        if records:
            last = max(records, key=lambda record: record.position)
            self._projection.catch_up(Head(position=last.position, chain_hash=last.chain_hash))
        return records

    def head_position(self) -> int:
        """The log position the cache shows to this transaction's queries."""
        return self._reading().head().position

    def erase_texts(self, erasure_position: int, positions: Sequence[int]) -> int:
        """Remove the texts the erasure at `erasure_position` names from a log file read
        through this cache (its own transaction, once the erasure is folded with effect);
        return how many were still stored. A PostgreSQL log's server removed them in the
        append that stored the erasure: 0."""
        event_log = self._projection._log
        if not isinstance(event_log, SQLiteEventLog):
            return 0
        with event_log.transaction() as tx:
            removed = tx.erase_texts(erasure_position, positions)
        own = Projection(event_log, self._projection.projectors)
        if sql.CHECKPOINT_TABLE_EXISTS.exists(own.database):
            own.open()  # the file's own read model folds the erasure: its copies go too
        event_log.fold_wal()
        return removed

    def execute(self, statement: str, params: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        """Query the cache, caught up to the log first."""
        return self._reading().execute(statement, params)

    def _reading(self) -> _CacheSnapshot:
        if self._snapshot is None:
            self._projection.catch_up()
            read = self._projection.checked_read()
            db = read.__enter__()
            self._read = read
            self._snapshot = _CacheSnapshot(self._projection, db)
        return self._snapshot

    def end_read(self) -> None:
        """End the read the queries since the last append shared."""
        read, self._read, self._snapshot = self._read, None, None
        if read is not None:
            read.__exit__(None, None, None)


def linked_events(
    event_log: EventLog, *, after: Head | None = None, until: int | None = None
) -> Iterator[RecordedEvent]:
    """The log's events after `after` (default: from the genesis) up to `until`, decoded from
    the stored bytes only once those link to the chain from `after`'s chain value; a
    `ChainBreak` at the first that does not, or at `after` itself when the log holds another
    chain value there."""
    start = after or Head(position=0, chain_hash=genesis_of(event_log).hex())
    rows = event_log.scan(after=max(start.position - 1, 0), until=until)
    chain_value = genesis_of(event_log)
    if start.position:
        first = next(rows, None)
        if first is not None and first.position == start.position:
            chain_value = first.chain_hash
    if not _same_chain(chain_value.hex(), start.chain_hash):
        raise ChainBreak(
            start.position,
            Problem.CHAIN_BROKEN,
            f"the log does not hold the chain value {start.chain_hash} at position "
            f"{start.position}",
        )
    log_format = event_log.log_format
    walker = ChainWalker(log_format, chain_value, position=start.position)
    reading = Reading(log_format, Migration(event_log.log_id))

    def fetch(after: int, last: int, count: int) -> list[StoredRow]:
        return list(event_log.scan(after=after, until=last, limit=count))

    for chunk in _chunks(rows):
        walker.walk(chunk)
        for row in chunk:
            yield reading.event(row, fetch)


def _chunks(rows: Iterator[StoredRow]) -> Iterator[list[StoredRow]]:
    while chunk := list(itertools.islice(rows, sql.BATCH)):
        yield chunk


def _same_chain(first: str, second: str) -> bool:
    """Constant-time comparison of two hex chain values (anything else differs)."""
    return hmac.compare_digest(first.encode("utf-8", "replace"), second.encode("utf-8", "replace"))
