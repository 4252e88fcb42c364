"""`MemoryView`: the store's reads over a read model, and nothing else.

A view is what investigations and time travel return: the knowledge base as it is in a file
opened read-only, or as it was at a past position, folded in memory. `MemoryStore`
(`projections._store`) is a view that adds the writes; a write asked of a view is refused.
"""

from __future__ import annotations

import builtins
import os
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from eventlog import (
    EventLog,
    Head,
    LogSnapshot,
    ReadOnlyStoreError,
    RecordedEvent,
    SQLiteEventLog,
    open_log,
)
from eventlog.checks import check_position
from eventlog.stored import LogUpTo
from projections import _reads as reads
from projections._cache import open_read_model
from projections._database import ScratchDatabase
from projections._entries import MemoryEntry
from projections._knowledge import KnowledgeProjector
from projections._lineage import LineageProjector
from projections._projector import Projection, Projector, fold
from projections._reads import Queryable, SnapshotSource
from projections._receipts import ReceiptProjector
from projections._snapshots import folded_at
from projections._trust import MemoryTrustPolicy, active_trust_policy
from projections._validation import check_allow_list, check_limit, check_memory_type, check_tags

READ_ONLY = "this store is a read-only view of the log; writes are refused"
STORE_WRITES = frozenset(
    (
        "add",
        "add_many",
        "remove",
        "prune",
        "decay_importance",
        "add_episodic",
        "add_semantic",
        "add_procedural",
        "write_transaction",
        "event_log",
    )
)
"""What a store adds to a view that writes (or hands out the live log to write): a view
refuses each with `ReadOnlyStoreError`."""


def default_projectors(log_id: str) -> tuple[Projector, ...]:
    """The projectors every store of the log `log_id` keeps inline (operator signatures
    cover the log's id)."""
    return (KnowledgeProjector(log_id), ReceiptProjector(), LineageProjector())


class MemoryView:
    """The memory store's reads over one read model. It defines no write: asked for one of
    the store's (`STORE_WRITES`), it raises `ReadOnlyStoreError`."""

    def __init__(
        self,
        reader: SnapshotSource,
        *,
        db_path: str | os.PathLike[str],
        resources: Iterable[Any] = (),
        folded_from: int | None = None,
        events_folded: int | None = None,
    ) -> None:
        self._reader = reader
        self.db_path = Path(db_path) if str(db_path) != ":memory:" else db_path
        self._resources = builtins.list(resources)
        self.folded_from = folded_from
        """For a view of a past position: the snapshot it was folded from (0: the first
        event); None for a view of a live read model."""
        self.events_folded = events_folded
        """For a view of a past position: how many events were folded after `folded_from`."""

    @property
    def read_only(self) -> bool:
        """Whether this store refuses writes."""
        return True

    @property
    def source_adapter(self) -> str | None:
        """The adapter stamped on writes that name none (a view writes nothing)."""
        return None

    def trust_policy(self) -> MemoryTrustPolicy:
        """The trust policy reads through this store are judged under when they are given
        none: the environment's (`active_trust_policy`), read now."""
        return active_trust_policy()

    def snapshot(self) -> AbstractContextManager[Queryable]:
        """A consistent read of the read model."""
        return self._reader.snapshot()

    # -- reads ---------------------------------------------------------------------------

    def list(
        self, type: str | None = None, tags: builtins.list[str] | None = None, limit: int = 50
    ) -> builtins.list[MemoryEntry]:
        """Visible entries, newest first, optionally of one type or with any of `tags`."""
        return self.query(type=type, tags=tags, limit=limit)

    def query(
        self,
        type: str | None = None,
        tags: builtins.list[str] | None = None,
        limit: int = 50,
        *,
        read_only_from_adapters: builtins.list[str] | None = None,
    ) -> builtins.list[MemoryEntry]:
        """Like `list`, with an adapter allow-list: None reads every row, a list reads only
        rows those adapters wrote (untagged rows excluded), and [] reads nothing."""
        kind = None if type is None else check_memory_type(type)
        wanted = check_tags(tags)
        count = check_limit(limit)
        adapters = check_allow_list(read_only_from_adapters)
        if adapters == ():
            return []
        with self._reader.snapshot() as snap:
            return reads.entries(snap, type=kind, tags=wanted, adapters=adapters, limit=count)

    def get_relevant(
        self,
        tags: builtins.list[str],
        limit: int = 10,
        *,
        read_only_from_adapters: builtins.list[str] | None = None,
    ) -> builtins.list[MemoryEntry]:
        """Entries sharing a tag with `tags`, ranked by tags shared, importance, then recency;
        with no tags, the newest entries. Allow-list as in `query`."""
        wanted = check_tags(tags, name="tags")
        count = check_limit(limit)
        adapters = check_allow_list(read_only_from_adapters)
        if adapters == ():
            return []
        with self._reader.snapshot() as snap:
            return reads.relevant(snap, tags=wanted, adapters=adapters, limit=count)

    # -- lifetime ------------------------------------------------------------------------

    def close(self) -> None:
        """Free what the view holds (a folded scratch database, a read-only log handle)."""
        for resource in reversed(self._resources):
            resource.close()
        self._resources.clear()

    def __enter__(self) -> MemoryView:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    if not TYPE_CHECKING:

        def __getattr__(self, name: str) -> NoReturn:
            """A store's write asked of a view is refused as a write (`ReadOnlyStoreError`),
            not as a missing attribute. Hidden from the type checker, which sees reads only."""
            if name in STORE_WRITES and self.read_only:
                raise ReadOnlyStoreError(READ_ONLY)
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")


