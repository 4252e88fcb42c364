"""`MemoryStore`: the memory store, every write an event and every read a projection.

It is a `MemoryView` (the reads) that adds the writes. The public `SQLiteMemoryStore` is this
class with the replaced store's helpers on top (`projections._compat`).
"""

from __future__ import annotations

import builtins
import dataclasses
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, cast

from msgspec import UNSET

from eventlog import (
    BoundLog,
    Durability,
    EventLog,
    EventPayload,
    InvalidInputError,
    InvalidTypeError,
    MemoryAdded,
    MemoryRemoved,
    MemoryReweighted,
    NewEvent,
    PermissionDeniedError,
    RecordedEvent,
    open_log,
)
from eventlog.checks import (
    check_actor,
    check_finite,
    check_identifier,
    check_optional_actor,
    check_position,
    check_positions,
)
from projections import _sql as sql
from projections import _sql_knowledge as sql_knowledge
from projections._cache import open_read_model
from projections._database import Database
from projections._errors import SecretRefusedError
from projections._legacy import legacy_events
from projections._lineage import check_sources
from projections._projector import ProjectedTransaction, Projection, ReadModelSnapshot
from projections._receipts import Receipt, receipts
from projections._secrets import SecretsMode, check_name, chosen_mode
from projections._trust import MemoryTrustPolicy, active_trust_policy
from projections._validation import check_importance, check_memory_type, check_tags, check_text
from projections._view import MemoryView, default_projectors

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
        "derived_from",
    )
)
SECONDS_PER_DAY = 86400


