"""`rebuild`: refold every projection from the log into a shadow file, compare, optionally swap.

The shadow is a temporary SQLite file beside the database (no journal, no fsync), deleted
afterwards, so memory stays flat however long the log is. The comparison runs inside one read
snapshot of the log: the shadow is caught up to that snapshot's head, then every table is
digested on both sides, a chunk at a time. With `swap=True`, one write transaction (holding
the log's write lock, with the shadow ATTACHed) recreates the live tables, copies the shadow's
rows in, folds whatever was appended since the comparison, and resets every projector's
checkpoint to the position and chain hash folded: no append is lost, and no reader ever sees
a half-swapped read model.
"""

from __future__ import annotations

import itertools
import os
import sqlite3
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

import msgspec
import structlog

from eventlog import (
    EventLog,
    Head,
    InvalidTypeError,
    ReadSnapshot,
    RecordedEvent,
    StorageError,
    open_log,
)
from eventlog.sqlite import translate
from projections import default_projectors, sql
from projections.projector import Projector
from projections.reads import Row
from projections.tables import table_digest, table_exists

log = structlog.get_logger("factledger.replay")

BATCH_EVENTS = 8192
"""Events folded per projector call: large batches let projectors insert rows in bulk."""
SHADOW_CACHE_KIB = 65536
"""Page cache of the shadow file; bounded, so memory does not grow with the log."""
BUSY_TIMEOUT_S = 30.0
Progress = Callable[[int, int], None]
_DROP = "DROP TABLE IF EXISTS main.{table}"
_COPY = "INSERT INTO main.{table} SELECT * FROM shadow.{table}"
_ATTACH = "ATTACH DATABASE ? AS shadow"


class TableComparison(msgspec.Struct, frozen=True, kw_only=True):
    """One projector table: the live digest (None when the table is missing) and the rebuilt."""

    table: str
    live: str | None
    rebuilt: str
    matches: bool


class RebuildReport(msgspec.Struct, frozen=True, kw_only=True):
    """What a rebuild folded, how fast, and whether the live read model equals the refold."""

    events: int
    """Events folded into the shadow (including any appended during the rebuild)."""
    seconds: float
    events_per_second: float
    matches: bool
    """Every table's digests are equal and every live checkpoint is at `compared_at`."""
    compared_at: int
    """The log position both sides were digested at."""
    swapped: bool
    swapped_at: int | None
    """The position the live tables and checkpoints were reset to, when swapped."""
    stale_checkpoints: list[str]
    """Projectors whose live checkpoint is not at `compared_at` (missing, behind, other version)."""
    tables: list[TableComparison]


def rebuild(
    db_path: str | os.PathLike[str], *, swap: bool = False, progress: Progress | None = None
) -> RebuildReport:
    """Refold every projection from the log, compare it with the live read model, and with
    `swap=True` replace the live tables with the refold (repairing any drift).

    `progress(position, head)` is called after each batch of events folded into the shadow.
    """
    if not isinstance(swap, bool):
        raise InvalidTypeError(f"swap must be a bool, not {type(swap).__name__}")
    path = Path(db_path)
    projectors = default_projectors()
    start = time.perf_counter()
    event_log = open_log(path, read_only=True)
    try:
        with _Shadow(path) as shadow:
            for projector in projectors:
                projector.create(shadow)
            begun = event_log.head().position
            shadow.fold(projectors, event_log.read(until=begun), progress, begun)
            with event_log.snapshot() as snap:
                head = snap.head()
                shadow.fold(
                    projectors, snap.read(after=begun, until=head.position), progress, head.position
                )
                stale = _stale_checkpoints(snap, projectors, head)
                tables = _compare(snap, shadow, projectors)
            swapped_at = _swap(path, shadow, projectors, event_log, head) if swap else None
    finally:
        event_log.close()
    seconds = time.perf_counter() - start
    events = head.position if swapped_at is None else swapped_at
    matches = not stale and all(t.matches for t in tables)
    log.info("rebuild_done", events=events, seconds=round(seconds, 3), matches=matches)
    return RebuildReport(
        events=events,
        seconds=seconds,
        events_per_second=events / seconds if seconds > 0 else 0.0,
        matches=matches,
        compared_at=head.position,
        swapped=swap,
        swapped_at=swapped_at,
        stale_checkpoints=stale,
        tables=tables,
    )


def _stale_checkpoints(
    snap: ReadSnapshot, projectors: Sequence[Projector], head: Head
) -> list[str]:
    if not snap.execute(sql.CHECKPOINT_TABLE_EXISTS):
        return [p.name for p in projectors]
    return [
        p.name
        for p in projectors
        if [(p.version, head.position, head.chain_hash)]
        != [tuple(row) for row in snap.execute(sql.CHECKPOINT_GET, (p.name,))]
    ]


