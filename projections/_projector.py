"""Projectors and the runner that keeps them folded up to the log's head.

A projector folds events into its own tables. The runner applies every projector inside the
append's own transaction (read-your-writes) and records, in that same transaction, the
position and chain hash each projector has applied. On open, a projector that is behind
catches up; one whose version changed, or whose checkpoint no longer matches the log, is
dropped and rebuilt from the log.

`Projection` keeps the tables in the log's own SQLite file (`database.in_log_file`), so
the append, the projectors' rows and their checkpoints commit as one transaction; the log's
Merkle index (`projections._merkle_index`) is extended there too, every 256 events. A log held
elsewhere pairs with a local cache database instead (`projections._cache.CacheProjection`):
the append commits in the log, then the cache folds it and advances its checkpoints; a crash
in between leaves the cache behind, and the same catch-up repairs it. Both keep the
`LiveReadModel` surface the store, its views and the prompt builder use.

A handle holds its read model to the log on every read and write, not only when opened: a
checkpoint table edited or emptied under a long-running handle (so that a quarantine row
deleted or a `hidden` flag cleared by hand would otherwise be served until the next open)
makes it refold what no longer matches, exactly as opening would.
"""

from __future__ import annotations

import functools
import itertools
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any, Protocol, cast

from eventlog import (
    CorruptLogError,
    EventLog,
    Head,
    InvalidInputError,
    LogSnapshot,
    LogTransaction,
    NewEvent,
    RecordedEvent,
    SQLiteEventLog,
    StorageError,
    chain_at,
)
from eventlog.backend import ErasingTransaction, LinkingTransaction
from eventlog.checks import check_finite, check_position
from eventlog.logs import get_logger
from eventlog.stored import genesis_of
from projections import _sql as sql
from projections._database import Database, in_log_file
from projections._errors import SyncTimeoutError
from projections._merkle_index import STEP as MERKLE_STEP
from projections._merkle_index import IndexTables, MerkleIndex
from projections._reads import Queryable
from projections._tables import table_chunks, table_exists

log = get_logger("factledger.projections")

SYNC_POLL_S = (0.001, 0.02)
"""A waiting `sync` checks the log after the first of these, doubling up to the second."""


class TableWriter(Protocol):
    """Where a projector writes: the append's transaction, or a scratch database."""

    def execute(self, sql: str, params: Sequence[object] = ()) -> list[tuple[Any, ...]]: ...

    def executemany(self, sql: str, rows: Iterable[Sequence[object]]) -> None: ...


class Projector(Protocol):
    """Folds events into tables it owns. Bump `version` whenever its tables or fold change."""

    @property
    def name(self) -> str: ...

    @property
    def version(self) -> int: ...

    @property
    def tables(self) -> tuple[str, ...]: ...

    def create(self, writer: TableWriter) -> None:
        """Create the (empty) tables."""
        ...

    def apply(self, writer: TableWriter, records: Sequence[RecordedEvent]) -> None:
        """Fold events, in position order, that this projector has not seen yet."""
        ...


def fold(
    writer: TableWriter, projectors: Sequence[Projector], events: Iterable[RecordedEvent]
) -> int:
    """Create every projector's tables in `writer` and fold `events` into them; return the count."""
    for projector in projectors:
        projector.create(writer)
    count = 0
    for batch in batches(events):
        for projector in projectors:
            projector.apply(writer, batch)
        count += len(batch)
    return count


def batches(events: Iterable[RecordedEvent]) -> Iterator[list[RecordedEvent]]:
    """`events` in lists of at most `sql.BATCH`, in order: projectors fold a batch at a time."""
    iterator = iter(events)
    while batch := list(itertools.islice(iterator, sql.BATCH)):
        yield batch


def advance(
    writer: TableWriter, projectors: Sequence[Projector], records: Sequence[RecordedEvent]
) -> None:
    """Fold `records` (the next events after every projector's checkpoint) into every
    projector and advance each checkpoint to the last of them, through `writer`."""
    for projector in projectors:
        projector.apply(writer, records)
    # One single-row update per projector: SQLite runs `name IN (...)` several times slower.
    last = records[-1]
    writer.executemany(
        sql.CHECKPOINT_ADVANCE, [(last.position, last.chain_hash, p.name) for p in projectors]
    )


