"""Snapshots of the read model: every projection's tables at one log position, in a SQLite
file of their own, so that a past state is folded from the nearest snapshot at or before it
instead of from the first event.

A snapshot sits outside the chain and outside the log's file, in a directory beside the log
(or beside a host's cache of a log held elsewhere): `<file>.snapshots/at-<position>.sqlite`.
It is disposable: deleting it loses nothing, and `take` writes it again from the log. Its
meta row (`fl_snapshot`) names the log, the position, the chain value there, the head the
log had when it was written, and each projector's name and version. A snapshot is used only
when every one of those holds against the log now (the chain value compared in constant
time), every projector's table is in it with the schema this code writes (no trigger), it
is a plain file, and no erasure was appended after the head it was
written at (its texts could hold what the erasure removed); anything else is skipped, logged
(never a value) and the next older snapshot tried, down to a fold from the first event.

A fold from a snapshot runs inside one write transaction of the snapshot file that is never
committed (`SnapshotDatabase`): at most the events since the snapshot are folded, whatever
the snapshot holds, and closing rolls them back. A second user of the same file folds into a
copy of it instead (SQLite's backup API, into a temporary file).

A snapshot's rows are not checked when it is used: like the read model in the log's file,
they are trusted once their meta holds, and held to the log by a refold
(`projections._snapshot_check`, `factledger snapshot --check`).
"""

from __future__ import annotations

import hmac
import os
import re
import stat
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import msgspec

from eventlog import (
    EventLog,
    FactledgerError,
    InvalidInputError,
    InvalidTypeError,
    StorageError,
    chain_at,
)
from eventlog.events import ContentErased
from eventlog.logs import get_logger
from projections import _sql_snapshots as sql
from projections._database import ScratchDatabase, SnapshotDatabase, open_read_only
from projections._projector import Projector, batches, fold
from projections._reads import Queryable
from projections._tables import table_exists

log = get_logger("factledger.projections")

FORMAT = 1
"""The layout of a snapshot file this code writes and reads."""
EVERY = 50_000
"""Events between snapshots, by default: a past state folds at most this many events."""
KEEP = 4
"""Snapshots kept, by default (the newest): each holds the whole read model at its position."""
SUFFIX = ".snapshots"
_NAME = re.compile(r"at-([0-9]{1,15})\.sqlite")

Progress = Callable[[int, int], None]
Folding = ScratchDatabase | SnapshotDatabase


def directory_beside(path: str) -> Path | None:
    """Where the snapshots of the read model in (or cached in) `path` live; None for one in
    memory, which keeps none."""
    return None if path == ":memory:" else Path(f"{path}{SUFFIX}")


def snapshot_path(directory: Path, position: int) -> Path:
    """The file of the snapshot at `position`."""
    return directory / f"at-{position:012d}.sqlite"


def listed(directory: Path | None) -> list[tuple[int, Path]]:
    """The snapshot files in `directory` by the position their names give, newest first (a
    directory that is a symbolic link holds none)."""
    if directory is None or directory.is_symlink():
        return []
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    found = [(int(m.group(1)), directory / name) for name in names if (m := _NAME.fullmatch(name))]
    return sorted(found, reverse=True)


def plain_file(path: Path) -> bool:
    """Whether `path` is a regular file of its own: not a symbolic link, a hard link to
    another file (one that opening for a fold would lock or convert), a pipe or a device."""
    try:
        info = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISREG(info.st_mode) and info.st_nlink == 1


def signature(projectors: Sequence[Projector]) -> str:
    """Each projector's name and version, as a snapshot records them."""
    return msgspec.json.encode({p.name: p.version for p in sorted(projectors, key=_name)}).decode()


def _name(projector: Projector) -> str:
    return projector.name


class Folded:
    """A read model folded up to a position: from the snapshot at `folded_from` (0: from the
    first event), `events_folded` events after it. Close it when done."""

    def __init__(self, database: Folding, folded_from: int, events_folded: int) -> None:
        self.database = database
        self.folded_from = folded_from
        self.events_folded = events_folded

    def close(self) -> None:
        """Free the database (a snapshot rolled back and left as it was)."""
        self.database.close()


def folded_at(
    event_log: EventLog,
    position: int,
    projectors: Sequence[Projector],
    *,
    directory: Path | None,
    erased_after: int = 0,
) -> Folded:
    """`projectors`' tables at `position`, folded from the nearest usable snapshot in
    `directory` at or before it (or from the first event), not sealed: the caller may fold on.
    `erased_after` is the position of the log's latest erasure (a snapshot written before it
    is not used)."""
    head = event_log.head().position
    for at, path in listed(directory):
        if at > position:
            continue
        database = _opened(path)
        if database is None:
            continue
        try:
            reason = problem(database, event_log, projectors, at, head, erased_after)
            if reason is None:
                with database.bulk():
                    count = _fold(database, projectors, event_log, at, position, None)
                log.info("snapshot_used", position=at, folded=count)
                return Folded(database, at, count)
        except FactledgerError as exc:
            reason = f"unreadable: {type(exc).__name__}"
        except BaseException:
            database.close()
            raise
        database.close()
        log.warning("snapshot_ignored", snapshot=path.name, reason=reason)
    scratch = ScratchDatabase()
    try:
        with scratch.bulk():
            count = fold(scratch, projectors, event_log.read(until=position))
    except BaseException:
        scratch.close()
        raise
    return Folded(scratch, 0, count)