def _compare(
    snap: ReadSnapshot, shadow: _Shadow, projectors: Sequence[Projector]
) -> list[TableComparison]:
    comparisons = []
    for table in (t for p in projectors for t in p.tables):
        live = table_digest(snap, table) if table_exists(snap, table) else None
        rebuilt = table_digest(shadow, table)
        comparisons.append(
            TableComparison(table=table, live=live, rebuilt=rebuilt, matches=live == rebuilt)
        )
    return comparisons


def _swap(
    path: Path, shadow: _Shadow, projectors: Sequence[Projector], event_log: EventLog, head: Head
) -> int:
    """Replace the live tables with the shadow's, fold the events appended since `head` into
    them, and reset the checkpoints, in one write transaction; return the position folded."""
    where = f"database {path}"
    try:
        conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
    except sqlite3.Error as exc:
        raise translate(exc, "open", where) from None
    live = _Connection(conn, where)
    try:
        live.execute(_ATTACH, (str(shadow.path),))
        live.execute("BEGIN IMMEDIATE")
        tables = [t for p in projectors for t in p.tables]
        for table in tables:
            live.execute(_DROP.format(table=table))
        for projector in projectors:
            projector.create(live)
        for table in tables:
            live.execute(_COPY.format(table=table))
        end = event_log.head()
        for batch in _batches(event_log.read(after=head.position, until=end.position)):
            for projector in projectors:
                projector.apply(live, batch)
        live.execute(sql.CHECKPOINT_DDL)
        for projector in projectors:
            live.execute(
                sql.CHECKPOINT_PUT,
                (projector.name, projector.version, end.position, end.chain_hash),
            )
        live.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.rollback()
        raise
    finally:
        conn.close()
    log.info(
        "rebuild_swapped", position=end.position, appended_meanwhile=end.position - head.position
    )
    return end.position


class _Connection:
    """A sqlite3 connection as a projector's `TableWriter`, with errors translated."""

    def __init__(self, conn: sqlite3.Connection, where: str) -> None:
        self._conn = conn
        self._cursor = conn.cursor()
        self._where = where

    def execute(self, statement: str, params: Sequence[object] = ()) -> list[Row]:
        try:
            return self._cursor.execute(statement, params).fetchall()
        except sqlite3.Error as exc:
            raise translate(exc, "rebuild", self._where) from None

    def executemany(self, statement: str, rows: Iterable[Sequence[object]]) -> None:
        try:
            self._cursor.executemany(statement, rows)
        except sqlite3.Error as exc:
            raise translate(exc, "rebuild", self._where) from None


class _Shadow(_Connection):
    """The shadow read model: a temporary SQLite file beside the database, deleted on exit."""

    def __init__(self, beside: Path) -> None:
        try:
            handle, name = tempfile.mkstemp(
                prefix=f".{beside.name}.rebuild-", suffix=".tmp", dir=beside.parent
            )
        except OSError as exc:
            raise StorageError(f"cannot create a rebuild shadow beside {beside}: {exc}") from None
        os.close(handle)
        self.path = Path(name)
        try:
            conn = sqlite3.connect(name, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA journal_mode=OFF")
            conn.execute("PRAGMA synchronous=OFF")
            conn.execute(f"PRAGMA cache_size=-{SHADOW_CACHE_KIB}")
        except sqlite3.Error as exc:
            self.path.unlink(missing_ok=True)
            raise translate(exc, "create", f"rebuild shadow {name}") from None
        super().__init__(conn, f"rebuild shadow {name}")

    def fold(
        self,
        projectors: Sequence[Projector],
        events: Iterable[RecordedEvent],
        progress: Progress | None,
        until: int,
    ) -> None:
        """Apply `events` (up to position `until`) to every projector, in one transaction."""
        self.execute("BEGIN")
        try:
            for batch in _batches(events):
                for projector in projectors:
                    projector.apply(self, batch)
                if progress is not None:
                    progress(batch[-1].position, until)
            self.execute("COMMIT")
        except BaseException:
            self._conn.rollback()
            raise

    def __enter__(self) -> _Shadow:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._conn.close()
        self.path.unlink(missing_ok=True)


def _batches(events: Iterable[RecordedEvent]) -> Iterator[list[RecordedEvent]]:
    iterator = iter(events)
    while batch := list(itertools.islice(iterator, BATCH_EVENTS)):
        yield batch
