"""Time travel: a read-only view showing the knowledge base as it was at a past point.

The point is a log position, or a wall-clock time. `ts_ns` is attribution, not order: clocks
skew and tie, so events are not sorted by it. A time selects the highest position whose event
has `ts_ns` at or before it, and the view shows the state right after that position, every
earlier position included (even one stamped later than the time).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from eventlog import InvalidInputError, LogSnapshot
from eventlog.checks import check_ts_ns
from projections import (
    MemoryView,
)
from projections.internal import (
    view_at,
)
from replay.snapshots import kept, past_position

if TYPE_CHECKING:
    from replay.ledger import Ledger


def as_of(ledger: Ledger, *, position: int | None = None, ts_ns: int | None = None) -> MemoryView:
    """A read-only view showing the state right after `position`, or right after the highest
    position whose event has `ts_ns` at or before the given `ts_ns`. Give exactly one.

    `CrossTaskKB(view, run_id=...)` over it subscribes and lists history as it would have then;
    every write through it raises `ReadOnlyStoreError`. It is folded from the nearest usable
    snapshot at or before the point (`replay.snapshots`; the view's `folded_from` and
    `events_folded` say which), else in memory from the first event; either way it stays
    usable after the ledger closes. Close it when done.
    """
    if (position is None) == (ts_ns is None):
        raise InvalidInputError("as_of needs exactly one of position and ts_ns")
    event_log = ledger.event_log
    if position is not None:
        target = past_position(ledger, position)
    else:
        with event_log.snapshot() as snap:
            target = _position_at(snap, check_ts_ns(ts_ns))
    directory, erased_after = kept(ledger)
    return view_at(
        event_log, target, db_path=ledger.target, snapshots=directory, erased_after=erased_after
    )


def _position_at(snap: LogSnapshot, ts_ns: int) -> int:
    """The highest position whose event has `ts_ns` at or before the given one (0 if none)."""
    found = 0
    for record in snap.read():
        if record.ts_ns <= ts_ns:
            found = record.position
    return found