def recreate(writer: TableWriter, projector: Projector) -> None:
    """Drop a projector's tables and create them empty (each emptied first, so memory stays
    bounded however large the table: `sql.TABLE_CLEAR`)."""
    for table in projector.tables:
        if sql.TABLE_KEPT.exists(writer, (table,)):
            writer.execute(sql.TABLE_CLEAR.format(table=table))
        writer.execute(sql.TABLE_DROP.format(table=table))
    projector.create(writer)


def copy_tables(writer: TableWriter, source: Queryable, projectors: Sequence[Projector]) -> None:
    """Recreate every projector's tables in `writer` holding `source`'s rows."""
    for projector in projectors:
        recreate(writer, projector)
        for table in projector.tables:
            for chunk in table_chunks(source, table):
                marks = ", ".join("?" * len(chunk[0]))
                writer.executemany(sql.TABLE_INSERT.format(table=table, marks=marks), chunk)


def checkpoint_rows(db: Queryable) -> dict[object, sql.Checkpoint]:
    """Each projector's checkpoint in `db` by name, as stored; none when the checkpoint table
    is missing."""
    if not sql.CHECKPOINT_TABLE_EXISTS.exists(db):
        return {}
    return {row.name: row for row in sql.CHECKPOINT_ROWS.rows(db)}


def checkpoints_at(db: Queryable, projectors: Sequence[Projector], head: Head) -> bool:
    """Whether every projector's checkpoint in `db` is `head` at its code's version."""
    found = checkpoint_rows(db)
    return all(folded_to(found.get(p.name), p) == head for p in projectors)


def folded_to(checkpoint: sql.Checkpoint | None, projector: Projector) -> Head | None:
    """Where `checkpoint` says `projector` is folded up to, if it names a position at the
    code's version of the projector."""
    if checkpoint is None or checkpoint.version != projector.version:
        return None
    return checkpoint.head()


def tables_kept(db: Queryable, projector: Projector) -> list[str]:
    """The tables of `projector` that `db` holds."""
    return [table for table in projector.tables if table_exists(db, table)]


def reset_checkpoints(writer: TableWriter, projectors: Sequence[Projector], head: Head) -> None:
    """Record every projector as folded up to `head` at its code's version."""
    writer.execute(sql.CHECKPOINT_DDL)
    for projector in projectors:
        writer.execute(
            sql.CHECKPOINT_PUT, (projector.name, projector.version, head.position, head.chain_hash)
        )


def await_position(
    reach: Callable[[], int], min_position: int | None, timeout: float, *, head: Callable[[], int]
) -> int:
    """Call `reach` (which returns the position the read model is at) until it returns at
    least `min_position` (default: `head()` now); return that position. Raise
    `SyncTimeoutError` after `timeout` seconds."""
    wait = check_finite("timeout", timeout)
    if wait < 0:
        raise InvalidInputError(f"timeout must not be negative, got {timeout!r}")
    target = head() if min_position is None else check_position("min_position", min_position)
    deadline = time.monotonic() + wait
    delay, longest = SYNC_POLL_S
    while (reached := reach()) < target:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise SyncTimeoutError(
                f"the log did not reach position {target} within {wait:g}s "
                f"(the read model is at {reached})"
            )
        time.sleep(min(delay, remaining))
        delay = min(delay * 2, longest)
    return reached


class ReadModelSnapshot(Protocol):
    """A consistent read of the read model, the log position it shows, and the log's events
    up to there (to hold a row to the event that wrote it), read as `LogSnapshot` reads."""

    def head(self) -> Head: ...

    def read(
        self, *, after: int = 0, until: int | None = None, limit: int | None = None
    ) -> Iterator[RecordedEvent]: ...

    def event_at(self, position: int) -> RecordedEvent: ...

    def execute(self, statement: str, params: Sequence[object] = ()) -> list[tuple[Any, ...]]: ...


