"""`rebuild`: refold every projection from the log into a shadow file, compare, optionally swap.

The shadow is a temporary SQLite file beside the database (no journal, no fsync), deleted
afterwards, so memory stays flat however long the log is. The live side is read inside one
snapshot of the log and the shadow is folded up to exactly that snapshot's head; then every
table is digested on both sides, a chunk at a time. On a large log a worker interpreter holds
that snapshot and digests the live side while this process folds the shadow. With
`swap=True`, one write transaction of the log (`Projection.replace`) recreates the live
tables, copies the shadow's rows in, folds whatever was appended since the comparison, and
resets every projector's checkpoint: no append is lost, and no reader ever sees a
half-swapped read model.
"""

from __future__ import annotations

import functools
import itertools
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from multiprocessing.connection import Connection
from pathlib import Path

import msgspec

from eventlog import EventLog, Head, InvalidTypeError, ReadSnapshot, RecordedEvent, open_log
from eventlog.chain import genesis
from eventlog.logs import get_logger
from projections import default_projectors, sql
from projections.projector import Projection, Projector
from projections.scratch import ScratchDatabase
from projections.tables import table_digest, table_exists
from replay import workers

log = get_logger("factledger.replay")

MIN_WORKER_EVENTS = 50_000
"""Fewest events for which the live side is digested by a worker interpreter meanwhile."""
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
        begun = event_log.head().position
        with ScratchDatabase.beside(path) as shadow, _live_side(path, begun) as worker:
            for projector in projectors:
                projector.create(shadow)
            fold = functools.partial(_fold, shadow, projectors, progress=progress)
            fold(event_log.read(until=begun), begun)
            head, live = _catch_up_to_the_live_side(event_log, fold, begun, worker, projectors)
            tables = _compare(live.digests, shadow, projectors)
            swapped_at = _swap(path, shadow, projectors, head) if swap else None
    finally:
        event_log.close()
    seconds = time.perf_counter() - start
    events = head.position if swapped_at is None else swapped_at
    matches = not live.stale and all(t.matches for t in tables)
    log.info("rebuild_done", events=events, seconds=round(seconds, 3), matches=matches)
    return RebuildReport(
        events=events,
        seconds=seconds,
        events_per_second=events / seconds if seconds > 0 else 0.0,
        matches=matches,
        compared_at=head.position,
        swapped=swap,
        swapped_at=swapped_at,
        stale_checkpoints=live.stale,
        tables=tables,
    )


def _catch_up_to_the_live_side(
    event_log: EventLog,
    fold: Callable[[Iterable[RecordedEvent], int], int | None],
    folded: int,
    worker: _LiveSide,
    projectors: Sequence[Projector],
) -> tuple[Head, _Live]:
    """Fold the shadow up to the head the live side is digested at; digest the live side
    (the worker's result, or here in one snapshot if there is no worker or it failed)."""
    head = worker.head()
    if head is not None and head.position >= folded:
        folded = fold(event_log.read(folded, until=head.position), head.position) or folded
        live = worker.result()
        if live is not None and _chain_at(event_log, head.position) == head.chain_hash:
            return head, live
        if live is not None:
            log.warning("rebuild_worker_read_another_log", position=head.position)
    with event_log.snapshot() as snap:
        head = snap.head()
        fold(snap.read(folded, until=head.position), head.position)
        return head, _live_digests(snap, projectors, head)


def _chain_at(event_log: EventLog, position: int) -> str | None:
    """The chain hash this log has at `position` (the genesis at 0; None past its head)."""
    if position == 0:
        return genesis(event_log.log_id).hex()
    row = next(iter(event_log.scan(position - 1, position)), None)
    return None if row is None else row.chain_hash.hex()


class _Live(msgspec.Struct, frozen=True, kw_only=True):
    """The live read model in one snapshot: stale checkpoints and each table's digest."""

    stale: list[str]
    digests: dict[str, str | None]
    """None for a table that is missing."""


def _live_digests(snap: ReadSnapshot, projectors: Sequence[Projector], head: Head) -> _Live:
    """Digest the live read model inside `snap`, whose head is `head`."""
    return _Live(
        stale=_stale_checkpoints(snap, projectors, head),
        digests={
            table: table_digest(snap, table) if table_exists(snap, table) else None
            for projector in projectors
            for table in projector.tables
        },
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
    live: dict[str, str | None], shadow: ScratchDatabase, projectors: Sequence[Projector]
) -> list[TableComparison]:
    comparisons = []
    for table in (t for p in projectors for t in p.tables):
        rebuilt = table_digest(shadow, table)
        comparisons.append(
            TableComparison(
                table=table, live=live[table], rebuilt=rebuilt, matches=live[table] == rebuilt
            )
        )
    return comparisons


# -- the live side in a worker interpreter ------------------------------------------------


class _Message(msgspec.Struct, frozen=True, kw_only=True):
    """From the worker: the head of its snapshot, then the live side; or why it failed."""

    head: Head | None = None
    live: _Live | None = None
    error: str | None = None


_ENCODER = msgspec.msgpack.Encoder()
_DECODER = msgspec.msgpack.Decoder(_Message)
_WORKER_CODE = "from replay.rebuild import _worker_main; _worker_main()"


class _LiveSide:
    """The worker digesting the live read model while this process folds the shadow."""

    def __init__(self, pipe: Connection | None) -> None:
        self._pipe = pipe

    def head(self) -> Head | None:
        """The head of the worker's snapshot (what the shadow must be folded to), or None."""
        message = self._next()
        return None if message is None else message.head

    def result(self) -> _Live | None:
        """The live side at that head, or None if the worker failed."""
        message = self._next()
        return None if message is None else message.live

    def _next(self) -> _Message | None:
        if self._pipe is None:
            return None
        message = workers.receive(self._pipe, _DECODER)
        if message is None or message.error is not None:
            log.warning("rebuild_worker_failed", error=None if message is None else message.error)
            self._pipe = None
            return None
        return message


@contextmanager
def _live_side(path: Path, events: int) -> Iterator[_LiveSide]:
    """A worker for the live side when the log is large enough to be worth one."""
    if events < MIN_WORKER_EVENTS or not workers.available():
        yield _LiveSide(None)
        return
    with workers.interpreters(_WORKER_CODE, [[str(path)]]) as pipes:
        yield _LiveSide(pipes[0])


def _worker_main() -> None:
    """A worker interpreter: digest the live read model in one snapshot, report on a pipe."""

    def digest(send: workers.Send) -> None:
        event_log = open_log(sys.argv[1], read_only=True)
        try:
            with event_log.snapshot() as snap:
                head = snap.head()
                send(_ENCODER.encode(_Message(head=head)))
                live = _live_digests(snap, default_projectors(), head)
        finally:
            event_log.close()
        send(_ENCODER.encode(_Message(live=live)))

    workers.serve(digest, lambda reason: _ENCODER.encode(_Message(error=reason)))


def _fold(
    shadow: ScratchDatabase,
    projectors: Sequence[Projector],
    events: Iterable[RecordedEvent],
    until: int,
    *,
    progress: Progress | None,
) -> int | None:
    """Apply `events` (up to position `until`) to every projector, in one transaction.
    Returns the last position folded (None if there were no events)."""
    last = None
    with shadow.bulk():
        for batch in _batches(events):
            for projector in projectors:
                projector.apply(shadow, batch)
            last = batch[-1].position
            if progress is not None:
                progress(last, until)
    return last


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
