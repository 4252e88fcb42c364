"""`SQLiteMemoryStore`: the memory store API, every write an event and every read a projection."""

from __future__ import annotations

import builtins
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from eventlog import (
    Durability,
    EventLog,
    InvalidInputError,
    InvalidTypeError,
    MemoryAdded,
    MemoryRemoved,
    MemoryReweighted,
    NewEvent,
    ReadOnlyStoreError,
    RecordedEvent,
    open_log,
)
from eventlog.checks import (
    check_content,
    check_finite,
    check_identifier,
    check_optional_identifier,
    check_position,
)
from projections import reads, sql
from projections.entries import MemoryEntry
from projections.knowledge import KnowledgeProjector
from projections.legacy import legacy_events
from projections.projector import ProjectedTransaction, Projection, Projector
from projections.reads import Readable, Reader
from projections.receipts import ReceiptProjector
from projections.validation import (
    check_allow_list,
    check_importance,
    check_limit,
    check_memory_type,
    check_tags,
)

ADD_KEYS = frozenset(
    (
        "type",
        "content",
        "tags",
        "importance",
        "task_id",
        "source_adapter",
        "source_agent",
        "source_model",
    )
)
SECONDS_PER_DAY = 86400


def default_projectors() -> tuple[Projector, ...]:
    """The projectors every store keeps inline."""
    return (KnowledgeProjector(), ReceiptProjector())