def view_at(
    event_log: EventLog,
    position: int,
    *,
    db_path: str | os.PathLike[str],
    snapshots: Path | None = None,
    erased_after: int = 0,
) -> MemoryView:
    """A view of the state right after `position`, folded from the nearest usable snapshot
    in `snapshots` at or before it (`projections._snapshots.folded_at`), else in memory from
    the first event. The view's `folded_from` and `events_folded` say which."""
    check_position("position", position)
    folded = folded_at(
        event_log,
        position,
        default_projectors(event_log.log_id),
        directory=snapshots,
        erased_after=erased_after,
    )
    try:
        folded.database.seal()
    except BaseException:
        folded.close()
        raise
    return MemoryView(
        folded.database,
        db_path=db_path,
        resources=[folded],
        folded_from=folded.folded_from,
        events_folded=folded.events_folded,
    )


def _folded(event_log: EventLog, position: int) -> ScratchDatabase:
    """Every projection folded in memory up to `position`, sealed."""
    scratch = ScratchDatabase()
    try:
        with scratch.bulk():
            fold(scratch, default_projectors(event_log.log_id), event_log.read(until=position))
    except BaseException:
        scratch.close()
        raise
    scratch.seal()
    return scratch


def open_view(
    db_path: str | os.PathLike[str], *, log: str | os.PathLike[str] | None = None
) -> MemoryView:
    """The knowledge base in `db_path`, opened read-only: nothing is imported, caught up or
    rebuilt into the file. A read model that is not current with the log is folded in memory
    instead, up to the head as of opening.

    With `log` (a log held elsewhere, opened read-only), `db_path` names this host's cache of
    it instead: each read catches the cache up first (the cache is written, never the log).
    """
    if log is not None:
        return _cached_view(db_path, log)
    event_log = open_log(db_path, read_only=True)
    try:
        if isinstance(event_log, SQLiteEventLog):
            projection = Projection(event_log, default_projectors(event_log.log_id))
            if projection.is_current():
                return MemoryView(projection, db_path=db_path, resources=[event_log])
        head = event_log.head()
        scratch = _folded(event_log, head.position)
    except BaseException:
        event_log.close()
        raise
    folded = _FoldedAt(scratch, LogUpTo(event_log, head))
    return MemoryView(folded, db_path=db_path, resources=[scratch, event_log])


def _cached_view(cache: str | os.PathLike[str], log: str | os.PathLike[str]) -> MemoryView:
    """A view reading a host's cache of `log`, opened read-only."""
    event_log = open_log(log, read_only=True)
    resources: builtins.list[Any] = [event_log]
    try:
        model = open_read_model(event_log, default_projectors(event_log.log_id), cache=cache)
        resources.append(model)
        model.open()
    except BaseException:
        for resource in reversed(resources):
            resource.close()
        raise
    return MemoryView(model, db_path=cache, resources=resources)


@contextmanager
def read_model_at_head(
    event_log: EventLog, projectors: Sequence[Projector]
) -> Iterator[tuple[LogSnapshot, Queryable]]:
    """One read of the log, with `projectors`' tables at its head: the log file's own tables
    when they are current, else folded in memory. Writes nothing. (A host's cache of a log
    held elsewhere is read through its own `snapshot()`, whose head is the cache's.)"""
    with event_log.snapshot() as snap:
        if isinstance(event_log, SQLiteEventLog):
            projection = Projection(event_log, projectors)
            if projection.current_at(snap.head()):
                yield snap, projection.database
                return
        with ScratchDatabase() as scratch:
            with scratch.bulk():
                fold(scratch, projectors, snap.read())
            yield snap, scratch


class _FoldedAt:
    """A read model folded in memory up to the head of a log the view holds open: its
    snapshots can hold a row to the event that wrote it."""

    def __init__(self, scratch: ScratchDatabase, log_at: LogUpTo) -> None:
        self._scratch = scratch
        self._log_at = log_at

    @contextmanager
    def snapshot(self) -> Iterator[_FoldedSnapshot]:
        """The folded tables, the head they show, and the log's events up to it."""
        yield _FoldedSnapshot(self._scratch, self._log_at)


class _FoldedSnapshot:
    """One read of a `_FoldedAt`."""

    def __init__(self, scratch: ScratchDatabase, log_at: LogUpTo) -> None:
        self._scratch = scratch
        self._log_at = log_at

    def head(self) -> Head:
        """The position the tables show."""
        return self._log_at.head()

    def read(
        self, *, after: int = 0, until: int | None = None, limit: int | None = None
    ) -> Iterator[RecordedEvent]:
        """The log's events, never past the head (`LogSnapshot.read`)."""
        return self._log_at.read(after=after, until=until, limit=limit)

    def event_at(self, position: int) -> RecordedEvent:
        """The log's event at `position`, if not past the head (`LogSnapshot.event_at`)."""
        return self._log_at.event_at(position)

    def execute(self, statement: str, params: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        """Query the folded tables."""
        return self._scratch.execute(statement, params)
