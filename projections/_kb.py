"""`KnowledgeBase`: one task publishes a fact under (scope, tag, key); later tasks subscribe.

Last write wins by log position, never by timestamp. Every version stays in the log and in
`history`. A fact is also a `cross_task` memory entry tagged with its tag. The public
`CrossTaskKB` is this class with the replaced store's counter and hook on top
(`projections._compat`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator, Sequence

from msgspec import UNSET

from eventlog import FactPublished, InvalidInputError, InvalidTypeError, NewEvent, RecordedEvent
from eventlog.checks import check_actor, check_optional_actor, check_positions
from eventlog.logs import get_logger
from projections import _reading as reading
from projections import _reads as reads
from projections import _sql_reads as sql_reads
from projections._entries import Fact
from projections._errors import SecretRefusedError
from projections._knowledge import fact_identity, run_key
from projections._lineage import check_sources
from projections._secrets import SecretsMode, check_name
from projections._store import MemoryStore
from projections._validation import (
    check_allow_list,
    check_key,
    check_scope,
    check_tag,
    check_text,
)
from projections._view import MemoryView

log = get_logger("factledger.kb")


class KnowledgeBase:
    """Publish/subscribe over the store, bound to one producing task and one run."""

    def __init__(
        self,
        store: MemoryView,
        *,
        run_id: str = "",
        producer_task_id: str = "",
        source_adapter: str | None = None,
        clock_ns: Callable[[], int] | None = None,
    ) -> None:
        if not isinstance(store, MemoryView):
            raise InvalidTypeError(f"store must be a SQLiteMemoryStore, not {type(store).__name__}")
        self._store = store
        self._run_id = check_actor("run_id", run_id, allow_empty=True)
        self._producer_task_id = check_actor("producer_task_id", producer_task_id, allow_empty=True)
        self._source_adapter = check_optional_actor("source_adapter", source_adapter)
        if clock_ns is not None and not callable(clock_ns):
            raise InvalidTypeError(f"clock_ns must be callable, not {type(clock_ns).__name__}")
        self._clock_ns = clock_ns or time.time_ns

    @property
    def store(self) -> MemoryView:
        """The store this facade writes through."""
        return self._store

    @property
    def run_id(self) -> str:
        """The run this facade publishes and subscribes in ('' for none)."""
        return self._run_id

    def publish(
        self,
        tag: str,
        key: str,
        value: str,
        *,
        scope: str,
        source_adapter: str | None = None,
        derived_from: Sequence[int] | None = None,
    ) -> Fact:
        """Publish `value` under (scope, tag, key); the newest write by log position wins.
        `derived_from` names earlier positions the value was derived from (lineage)."""
        return self.publish_many(
            [(tag, key, value)],
            scope=scope,
            source_adapter=source_adapter,
            derived_from=derived_from,
        )[0]

    def publish_many(
        self,
        items: Sequence[tuple[str, str, str]],
        *,
        scope: str,
        source_adapter: str | None = None,
        derived_from: Sequence[int] | None = None,
    ) -> list[Fact]:
        """Publish several (tag, key, value) facts in one transaction: all or none (each
        derived from `derived_from`, if given)."""
        sources = check_positions("derived_from", derived_from)
        checked_scope = self._scope(scope)
        adapter = check_optional_actor("source_adapter", source_adapter)
        adapter = adapter or self._source_adapter or self._store.source_adapter
        if isinstance(items, (str, bytes)) or not isinstance(items, Iterable):
            raise InvalidTypeError(
                f"items must be a list of (tag, key, value) tuples, not {type(items).__name__}"
            )
        listed = list(items)
        events = [
            self._event(i if len(listed) > 1 else None, item, checked_scope, adapter, sources)
            for i, item in enumerate(listed)
        ]
        if not events:
            return []
        with reading.writable_store(self._store).write_transaction() as tx:
            check_sources(tx.head_position(), events)
            records = tx.append(events)
            span = (records[0].position, records[-1].position)
            replaced = {row.position: row for row in sql_reads.FACTS_REPLACED.rows(tx, span)}
        facts = [fact_from_record(record) for record in records]
        for fact in facts:
            if fact.position in replaced:
                _log_overwrite(fact, replaced[fact.position])
        return facts

    def _event(
        self,
        index: int | None,
        item: object,
        scope: str,
        adapter: str | None,
        sources: tuple[int, ...],
    ) -> NewEvent:
        """The event publishing `item`, the `index`-th of several (None: the only one)."""
        if not isinstance(item, tuple) or len(item) != 3:
            raise InvalidTypeError(f"items[{index or 0}] must be a (tag, key, value) tuple")
        tag, key, value = item
        secrets = self._secrets()
        try:
            checked = FactPublished(
                scope=scope,
                tag=check_name("tag", check_tag(tag), secrets),
                key=check_name("key", check_key(key), secrets),
                value=check_text("value", value, secrets=secrets),
                derived_from=sources or UNSET,
            )
        except SecretRefusedError as exc:
            if index is None:
                raise
            raise exc.within(f"items[{index}]") from None
        return NewEvent(
            payload=checked,
            producer_task_id=self._producer_task_id,
            run_id=self._run_id or None,
            source_adapter=adapter,
            ts_ns=self._clock_ns(),
        )

    def _secrets(self) -> SecretsMode:
        """The store's secrets mode ('refuse' through a view, which refuses the write after)."""
        return self._store.secrets if isinstance(self._store, MemoryStore) else "refuse"

    def subscribe(
        self,
        tag: str,
        *,
        scope: str,
        read_only_from_adapters: list[str] | None = None,
    ) -> Iterator[Fact]:
        """One fact per key under `tag`: the last write in log order, newest first.

        Scope 'run' sees this facade's run only; 'project' sees project facts of every run.
        Allow-list as in the store: None reads all, a list reads only those adapters (the
        newest version each wrote), and [] reads nothing. Values come back as stored, with
        no trust policy applied (the prompt path and agents' reads apply one). Through a
        store that writes, the read is receipted, as this facade's task, run and adapter
        (`projections._reading`); a read-only view writes nothing.
        """
        checked_tag = check_tag(tag)
        checked_scope = self._scope(scope)
        adapters = check_allow_list(read_only_from_adapters)
        if adapters == ():
            return iter(())
        identity = (checked_scope, run_key(checked_scope, self._run_id), checked_tag)
        if self._store.read_only:
            with self._store.snapshot() as snap:
                return iter(reads.current_facts(snap, identity, adapters))
        reader = reading.NamedReader.of(
            self._store, self._producer_task_id, self._run_id, self._source_adapter
        )
        found = reading.read(
            self._store,
            reading.Reading(reader, reading.UNFILTERED, everything=True),
            reading.current_facts(identity, adapters),
            tags=(checked_tag,),
            limit=reading.NO_LIMIT,
            show=reading.shown_as_stored,
        )
        return iter(found.shown)

    def history(self, tag: str, key: str, *, scope: str) -> list[Fact]:
        """Every version ever published under (scope, tag, key), oldest first."""
        identity = fact_identity(self._scope(scope), self._run_id, check_tag(tag), check_key(key))
        with self._store.snapshot() as snap:
            return reads.fact_history(snap, identity)

    def _scope(self, scope: object) -> str:
        checked = check_scope(scope)
        if checked == "run" and not self._run_id:
            raise InvalidInputError("scope 'run' needs a run_id; this facade has none")
        return checked


