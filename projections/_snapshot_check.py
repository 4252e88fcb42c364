"""Snapshots held to the log: each one's tables compared with the log refolded up to its
position (`factledger snapshot --check`). One fold from the first event, in a temporary
file outside the log's directory, serves every snapshot, oldest first; a row edited in a
snapshot shows as a table whose digest differs. Only reads the log and the snapshots."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import msgspec

from eventlog import EventLog, FactledgerError
from projections._comparison import compare_tables, table_digests
from projections._database import ScratchDatabase, open_read_only
from projections._projector import Projector, batches, fold
from projections._snapshots import listed, plain_file, problem

Progress = Callable[[int, int], None]


class SnapshotCheck(msgspec.Struct, frozen=True, kw_only=True):
    """One snapshot held to the log."""

    position: int
    file: str
    usable: bool
    """Its meta holds against the log (else it is never used, and not compared)."""
    reason: str | None
    """Why it is not usable."""
    matches: bool
    """Usable, and every table equals the log refolded up to its position."""
    differing: list[str]
    """The tables that differ."""


def check_snapshot_files(
    event_log: EventLog,
    projectors: Sequence[Projector],
    directory: Path | None,
    *,
    erased_after: int = 0,
    progress: Progress | None = None,
) -> list[SnapshotCheck]:
    """Each snapshot in `directory`, oldest first, held to the log refolded."""
    head = event_log.head().position
    found = sorted(listed(directory))
    tables = [t for p in projectors for t in p.tables]
    checks = []
    last = found[-1][0] if found else 0
    with ScratchDatabase.beside(Path(tempfile.gettempdir()) / "factledger") as fresh:
        with fresh.bulk():
            fold(fresh, projectors, ())
        at = 0
        for position, path in found:
            if not plain_file(path):
                checks.append(_unusable(position, path, "not a plain file"))
                continue
            try:
                db = open_read_only(path)
            except FactledgerError as exc:
                checks.append(_unusable(position, path, f"unreadable: {type(exc).__name__}"))
                continue
            try:
                reason = problem(db, event_log, projectors, position, head, erased_after)
                if reason is not None:
                    checks.append(_unusable(position, path, reason))
                    continue
                with fresh.bulk():
                    for batch in batches(event_log.read(after=at, until=position)):
                        for projector in projectors:
                            projector.apply(fresh, batch)
                        if progress is not None:
                            progress(batch[-1].position, last)
                at = position
                compared = compare_tables(table_digests(db, tables), fresh, tables)
            except FactledgerError as exc:
                checks.append(_unusable(position, path, f"unreadable: {type(exc).__name__}"))
                continue
            finally:
                db.close()
            differing = [c.table for c in compared if not c.matches]
            checks.append(
                SnapshotCheck(
                    position=position,
                    file=path.name,
                    usable=True,
                    reason=None,
                    matches=not differing,
                    differing=differing,
                )
            )
    return checks


def _unusable(position: int, path: Path, reason: str) -> SnapshotCheck:
    return SnapshotCheck(
        position=position, file=path.name, usable=False, reason=reason, matches=False, differing=[]
    )