class SQLiteMemoryStore:
    """Persistent agent memory on an append-only, hash-chained log.

    The log and the read model share one SQLite file. A `source_adapter` given here is
    stamped on every write through this handle that names none of its own.
    """

    def __init__(
        self,
        db_path: str | os.PathLike[str],
        *,
        source_adapter: str | None = None,
        durability: Durability = "full",
        clock_ns: Callable[[], int] | None = None,
    ) -> None:
        self._source_adapter = check_optional_identifier("source_adapter", source_adapter)
        if clock_ns is not None and not callable(clock_ns):
            raise InvalidTypeError(f"clock_ns must be callable, not {_type_name(clock_ns)}")
        self._clock_ns = clock_ns or time.time_ns
        self._log: EventLog | None = open_log(
            db_path, durability=durability, clock_ns=self._clock_ns
        )
        self.db_path = Path(db_path) if str(db_path) != ":memory:" else db_path
        self._projection = Projection(self._log, default_projectors())
        self._reader: Reader = self._log
        try:
            self._projection.open()
            self._import_legacy()
        except BaseException:
            self._log.close()
            raise

    @classmethod
    def _view(cls, db_path: str | os.PathLike[str], reader: Reader) -> SQLiteMemoryStore:
        """A read-only store over a read model folded elsewhere (time travel)."""
        view = cls.__new__(cls)
        view.db_path = Path(db_path)
        view._source_adapter = None
        view._clock_ns = time.time_ns
        view._log = None
        view._reader = reader
        return view

    # -- plumbing shared with the knowledge base and the prompt builder ------------------

    @property
    def source_adapter(self) -> str | None:
        """The adapter stamped on writes that name none."""
        return self._source_adapter

    @property
    def read_only(self) -> bool:
        """Whether this store refuses writes (a view of the past)."""
        return self._log is None

    @property
    def event_log(self) -> EventLog:
        """The underlying event log (for audit tools)."""
        if self._log is None:
            raise ReadOnlyStoreError("this store is a view of the past and has no live log")
        return self._log

    def write_transaction(self) -> AbstractContextManager[ProjectedTransaction]:
        """A write transaction: events appended through it are folded into the read model
        before it commits, and read-model queries inside it see the log's head."""
        if self._log is None:
            raise ReadOnlyStoreError(
                "this store is a read-only view of a past state; writes are refused"
            )
        return self._projection.transaction()

    def snapshot(self) -> AbstractContextManager[Readable]:
        """A consistent read of the read model."""
        return self._reader.snapshot()

    def _append(self, events: Sequence[NewEvent]) -> list[RecordedEvent]:
        with self.write_transaction() as tx:
            return tx.append(events)

    def _import_legacy(self) -> None:
        """Import a legacy `memory` table in this file, once: only into an empty log."""
        live = self.event_log
        with live.snapshot() as snap:
            if snap.head().position or not snap.execute(sql.LEGACY_TABLE_EXISTS):
                return
        with self.write_transaction() as tx:
            if tx.head_position():
                return
            events = legacy_events(tx)
            if events:
                tx.append(events)

    def _adapter(self, source_adapter: object) -> str | None:
        chosen = check_optional_identifier("source_adapter", source_adapter)
        return chosen if chosen is not None else self._source_adapter

    # -- writes --------------------------------------------------------------------------

    def add(
        self,
        type: str,
        content: str,
        tags: builtins.list[str] | None = None,
        importance: float = 1.0,
        task_id: str | None = None,
        source_agent: str = "",
        source_model: str = "",
        source_adapter: str | None = None,
    ) -> int:
        """Add a memory entry; return its id (the position of the event that wrote it)."""
        event = self._added(
            type=type,
            content=content,
            tags=tags,
            importance=importance,
            task_id=task_id,
            source_agent=source_agent,
            source_model=source_model,
            source_adapter=source_adapter,
        )
        return self._append([event])[0].position

    def add_many(self, rows: Iterable[Mapping[str, Any]]) -> builtins.list[int]:
        """Add many entries in one transaction: all of them, or none if any row is bad."""
        if isinstance(rows, (str, bytes, Mapping)) or not isinstance(rows, Iterable):
            raise InvalidTypeError("rows must be a list of dicts, one per entry")
        events = []
        for index, row in enumerate(rows):
            if not isinstance(row, Mapping):
                raise InvalidTypeError(f"rows[{index}] must be a dict, not {type(row).__name__}")
            if not ADD_KEYS.issuperset(row):
                unknown = set(row) - ADD_KEYS
                raise InvalidInputError(
                    f"rows[{index}] has unknown keys: {sorted(unknown, key=repr)}"
                )
            if "type" not in row or "content" not in row:
                raise InvalidInputError(f"rows[{index}] needs 'type' and 'content'")
            try:
                events.append(self._added(**row))
            except (InvalidInputError, InvalidTypeError) as exc:
                raise type(exc)(f"rows[{index}]: {exc}") from None
        if not events:
            return []
        return [record.position for record in self._append(events)]

    def _added(
        self,
        *,
        type: object,
        content: object,
        tags: object = None,
        importance: object = 1.0,
        task_id: object = None,
        source_agent: object = "",
        source_model: object = "",
        source_adapter: object = None,
    ) -> NewEvent:
        if not isinstance(content, str):
            raise InvalidTypeError(f"content must be str, not {_type_name(content)}")
        check_content("content", content)
        task = check_optional_identifier("task_id", task_id)
        payload = MemoryAdded(
            type=check_memory_type(type),
            content=content,
            tags=check_tags(tags),
            importance=check_importance(importance),
            task_id=task,
            source_agent=check_identifier("source_agent", source_agent, allow_empty=True),
            source_model=check_identifier("source_model", source_model, allow_empty=True),
        )
        return NewEvent(
            payload=payload,
            producer_task_id=task or "",
            source_adapter=self._adapter(source_adapter),
        )

    def remove(self, entry_id: int) -> bool:
        """Stop showing an entry; True if it was there. The log keeps every version."""
        check_position("entry_id", entry_id, minimum=1)
        with self.write_transaction() as tx:
            if not tx.execute(sql.MEMORY_EXISTS, (entry_id,)):
                return False
            tx.append([self._removal((entry_id,), "removed")])
        return True

    def prune(self, max_entries: int = 1000, max_age_days: float = 30) -> int:
        """Remove visible entries older than `max_age_days`, then all but the `max_entries`
        most important (newest first among equals). Returns how many were removed.
        Quarantined entries are left alone: they are evidence."""
        check_position("max_entries", max_entries)
        age = check_finite("max_age_days", max_age_days)
        if age < 0:
            raise InvalidInputError(f"max_age_days must not be negative, got {max_age_days!r}")
        cutoff = self._clock_ns() / 1e9 - age * SECONDS_PER_DAY
        with self.write_transaction() as tx:
            doomed = {row[0] for row in tx.execute(sql.MEMORY_PRUNE_OLD, (cutoff,))}
            ranked = [row[0] for row in tx.execute(sql.MEMORY_PRUNE_KEEP) if row[0] not in doomed]
            doomed.update(ranked[max_entries:])
            if doomed:
                tx.append([self._removal(tuple(sorted(doomed)), "pruned")])
        return len(doomed)

    def decay_importance(self, rate: float = 0.99) -> None:
        """Multiply every entry's importance by `rate` (between 0 and 1)."""
        factor = check_finite("rate", rate)
        if not 0.0 <= factor <= 1.0:
            raise InvalidInputError(f"rate must be between 0.0 and 1.0, got {rate!r}")
        self._append(
            [NewEvent(payload=MemoryReweighted(factor=factor), source_adapter=self._source_adapter)]
        )

    def _removal(self, entry_ids: tuple[int, ...], reason: str) -> NewEvent:
        return NewEvent(
            payload=MemoryRemoved(entry_ids=entry_ids, reason=reason),
            source_adapter=self._source_adapter,
        )

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

    # -- helpers the replaced store offered ----------------------------------------------

    def add_episodic(
        self,
        content: str,
        task_id: str,
        agent: str = "",
        model: str = "",
        tags: builtins.list[str] | None = None,
    ) -> int:
        """Record what happened (importance 0.8)."""
        return self.add("episodic", content, tags, 0.8, task_id, agent, model)

    def add_semantic(
        self, content: str, tags: builtins.list[str] | None = None, importance: float = 1.0
    ) -> int:
        """Record a fact about the codebase."""
        return self.add("semantic", content, tags, importance)

    def add_procedural(self, content: str, tags: builtins.list[str] | None = None) -> int:
        """Record how to do something (importance 0.9)."""
        return self.add("procedural", content, tags, 0.9)

    def query_for_task(
        self, role: str, context_files: builtins.list[str], limit: int = 10
    ) -> builtins.list[MemoryEntry]:
        """Relevant entries for a role and the first two path segments of its files."""
        if not isinstance(role, str):
            raise InvalidTypeError(f"role must be str, not {_type_name(role)}")
        if isinstance(context_files, (str, bytes)) or not isinstance(context_files, Iterable):
            raise InvalidTypeError(
                f"context_files must be a list of paths, not {_type_name(context_files)}"
            )
        files = builtins.list(context_files)
        for index, path in enumerate(files):
            if not isinstance(path, str):
                raise InvalidTypeError(
                    f"context_files[{index}] must be str, not {_type_name(path)}"
                )
        wanted = [role]
        for path in files:
            parts = path.replace("\\", "/").split("/")
            wanted.extend(part for part in parts[:2] if part and part != ".")
        usable = [t for t in dict.fromkeys(wanted) if t.strip() and "," not in t]
        return self.get_relevant(usable, limit=limit)

    # -- lifetime ------------------------------------------------------------------------

    def close(self) -> None:
        """Close the database connection."""
        if self._log is not None:
            self._log.close()

    def __enter__(self) -> SQLiteMemoryStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _type_name(value: object) -> str:
    return type(value).__name__