def _log_overwrite(fact: Fact, previous: sql_reads.Replaced) -> None:
    """Another producer or adapter overwriting a fact is a warning; updating one's own, info."""
    same_writer = (previous.producer_task_id, previous.source_adapter) == (
        fact.producer_task_id,
        fact.source_adapter,
    )
    log.log(
        logging.INFO if same_writer else logging.WARNING,
        "fact_overwritten",
        scope=fact.scope,
        tag=fact.tag,
        key=fact.key,
        run_id=fact.run_id,
        previous_position=previous.replaced_position,
        previous_producer=previous.producer_task_id,
        previous_adapter=previous.source_adapter,
        position=fact.position,
        producer=fact.producer_task_id,
        adapter=fact.source_adapter,
    )


def fact_from_record(record: RecordedEvent) -> Fact:
    """The fact a `fact_published` event records."""
    payload = record.payload
    if not isinstance(payload, FactPublished):
        raise InvalidTypeError(f"event at position {record.position} is not a published fact")
    return Fact(
        tag=payload.tag,
        key=payload.key,
        value=payload.value,
        scope=payload.scope,
        producer_task_id=record.producer_task_id,
        ts_ns=record.ts_ns,
        content_hash=record.content_hash,
        position=record.position,
        run_id=record.run_id,
        source_adapter=record.source_adapter,
    )