def problem(
    db: Queryable,
    event_log: EventLog,
    projectors: Sequence[Projector],
    named: int,
    head: int,
    erased_after: int,
) -> str | None:
    """Why the snapshot in `db`, named for position `named`, may not be used with
    `event_log` (whose head is `head`) now; None when it may."""
    if not table_exists(db, sql.META_TABLE):
        return "no meta row"
    meta = sql.META_GET.first(db)
    if meta is None:
        return "no meta row"
    if meta.format != FORMAT:
        return "another format"
    if not isinstance(meta.log_id, str) or not _same(meta.log_id, event_log.log_id):
        return "another log"
    if type(meta.position) is not int or meta.position != named or named < 1:
        return "its position is not the one its name gives"
    if named > head:
        return "past the log's head"
    if not _folds_alike(meta.projectors, projectors):
        return "other projector versions"
    if type(meta.written_head) is not int or meta.written_head < erased_after:
        return "written before an erasure"
    chain = chain_at(event_log, named)
    if not isinstance(meta.chain_hash, str) or chain is None or not _same(meta.chain_hash, chain):
        return "its chain value is not the log's"
    missing = [t for p in projectors for t in p.tables if not table_exists(db, t)]
    if missing:
        return "a projector's table is missing"
    schema = sql.SCHEMA.rows(db)
    if any(entry.type in ("trigger", "view") for entry in schema):
        return "it holds a trigger or a view"
    expected = _schema(projectors)
    tables = {entry.tbl_name for entry in expected}
    if [entry for entry in schema if entry.tbl_name in tables] != expected:
        return "its tables are not the ones this code writes"
    return None


_SCHEMAS: dict[str, list[sql.SchemaEntry]] = {}


def _schema(projectors: Sequence[Projector]) -> list[sql.SchemaEntry]:
    """The schema this code gives `projectors`' tables and the meta table in a snapshot. A
    trigger slipped into a file would run in each fold into it, and bend it, while its rows
    alone still matched a refold."""
    key = signature(projectors)
    if key not in _SCHEMAS:
        with ScratchDatabase() as empty:
            fold(empty, projectors, ())
            empty.execute(sql.META_DDL)
            _SCHEMAS[key] = sql.SCHEMA.rows(empty)
    return _SCHEMAS[key]


def _folds_alike(recorded: object, projectors: Sequence[Projector]) -> bool:
    """Whether a snapshot's recorded projectors include each of `projectors` at its version."""
    if not isinstance(recorded, str):
        return False
    try:
        versions = msgspec.json.decode(recorded, type=dict[str, int])
    except msgspec.DecodeError:
        return False
    return all(versions.get(p.name) == p.version for p in projectors)


def _same(first: str, second: str) -> bool:
    return hmac.compare_digest(first.encode("utf-8", "replace"), second.encode("utf-8", "replace"))


def _opened(path: Path) -> Folding | None:
    """The snapshot at `path` opened to fold into: in place, or a copy when another user
    holds it (or it cannot be written); None when it cannot be read at all, or is not a
    plain file."""
    if not plain_file(path):
        log.warning("snapshot_ignored", snapshot=path.name, reason="not a plain file")
        return None
    try:
        return SnapshotDatabase(path)
    except FactledgerError:
        pass
    try:
        return ScratchDatabase.copy_of(path, Path(tempfile.gettempdir()))
    except FactledgerError as exc:
        log.warning("snapshot_ignored", snapshot=path.name, reason=type(exc).__name__)
        return None


def _fold(
    db: Folding,
    projectors: Sequence[Projector],
    event_log: EventLog,
    after: int,
    until: int,
    progress: Progress | None,
) -> int:
    """Fold the events after `after` up to `until` into `db`'s tables; return the count."""
    count = 0
    for batch in batches(event_log.read(after=after, until=until)):
        for projector in projectors:
            projector.apply(db, batch)
        count += len(batch)
        if progress is not None:
            progress(batch[-1].position, until)
    return count


class Taken(msgspec.Struct, frozen=True, kw_only=True):
    """What `take` did."""

    written: list[int]
    """The positions of the snapshots written."""
    removed: list[int]
    """The positions of the snapshots removed (beyond the newest kept, or not usable)."""
    folded_from: int
    """The snapshot the fold started from (0: the first event)."""
    events_folded: int
    head: int
    """The log's head when it began."""