class ProjectedTransaction(Protocol):
    """What a store writes through: appends folded into the read model, and read-model
    queries beside them (`FileTransaction` in one file, `CacheTransaction` with a cache)."""

    def append(self, events: Sequence[NewEvent]) -> list[RecordedEvent]: ...

    def head_position(self) -> int: ...

    def execute(self, statement: str, params: Sequence[object] = ()) -> list[tuple[Any, ...]]: ...

    def erase_texts(self, erasure_position: int, positions: Sequence[int]) -> int: ...


class LiveReadModel(Protocol):
    """Projectors kept folded up to a log's head: in the log's own file (`Projection`), or in
    a host's cache beside a log held elsewhere (`projections._cache.CacheProjection`)."""

    @property
    def projectors(self) -> tuple[Projector, ...]: ...

    @property
    def database(self) -> Database: ...

    def open(self) -> None: ...

    def current_at(self, head: Head) -> bool: ...

    def snapshot(self) -> AbstractContextManager[ReadModelSnapshot]: ...

    def transaction(self) -> AbstractContextManager[ProjectedTransaction]: ...

    def sync(self, min_position: int | None = None, timeout: float = 5.0) -> int: ...

    def replace(self, source: Queryable, folded: Head) -> int: ...

    def close(self) -> None: ...


