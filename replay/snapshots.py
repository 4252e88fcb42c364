"""Snapshots of a ledger's read model (`projections.internal` has how they are written,
checked and folded from): where they live, writing them (`snapshot`, and one at each
checkpoint once there are any), holding them to a refold (`check_snapshots`), and a past
position folded from the nearest one (`folded_past`), which time travel, `diff` and
`history --at` read.

They live beside the read model: `<log file>.snapshots/` for a file log, `<cache>.snapshots/`
for a host's cache of a log in PostgreSQL; a read model in memory keeps none.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from eventlog import Head, InvalidInputError, LogSnapshot, chain_at
from eventlog.checks import check_position, is_dsn
from eventlog.stored import LogUpTo, genesis_of
from projections.internal import (
    SNAPSHOT_EVERY,
    SNAPSHOT_KEEP,
    KnowledgeProjector,
    Projector,
    Queryable,
    SnapshotCheck,
    SnapshotsTaken,
    check_snapshot_files,
    default_projectors,
    folded_at,
    inquiries,
    planned_snapshots,
    snapshot_directory,
    take_snapshots,
)

if TYPE_CHECKING:
    from replay.ledger import Ledger

Progress = Callable[[int, int], None]


def directory_of(ledger: Ledger) -> Path | None:
    """Where `ledger`'s snapshots live (None: a read model in memory, which keeps none)."""
    if ledger.cache is not None:
        return snapshot_directory(ledger.cache)
    if is_dsn(ledger.target):
        return None
    return snapshot_directory(ledger.target)


def kept(ledger: Ledger) -> tuple[Path | None, int]:
    """Where `ledger`'s snapshots are, if any are, and the log's latest erasure (checked only
    then: it reads the read model at the head)."""
    directory = directory_of(ledger)
    if directory is None or not directory.is_dir():
        return None, 0
    return directory, latest_erasure(ledger)


def latest_erasure(ledger: Ledger) -> int:
    """The position of the log's latest erasure that took effect (0: none): a snapshot
    written before it may hold a text it removed."""
    with ledger.at_head([KnowledgeProjector(ledger.log_id)]) as (_, model):
        return inquiries.latest_erasure(model)


def snapshot(
    ledger: Ledger,
    *,
    every: int = SNAPSHOT_EVERY,
    keep: int = SNAPSHOT_KEEP,
    progress: Progress | None = None,
) -> SnapshotsTaken:
    """Write the snapshots at the newest `keep` multiples of `every` up to the log's head
    that are missing, folding once from the newest usable snapshot before them (or from the
    first event); then remove all but the newest `keep`. `progress(position, last)` is called
    after each batch folded. Refused by a ledger opened read-only."""
    ledger.require_writable("a snapshot writes snapshot files")
    directory = _directory(ledger)
    positions = planned_snapshots(ledger.event_log.head().position, every, keep)
    return take_snapshots(
        ledger.event_log,
        default_projectors(ledger.log_id),
        directory,
        positions,
        keep=keep,
        erased_after=latest_erasure(ledger),
        progress=progress,
    )


def snapshot_at_head(ledger: Ledger, *, required: bool = False) -> SnapshotsTaken | None:
    """After a checkpoint: a snapshot at the log's head, for a writable ledger whose
    snapshots are enabled (their directory exists, made by `snapshot`), or always when
    `required` (refused by a ledger opened read-only); None when none was due."""
    if required:
        ledger.require_writable("a snapshot writes a snapshot file")
        directory = _directory(ledger)
    else:
        found = directory_of(ledger)
        if ledger.read_only or found is None or not found.is_dir():
            return None
        directory = found
    head = ledger.event_log.head().position
    if not head:
        return None
    return take_snapshots(
        ledger.event_log,
        default_projectors(ledger.log_id),
        directory,
        [head],
        keep=None,
        erased_after=latest_erasure(ledger),
    )


def check_snapshots(ledger: Ledger, *, progress: Progress | None = None) -> list[SnapshotCheck]:
    """Each snapshot held to the log refolded up to its position, table by table, in one
    fold from the first event (in a temporary file): a row edited in a snapshot shows as a
    table that differs. Only reads."""
    directory = directory_of(ledger)
    return check_snapshot_files(
        ledger.event_log,
        default_projectors(ledger.log_id),
        directory,
        erased_after=latest_erasure(ledger),
        progress=progress,
    )


def past_position(ledger: Ledger, position: object) -> int:
    """`position` checked as a position of the log now (not past its head)."""
    target = check_position("position", position)
    head = ledger.event_log.head().position
    if target > head:
        raise InvalidInputError(f"position {target} is past the log head {head}")
    return target


@contextmanager
def folded_past(
    ledger: Ledger, position: int, projectors: Sequence[Projector]
) -> Iterator[tuple[LogSnapshot, Queryable]]:
    """The log read as of `position`, and `projectors`' tables there, folded from the
    nearest usable snapshot (sealed: reads only)."""
    event_log = ledger.event_log
    directory, erased_after = kept(ledger)
    folded = folded_at(
        event_log, position, projectors, directory=directory, erased_after=erased_after
    )
    try:
        folded.database.seal()
        chain = chain_at(event_log, position) if position else genesis_of(event_log).hex()
        head = Head(position=position, chain_hash=chain or "")
        yield LogUpTo(event_log, head), folded.database
    finally:
        folded.close()


def _directory(ledger: Ledger) -> Path:
    directory = directory_of(ledger)
    if directory is None:
        raise InvalidInputError(
            "a read model in memory keeps no snapshots: open a log file, or a log in "
            "PostgreSQL with this host's cache (cache=...)"
        )
    return directory