def planned(head: int, every: object, keep: object) -> list[int]:
    """The positions `take` writes for `factledger snapshot`: the newest `keep` multiples of
    `every` up to `head` (each a count of at least 1, or a clear error)."""
    for name, value in (("every", every), ("keep", keep)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidTypeError(f"{name} must be an int, not {type(value).__name__}")
        if value < 1:
            raise InvalidInputError(f"{name} must be at least 1, not {value}")
    assert isinstance(every, int) and isinstance(keep, int)
    newest = head - head % every
    return list(range(newest, 0, -every))[:keep][::-1]


def take(
    event_log: EventLog,
    projectors: Sequence[Projector],
    directory: Path,
    positions: Sequence[int],
    *,
    keep: int | None,
    erased_after: int = 0,
    progress: Progress | None = None,
) -> Taken:
    """Write the snapshots at `positions` that `directory` lacks, folding once from the
    newest usable snapshot before them (or from the first event) in a scratch file beside
    them. With `keep`, then remove every snapshot but the newest `keep`; snapshots that
    cannot be used are removed either way."""
    head = event_log.head()
    beyond = [p for p in positions if not 1 <= p <= head.position]
    if beyond:
        raise InvalidInputError(
            f"no snapshot can be taken at position {beyond[0]}: the log's head is {head.position}"
        )
    usable = _usable(event_log, projectors, directory, head.position, erased_after)
    missing = sorted({p for p in positions if p not in usable})
    written: list[int] = []
    base, count = 0, 0
    if missing:
        base = max((p for p in usable if p < missing[0]), default=0)
        if directory.is_symlink():
            raise StorageError(f"{directory} is a symbolic link: no snapshot is written there")
        directory.mkdir(parents=True, exist_ok=True)
        working = (
            ScratchDatabase.copy_of(usable[base], directory)
            if base
            else ScratchDatabase.beside(directory / "snapshot")
        )
        with working:
            if not base:
                with working.bulk():
                    fold(working, projectors, ())
                    working.execute(sql.META_DDL)
            at = base
            for target in missing:
                with working.bulk():
                    count += _fold(working, projectors, event_log, at, target, progress)
                    chain = _chain(event_log, target)
                    meta = (FORMAT, event_log.log_id, target, chain, head.position)
                    working.execute(sql.META_PUT, (*meta, signature(projectors)))
                _publish(working, snapshot_path(directory, target))
                written.append(target)
                at = target
        if _erased_since(event_log, head.position):
            for position in written:
                _remove(snapshot_path(directory, position))
            log.warning("snapshots_dropped", reason="an erasure was appended meanwhile")
            written = []
    kept = sorted({*usable, *written})
    if keep is not None:
        kept = kept[-keep:]
    removed = []
    for position, path in listed(directory):
        if position not in kept:
            _remove(path)
            removed.append(position)
    log.info("snapshots_taken", written=written, removed=removed, folded=count)
    return Taken(
        written=written,
        removed=sorted(removed),
        folded_from=base,
        events_folded=count,
        head=head.position,
    )


def _usable(
    event_log: EventLog,
    projectors: Sequence[Projector],
    directory: Path,
    head: int,
    erased_after: int,
) -> dict[int, Path]:
    """The snapshots in `directory` that may be used, by position."""
    found = {}
    for position, path in listed(directory):
        if not plain_file(path):
            log.warning("snapshot_ignored", snapshot=path.name, reason="not a plain file")
            continue
        try:
            db = open_read_only(path)
        except FactledgerError:
            log.warning("snapshot_ignored", snapshot=path.name, reason="unreadable")
            continue
        try:
            reason = problem(db, event_log, projectors, position, head, erased_after)
        except FactledgerError as exc:
            reason = f"unreadable: {type(exc).__name__}"
        finally:
            db.close()
        if reason is None:
            found[position] = path
        else:
            log.warning("snapshot_ignored", snapshot=path.name, reason=reason)
    return found


def _chain(event_log: EventLog, position: int) -> str:
    chain = chain_at(event_log, position)
    if chain is None:
        raise InvalidInputError(f"no event at position {position}")
    return chain


def _publish(working: ScratchDatabase, target: Path) -> None:
    """Copy `working` to `target` whole: written beside it, then renamed over it."""
    partial = target.with_name(f".{target.name}.tmp")
    _remove(partial)
    try:
        working.copy_to(partial)
        os.replace(partial, target)
    except BaseException:
        _remove(partial)
        raise


def _remove(path: Path) -> None:
    for leftover in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        leftover.unlink(missing_ok=True)


def _erased_since(event_log: EventLog, head: int) -> bool:
    """Whether an erasure was appended after `head` (its texts may be in what was read)."""
    return any(isinstance(r.payload, ContentErased) for r in event_log.read(after=head))


def remove_all(directory: Path | None) -> list[int]:
    """Delete every snapshot in `directory` (after an erasure: they may hold its texts)."""
    removed = []
    for position, path in listed(directory):
        _remove(path)
        removed.append(position)
    if removed:
        log.info("snapshots_removed", removed=removed)
    return sorted(removed)