class _FileSnapshot:
    """The read model in the log's file, inside one read of the log."""

    __slots__ = ("_db", "_log")

    def __init__(self, log_snapshot: LogSnapshot, db: Database) -> None:
        self._log = log_snapshot
        self._db = db

    def head(self) -> Head:
        """The log's head in this read: the read model shows it once it is current."""
        return self._log.head()

    def read(
        self, *, after: int = 0, until: int | None = None, limit: int | None = None
    ) -> Iterator[RecordedEvent]:
        """The log's events in this read (`LogSnapshot.read`)."""
        return self._log.read(after=after, until=until, limit=limit)

    def event_at(self, position: int) -> RecordedEvent:
        """The log's event at `position` in this read (`LogSnapshot.event_at`)."""
        return self._log.event_at(position)

    def execute(self, statement: str, params: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        """Query the read model in this read (a statement that writes is refused)."""
        return self._db.query(statement, params)


class Projection:
    """Keeps a fixed set of projectors folded up to the head of one log."""

    def __init__(self, event_log: EventLog, projectors: Sequence[Projector]) -> None:
        self._log = event_log
        self._db = in_log_file(event_log)
        self._projectors = tuple(projectors)
        self._names = tuple(p.name for p in self._projectors)
        self._merkle = MerkleIndex(
            event_log, IndexTables(self._db, read=event_log.snapshot, write=nullcontext)
        )
        """The Merkle index beside the tables, extended as appends cross each `MERKLE_STEP`."""
        self._verified: tuple[int, Head] | None = None
        """The file's data version (`PRAGMA data_version`, which only another connection's
        commit changes) and the log's head when the checkpoints were last found current."""

    @property
    def projectors(self) -> tuple[Projector, ...]:
        """The projectors this runner keeps current."""
        return self._projectors

    @property
    def database(self) -> Database:
        """The read model's tables; query them inside the log's `snapshot()` or `transaction()`."""
        return self._db

    @contextmanager
    def snapshot(self) -> Iterator[ReadModelSnapshot]:
        """A consistent read of the read model, inside one read of the log. A read model
        whose checkpoints no longer name the log's head at the code's versions (edited,
        emptied, or behind an append around the API) is refolded first, as `open` does."""
        with self._log.snapshot() as snap:
            if self._known_current(snap, with_head=False):
                yield _FileSnapshot(snap, self._db)
                return
        self._reopen()
        with self._log.snapshot() as snap:
            yield _FileSnapshot(snap, self._db)

    def sync(self, min_position: int | None = None, timeout: float = 5.0) -> int:
        """Wait until the log reaches `min_position` (default: its head now) and return its
        head. In the log's own file every append is folded as it commits, so nothing waits
        for a fold; only for other writers' appends."""
        return await_position(
            lambda: self._log.head().position,
            min_position,
            timeout,
            head=lambda: self._log.head().position,
        )

    def close(self) -> None:
        """Nothing to free: the read model lives on the log's own connection."""

    def is_current(self) -> bool:
        """Whether every projector exists at its code's version and at the log's head."""
        with self._log.snapshot() as snap:
            return self.current_at(snap.head())

    def current_at(self, head: Head) -> bool:
        """Whether every projector's checkpoint is `head` at its code's version; ask inside
        a `snapshot()` of the log that `head` was read from."""
        return checkpoints_at(self._db, self._projectors, head)

    def open(self) -> None:
        """Create, rebuild or catch up projectors as needed so they match the log's head."""
        if self.is_current():
            return
        with self._log.transaction() as tx:
            self._refresh(tx)

    def _known_current(self, snap: LogSnapshot, *, with_head: bool) -> bool:
        """`current_at(snap.head())`, skipped while no other connection has committed to the
        file since this handle last found it so (`PRAGMA data_version`; its own appends fold
        as they go) and, `with_head`, the head is still the one it found or wrote (an append
        around the API through this handle's own log is caught up before a write)."""
        version = sql.DATA_VERSION.one(self._db).data_version
        verified = self._verified
        if (
            verified is not None
            and verified[0] == version
            and (not with_head or snap.head() == verified[1])
        ):
            return True
        head = snap.head()
        if not self.current_at(head):
            return False
        self._verified = (version, head)
        return True

    def _reopen(self) -> None:
        """Refold, as `open` does, a read model that stopped matching the log under this
        handle. A read-only view cannot, and refuses to read it."""
        if isinstance(self._log, SQLiteEventLog) and self._log.read_only:
            raise StorageError(
                f"the read model in {self._log.path} no longer matches the log under this "
                "read-only view: its projector checkpoints do not name the log's head at this "
                "code's versions (edited, emptied, or behind an append around the API); open "
                "the view again"
            )
        self.open()

    def _refresh(self, tx: LogTransaction) -> None:
        """Create, rebuild or catch up projectors, inside `tx`, to the log's head there."""
        self._db.execute(sql.CHECKPOINT_DDL)
        self._reset_stale(tx)
        self._catch_up(tx)

    def _reset_stale(self, tx: LogTransaction) -> None:
        head = tx.head()
        for projector in self._projectors:
            row = sql.CHECKPOINT_GET.first(self._db, (projector.name,))
            reason = self._staleness(tx, projector, row, head.position)
            if reason is None:
                continue
            if row is not None:
                log.warning("projector_rebuild", projector=projector.name, reason=reason)
            elif kept := tables_kept(self._db, projector):
                reason = f"no checkpoint, though its tables are kept ({', '.join(kept)})"
                log.warning("projector_rebuild", projector=projector.name, reason=reason)
            self._recreate(projector)
            self._db.execute(
                sql.CHECKPOINT_PUT,
                (projector.name, projector.version, 0, genesis_of(self._log).hex()),
            )

    @staticmethod
    def _staleness(
        tx: LogTransaction, projector: Projector, row: sql.Checkpoint | None, head: int
    ) -> str | None:
        if row is None:
            return "new"
        if row.version != projector.version:
            return f"version {row.version!r} -> {projector.version}"
        at = row.head()
        if at is None:
            return "its checkpoint names no log position"
        if at.position > head:
            return f"checkpoint at {at.position} is past the log head {head}"
        if at.position and chain_at(tx, at.position) != at.chain_hash:
            return f"checkpoint at {at.position} does not match the log"
        return None

    def _catch_up(self, tx: LogTransaction) -> None:
        found = checkpoint_rows(self._db)
        applied = {
            p.name: at.position
            for p in self._projectors
            if (at := folded_to(found.get(p.name), p)) is not None
        }
        head = tx.head().position
        lowest = min(applied.get(name, 0) for name in self._names)
        if lowest >= head:
            return
        log.info("projection_catch_up", from_position=lowest, to_position=head)
        for batch in batches(tx.read(after=lowest, until=head)):
            for projector in self._projectors:
                unseen = [r for r in batch if r.position > applied[projector.name]]
                if unseen:
                    projector.apply(self._db, unseen)
                    last = unseen[-1]
                    self._db.execute(
                        sql.CHECKPOINT_ADVANCE, (last.position, last.chain_hash, projector.name)
                    )
                    applied[projector.name] = last.position

    def replace(self, source: Queryable, folded: Head) -> int:
        """Replace every projector's tables with `source`'s (a read model folded from this log
        up to `folded`), fold what was appended since, and reset the checkpoints: one write
        transaction, so readers see the old read model or the new one, and no append is lost.
        Returns the position the read model is at afterwards."""
        with self._log.transaction() as tx:
            if folded.position and chain_at(tx, folded.position) != folded.chain_hash:
                raise CorruptLogError(
                    f"the log changed at or before position {folded.position} while the read "
                    "model was being refolded; nothing was replaced",
                    position=folded.position,
                )
            copy_tables(self._db, source, self._projectors)
            for batch in batches(tx.read(after=folded.position)):
                for projector in self._projectors:
                    projector.apply(self._db, batch)
            head = tx.head()
            reset_checkpoints(self._db, self._projectors, head)
        return head.position

    def _recreate(self, projector: Projector) -> None:
        """Drop a projector's tables and create them empty."""
        recreate(self._db, projector)

    @contextmanager
    def transaction(self) -> Iterator[FileTransaction]:
        """A write transaction whose appends are folded by every projector before commit."""
        with self._log.transaction() as tx:
            yield FileTransaction(self, tx)

    def _append(
        self, tx: LogTransaction, events: Sequence[NewEvent]
    ) -> tuple[list[RecordedEvent], int]:
        """Append and fold `events`; return them as recorded, and the log's head after them."""
        before = self._ensure_current(tx)
        records = tx.append_many(events)
        if _links_handed(type(tx)):
            self._merkle.note(cast(LinkingTransaction, tx).take_links())
        new = [r for r in records if r.position > before]
        if not new:
            return records, before
        advance(self._db, self._projectors, new)
        if before // MERKLE_STEP != new[-1].position // MERKLE_STEP:
            self._merkle.follow(new[-1].position)
        if self._verified is not None:
            last = Head(position=new[-1].position, chain_hash=new[-1].chain_hash)
            self._verified = (self._verified[0], last)
        return records, new[-1].position

    def _ensure_current(self, tx: LogTransaction) -> int:
        """The log's head in `tx`, the read model folded up to it first: caught up after an
        append around the API, refolded where its checkpoints were edited or emptied."""
        if not self._known_current(tx, with_head=True):
            self._refresh(tx)
            self._verified = None
        return tx.head().position


@functools.cache
def _links_handed(kind: type) -> bool:
    """Whether a transaction of this kind hands over its appends' links (asked once per
    kind: checking a runtime protocol costs more than a small append)."""
    return issubclass(kind, LinkingTransaction)


class FileTransaction:
    """Appends that are projected inline, and read-model queries, in one write transaction."""

    def __init__(self, projection: Projection, tx: LogTransaction) -> None:
        self._projection = projection
        self._tx = tx
        self._current = False
        self._head: int | None = None

    def append(self, events: Sequence[NewEvent]) -> list[RecordedEvent]:
        """Append events and fold them into every projector."""
        records, self._head = self._projection._append(self._tx, events)
        self._current = True
        return records

    def head_position(self) -> int:
        """The log's last position, including this transaction's appends."""
        if self._head is None:
            self._head = self._tx.head().position
        return self._head

    def erase_texts(self, erasure_position: int, positions: Sequence[int]) -> int:
        """Remove from the log's file the texts the erasure at `erasure_position` names,
        once folded with effect; return how many were still stored."""
        if not isinstance(self._tx, ErasingTransaction):
            raise StorageError("this log cannot remove texts")
        return self._tx.erase_texts(erasure_position, positions)

    def execute(self, statement: str, params: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        """Query the read model, caught up to the log first, inside this transaction (a
        statement that writes is refused: the projectors write the read model)."""
        if not self._current:
            self._projection._ensure_current(self._tx)
            self._current = True
        return self._projection.database.query(statement, params)