class MemoryStore(MemoryView):
    """Persistent agent memory on an append-only, hash-chained log.

    By default the log and the read model share one SQLite file, `db_path`. With `log` (a
    `postgresql://` DSN, another SQLite file, or an open `EventLog`), `db_path` names this
    host's read-model cache instead: it tails that log, and an append commits in the log
    before the cache folds it (`projections._cache`). A `source_adapter` given here is
    stamped on every write through this handle that names none of its own (without one, a
    PostgreSQL login bound to an adapter writes as that adapter, and a login bound to
    another refuses to open: `PermissionDeniedError`); `producer_task_id`
    and `run_id` likewise, on its removals, prunes, decays, legacy import and adds without a
    task, so every event names its actor. `trusted_adapters`, given, are the adapters the
    prompt and agents' reads through this store trust when they are given no policy, in
    place of FACTLEDGER_TRUST_ADAPTERS (`trust_policy()`). `secrets` ('refuse', 'redact' or
    'allow'; default FACTLEDGER_SECRETS, else 'refuse') is what its writes, its knowledge
    base's publishes and its legacy import do with a secret in their text
    (`projections._secrets`).
    """

    def __init__(
        self,
        db_path: str | os.PathLike[str],
        *,
        log: str | os.PathLike[str] | EventLog | None = None,
        source_adapter: str | None = None,
        producer_task_id: str = "",
        run_id: str | None = None,
        durability: Durability = "full",
        clock_ns: Callable[[], int] | None = None,
        trusted_adapters: Iterable[str] | None = None,
        secrets: SecretsMode | None = None,
    ) -> None:
        self._secrets = chosen_mode(secrets)
        self._trusted_adapters = (
            None
            if trusted_adapters is None
            else MemoryTrustPolicy(
                trusted_adapters=cast(frozenset[str], trusted_adapters)
            ).trusted_adapters
        )
        self._source_adapter = check_optional_actor("source_adapter", source_adapter)
        self._producer = check_actor("producer_task_id", producer_task_id, allow_empty=True)
        self._run_id = check_optional_actor("run_id", run_id)
        if clock_ns is not None and not callable(clock_ns):
            raise InvalidTypeError(f"clock_ns must be callable, not {_type_name(clock_ns)}")
        self._clock_ns = clock_ns or time.time_ns
        owned = log is None or isinstance(log, (str, os.PathLike))
        self._log: EventLog
        if log is None or isinstance(log, (str, os.PathLike)):
            target = db_path if log is None else log
            self._log = open_log(target, durability=durability, clock_ns=self._clock_ns)
        elif isinstance(log, EventLog):
            self._log = log
        else:
            raise InvalidTypeError(
                f"log must be a path, a postgresql:// DSN or an EventLog, not {_type_name(log)}"
            )
        cache = None if log is None else db_path
        resources: builtins.list[Any] = [self._log] if owned else []
        try:
            self._source_adapter = _bound(self._log, self._source_adapter)
            self._projection = open_read_model(
                self._log, default_projectors(self._log.log_id), cache=cache
            )
            resources.append(self._projection)
            super().__init__(self._projection, db_path=db_path, resources=resources)
            self._projection.open()
            self._import_legacy()
        except BaseException:
            for resource in reversed(resources):
                resource.close()
            raise

    # -- plumbing shared with the knowledge base and the prompt builder ------------------

    @property
    def source_adapter(self) -> str | None:
        """The adapter stamped on writes that name none."""
        return self._source_adapter

    @property
    def secrets(self) -> SecretsMode:
        """What writes through this store do with a secret: 'refuse', 'redact' or 'allow'."""
        return self._secrets

    def trust_policy(self) -> MemoryTrustPolicy:
        """The trust policy reads through this store are judged under when they are given
        none: the environment's, trusting the adapters this store was opened with
        (`trusted_adapters=`) in place of FACTLEDGER_TRUST_ADAPTERS when it was."""
        policy = active_trust_policy()
        if self._trusted_adapters is None:
            return policy
        return dataclasses.replace(policy, trusted_adapters=self._trusted_adapters)

    def receipts(
        self,
        *,
        task_id: str | None = None,
        run_id: str | None = None,
        after: int = 0,
        limit: int = 100,
    ) -> builtins.list[Receipt]:
        """The receipts of reads for `task_id` and `run_id` (None: any) after position
        `after`, oldest first, at most `limit` (`projections._receipts`)."""
        with self.snapshot() as snap:
            return receipts(snap, snap, task_id=task_id, run_id=run_id, after=after, limit=limit)

    @property
    def read_only(self) -> bool:
        """Whether this store refuses writes: a store writes."""
        return False

    @property
    def event_log(self) -> EventLog:
        """The underlying event log (for audit tools)."""
        return self._log

    @property
    def read_model(self) -> Database:
        """The read model's tables, to query inside `snapshot()` (or a write)."""
        return self._projection.database

    def snapshot(self) -> AbstractContextManager[ReadModelSnapshot]:
        """A consistent read of the read model, with the log position it shows (`head()`):
        the log's head in one file; with a log held elsewhere, the position this host's
        cache reached after catching up on entry."""
        return self._projection.snapshot()

    def sync(self, min_position: int | None = None, timeout: float = 5.0) -> int:
        """Fold the log up to at least `min_position` (default: its head now) and return the
        position the read model is at, waiting up to `timeout` seconds for the log to reach
        it (then `SyncTimeoutError`). After `sync(min_position=p)` every read through this
        handle sees position p, whichever host appended it."""
        return self._projection.sync(min_position, timeout)

    def write_transaction(self) -> AbstractContextManager[ProjectedTransaction]:
        """A write transaction: events appended through it are folded into the read model,
        and read-model queries inside it see the log's head. In one file it commits as a
        whole at the end of the `with`; with a log held elsewhere each `append()` commits in
        the log at once and is folded before it returns, so the `with` cannot undo it."""
        return self._projection.transaction()

    def _append(self, events: Sequence[NewEvent]) -> list[RecordedEvent]:
        with self.write_transaction() as tx:
            check_sources(tx.head_position(), events)
            return tx.append(events)

    def _import_legacy(self) -> None:
        """Import a legacy `memory` table in this file, once: only into an empty log kept in
        this same file."""
        if not isinstance(self._projection, Projection):
            return
        with self._log.snapshot() as snap:
            if snap.head().position or not sql.LEGACY_TABLE_EXISTS.exists(
                self._projection.database
            ):
                return
        with self.write_transaction() as tx:
            if tx.head_position():
                return
            events = legacy_events(
                tx,
                producer_task_id=self._producer,
                run_id=self._run_id,
                source_adapter=self._source_adapter,
                secrets=self._secrets,
            )
            if events:
                tx.append(events)

    def _adapter(self, source_adapter: object) -> str | None:
        chosen = check_optional_actor("source_adapter", source_adapter)
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
        derived_from: Sequence[int] | None = None,
    ) -> int:
        """Add a memory entry; return its id (the position of the event that wrote it).
        `derived_from` names earlier positions it was derived from (lineage)."""
        event = self._added(
            type=type,
            content=content,
            tags=tags,
            importance=importance,
            task_id=task_id,
            source_agent=source_agent,
            source_model=source_model,
            source_adapter=source_adapter,
            derived_from=derived_from,
        )
        return self._append([event])[0].position

    def add_many(self, rows: Iterable[Mapping[str, Any]]) -> builtins.list[int]:
        """Add many entries in one transaction: all of them, or none if any row is bad."""
        if isinstance(rows, (str, bytes, Mapping)) or not isinstance(rows, Iterable):
            raise InvalidTypeError("rows must be a list of dicts, one per entry")
        events = []
        for index, row in enumerate(rows):
            if type(row) is not dict and not isinstance(row, Mapping):
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
            except SecretRefusedError as exc:
                raise exc.within(f"rows[{index}]") from None
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
        derived_from: object = None,
    ) -> NewEvent:
        text = check_text("content", content, secrets=self._secrets)
        task = check_optional_actor("task_id", task_id)
        payload = MemoryAdded(
            type=check_memory_type(type),
            content=text,
            tags=tuple(check_name("tags", tag, self._secrets) for tag in check_tags(tags)),
            importance=check_importance(importance),
            task_id=task,
            source_agent=check_identifier("source_agent", source_agent, allow_empty=True),
            source_model=check_identifier("source_model", source_model, allow_empty=True),
            derived_from=check_positions("derived_from", derived_from) or UNSET,
        )
        return NewEvent(
            payload=payload,
            producer_task_id=task or self._producer,
            run_id=self._run_id,
            source_adapter=self._adapter(source_adapter),
        )

    def remove(self, entry_id: int) -> bool:
        """Stop showing an entry; True if it was there. The log keeps every version."""
        check_position("entry_id", entry_id, minimum=1)
        with self.write_transaction() as tx:
            if not sql_knowledge.MEMORY_EXISTS.exists(tx, (entry_id,)):
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
            doomed = {row.position for row in sql_knowledge.MEMORY_PRUNE_OLD.rows(tx, (cutoff,))}
            kept = sql_knowledge.MEMORY_PRUNE_KEEP.rows(tx)
            ranked = [row.position for row in kept if row.position not in doomed]
            doomed.update(ranked[max_entries:])
            if doomed:
                tx.append([self._removal(tuple(sorted(doomed)), "pruned")])
        return len(doomed)

    def decay_importance(self, rate: float = 0.99) -> None:
        """Multiply every entry's importance by `rate` (between 0 and 1)."""
        factor = check_finite("rate", rate)
        if not 0.0 <= factor <= 1.0:
            raise InvalidInputError(f"rate must be between 0.0 and 1.0, got {rate!r}")
        self._append([self._by_handle(MemoryReweighted(factor=factor))])

    def _removal(self, entry_ids: tuple[int, ...], reason: str) -> NewEvent:
        return self._by_handle(MemoryRemoved(entry_ids=entry_ids, reason=reason))

    def _by_handle(self, payload: EventPayload) -> NewEvent:
        """An event written by this handle's actor."""
        return NewEvent(
            payload=payload,
            producer_task_id=self._producer,
            run_id=self._run_id,
            source_adapter=self._source_adapter,
        )

    def __enter__(self) -> MemoryStore:
        return self


def _bound(event_log: EventLog, adapter: str | None) -> str | None:
    """The adapter a handle writes as: `adapter`, else the one the log binds its role to. A
    log that binds the role to another refuses every event this handle would append."""
    bound = event_log.bound_adapter if isinstance(event_log, BoundLog) else None
    if bound is None or adapter in (None, bound):
        return bound or adapter
    raise PermissionDeniedError(
        f"this login is bound to adapter {bound!r}: the log refuses its events under "
        f"adapter {adapter!r}; name {bound!r} or no adapter, or connect as another role"
    )


def _type_name(value: object) -> str:
    return type(value).__name__
