"""`rebuild`: refold every projection from the log into a shadow file, compare, optionally swap.

The shadow is a temporary SQLite file beside the database (no journal, no fsync), deleted
afterwards, so memory stays flat however long the log is. The live side is read inside one
snapshot of the log and the shadow is folded up to exactly that snapshot's head; then every
table is digested on both sides, a chunk at a time. With `swap=True`, one write transaction
of the log (`Projection.replace`) recreates the live tables, copies the shadow's rows in,
folds whatever was appended since the comparison, and resets every projector's checkpoint:
no append is lost, and no reader ever sees a half-swapped read model. A swap also rebuilds
the log's Merkle index kept beside the read model from the log (`projections.internal.MerkleIndex`).

A host's cache of a log held elsewhere is rebuilt alike, into a fresh cache file beside it:
the shadow folds the log's events only once their chain links (`projections.linked_events`)
and is compared with the cache at the position the cache shows; a swap replaces the cache's
tables in one cache transaction (`CacheProjection.replace`). Comparing only reads; a swap is
a write, which a `Ledger` opened read-only refuses.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from eventlog import (
    EventLog,
    Head,
    InvalidInputError,
    InvalidTypeError,
    RecordedEvent,
    SQLiteEventLog,
)
from eventlog.logs import get_logger
from projections.internal import (
    MerkleIndex,
    Projection,
    Projector,
    ScratchDatabase,
    TableComparison,
    batches,
    compare_tables,
    default_projectors,
    index_in_cache,
    index_in_log_file,
    linked_events,
    table_digests,
)

if TYPE_CHECKING:
    from replay.ledger import Ledger

log = get_logger("factledger.replay")

Progress = Callable[[int, int], None]


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
    ledger: Ledger, *, swap: bool = False, progress: Progress | None = None
) -> RebuildReport:
    """Refold every projection from the log, compare it with the live read model (the log
    file's, or this host's cache of a log in PostgreSQL), and with `swap=True` replace the
    live tables with the refold (repairing any drift). `progress(position, head)` is called
    after each batch of events folded into the shadow.
    """
    if not isinstance(swap, bool):
        raise InvalidTypeError(f"swap must be a bool, not {type(swap).__name__}")
    if swap:
        ledger.require_writable("a rebuild with swap replaces the read model")
    start = time.perf_counter()
    if ledger.cache is None:
        head, live, tables, swapped_at = _rebuild_file(ledger, swap, progress)
    else:
        head, live, tables, swapped_at = _rebuild_cache(ledger, ledger.cache, swap, progress)
    if swapped_at is not None:
        _rebuild_merkle_index(ledger, swapped_at)
    seconds = time.perf_counter() - start
    if swapped_at is not None:
        meanwhile = swapped_at - head.position
        log.info("rebuild_swapped", position=swapped_at, appended_meanwhile=meanwhile)
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


_Outcome = tuple[Head, "_Live", list[TableComparison], int | None]
"""The position compared at, the live side, each table compared, and where a swap left it."""


def _rebuild_file(ledger: Ledger, swap: bool, progress: Progress | None) -> _Outcome:
    """Rebuild the read model kept in the log's own file."""
    event_log = ledger.event_log
    if not isinstance(event_log, SQLiteEventLog):
        raise InvalidInputError(
            "a log held elsewhere keeps no read model of its own: open the ledger with this "
            "host's cache to rebuild it (cache=...)"
        )
    projectors = default_projectors(event_log.log_id)
    begun = event_log.head().position
    with ScratchDatabase.beside(Path(event_log.path)) as shadow:
        for projector in projectors:
            projector.create(shadow)
        folded = _fold(shadow, projectors, event_log.read(until=begun), begun, progress)
        with event_log.snapshot() as snap:
            head = snap.head()
            tail = snap.read(after=folded or 0, until=head.position)
            _fold(shadow, projectors, tail, head.position, progress)
            live = _live_digests(event_log, projectors, head)
        tables = compare_tables(live.digests, shadow, _tables(projectors))
        swapped_at = ledger.read_model.replace(shadow, head) if swap else None
    return head, live, tables, swapped_at


def _rebuild_cache(ledger: Ledger, cache: str, swap: bool, progress: Progress | None) -> _Outcome:
    """Rebuild a host's cache of a log held elsewhere, into a fresh cache file beside it."""
    event_log = ledger.event_log
    projectors = default_projectors(event_log.log_id)
    model = ledger.read_model
    with ScratchDatabase.beside(Path(cache)) as shadow:
        for projector in projectors:
            projector.create(shadow)
        with model.snapshot() as snap:
            head = snap.head()
            events = linked_events(event_log, until=head.position)
            _fold(shadow, projectors, events, head.position, progress)
            stale = [] if model.current_at(head) else [p.name for p in projectors]
            live = _Live(stale=stale, digests=table_digests(snap, _tables(projectors)))
        tables = compare_tables(live.digests, shadow, _tables(projectors))
        swapped_at = model.replace(shadow, head) if swap else None
    return head, live, tables, swapped_at


def _rebuild_merkle_index(ledger: Ledger, head: int) -> None:
    """Rebuild the Merkle index kept beside the read model from the log, up to `head`."""
    event_log = ledger.event_log
    if ledger.cache is None:
        tables = index_in_log_file(event_log, writable=True)
    else:
        tables = index_in_cache(ledger.read_model.database)
    index = MerkleIndex(event_log, tables)
    index.reset()
    index.extend(head)


class _Live(msgspec.Struct, frozen=True, kw_only=True):
    """The live read model in one snapshot: stale checkpoints and each table's digest."""

    stale: list[str]
    digests: dict[str, str | None]
    """None for a table that is missing."""


def _live_digests(event_log: EventLog, projectors: Sequence[Projector], head: Head) -> _Live:
    """Digest the live read model; call inside the log snapshot whose head is `head`."""
    return _Live(
        stale=[p.name for p in projectors if not Projection(event_log, [p]).current_at(head)],
        digests=table_digests(Projection(event_log, projectors).database, _tables(projectors)),
    )


def _tables(projectors: Sequence[Projector]) -> list[str]:
    return [table for projector in projectors for table in projector.tables]


def _fold(
    shadow: ScratchDatabase,
    projectors: Sequence[Projector],
    events: Iterable[RecordedEvent],
    until: int,
    progress: Progress | None,
) -> int | None:
    """Apply `events` (up to position `until`) to every projector, in one transaction.
    Returns the last position folded (None if there were no events)."""
    last = None
    with shadow.bulk():
        for batch in batches(events):
            for projector in projectors:
                projector.apply(shadow, batch)
            last = batch[-1].position
            if progress is not None:
                progress(last, until)
    return last
