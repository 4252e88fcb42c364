"""`rebuild`: refold every projection from the log into a shadow file, compare, optionally swap.

The shadow is a temporary SQLite file beside the database (no journal, no fsync), deleted
afterwards, so memory stays flat however long the log is. The comparison runs inside one read
snapshot of the log: the shadow is caught up to that snapshot's head, then every table is
digested on both sides, a chunk at a time. With `swap=True`, one write transaction of the log
(`Projection.replace`) recreates the live tables, copies the shadow's rows in, folds whatever
was appended since the comparison, and resets every projector's checkpoint: no append is
lost, and no reader ever sees a half-swapped read model.
"""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

import msgspec
import structlog

from eventlog import Head, InvalidTypeError, ReadSnapshot, RecordedEvent, open_log
from projections import default_projectors, sql
from projections.projector import Projection, Projector
from projections.scratch import ScratchDatabase
from projections.tables import table_digest, table_exists

log = structlog.get_logger("factledger.replay")

BATCH_EVENTS = 8192
"""Events folded per projector call: large batches let projectors insert rows in bulk."""
Progress = Callable[[int, int], None]


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
        with ScratchDatabase.beside(path) as shadow:
            for projector in projectors:
                projector.create(shadow)
            begun = event_log.head().position
            _fold(shadow, projectors, event_log.read(until=begun), progress, begun)
            with event_log.snapshot() as snap:
                head = snap.head()
                _fold(
                    shadow,
                    projectors,
                    snap.read(after=begun, until=head.position),
                    progress,
                    head.position,
                )
                stale = _stale_checkpoints(snap, projectors, head)
                tables = _compare(snap, shadow, projectors)
            swapped_at = _swap(path, shadow, projectors, head) if swap else None
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
    snap: ReadSnapshot, shadow: ScratchDatabase, projectors: Sequence[Projector]
) -> list[TableComparison]:
    comparisons = []
    for table in (t for p in projectors for t in p.tables):
        live = table_digest(snap, table) if table_exists(snap, table) else None
        rebuilt = table_digest(shadow, table)
        comparisons.append(
            TableComparison(table=table, live=live, rebuilt=rebuilt, matches=live == rebuilt)
        )
    return comparisons


def _fold(
    shadow: ScratchDatabase,
    projectors: Sequence[Projector],
    events: Iterable[RecordedEvent],
    progress: Progress | None,
    until: int,
) -> None:
    """Apply `events` (up to position `until`) to every projector, in one transaction."""
    with shadow.bulk():
        for batch in _batches(events):
            for projector in projectors:
                projector.apply(shadow, batch)
            if progress is not None:
                progress(batch[-1].position, until)


def _swap(path: Path, shadow: ScratchDatabase, projectors: Sequence[Projector], head: Head) -> int:
    """Replace the live tables with the shadow's through the log's own write transaction."""
    live = open_log(path)
    try:
        position = Projection(live, projectors).replace(shadow, head)
    finally:
        live.close()
    log.info("rebuild_swapped", position=position, appended_meanwhile=position - head.position)
    return position


def _batches(events: Iterable[RecordedEvent]) -> Iterator[list[RecordedEvent]]:
    iterator = iter(events)
    while batch := list(itertools.islice(iterator, BATCH_EVENTS)):
        yield batch
