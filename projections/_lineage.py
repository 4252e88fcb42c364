"""Lineage: which writes were derived from which events, and the taint that follows it.

A write (a memory entry or a fact version) is derived from what reached its reader earlier,
as recall receipts record (the positions each included), and from any positions its writer
declared (`derived_from`). A reader is an (adapter, task, run): a receipt exposes the adapter
that appended it (its envelope's `source_adapter`, which a PostgreSQL login cannot choose)
with the task and run it names, and a receipt whose payload names another adapter than its
envelope exposes no one. A write's reader is its own envelope's (adapter, producer, run); a
write with no producer has none. So a receipt naming someone else's task under another
adapter taints nothing of theirs.

What reached a reader is kept once per position, in the reader's source set; a write links
to that set (one row, however much its reader read), and draws on the members recorded
before it. A parent always precedes its child, so the graph has no cycles. What the graph
means for trust is `projections._taint`'s.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence

from msgspec import UnsetType

from eventlog import (
    FactPublished,
    InvalidInputError,
    MemoryAdded,
    NewEvent,
    RecallRecorded,
    RecordedEvent,
)
from projections import _sql_reads as sql_reads
from projections._projector import TableWriter
from projections._sql import Query, Queryable
from projections._sql_reads import Link as Link

Reader = tuple[str, str, str]
"""A reader: (adapter, task, run), with '' for no adapter and no run."""


def receipt_reader(record: RecordedEvent, receipt: RecallRecorded) -> Reader | None:
    """The reader the receipt `record` exposed: the adapter that appended it, with the task
    and run its payload names. None when it names no task, or names an adapter other than
    the one that appended it (such a receipt links nothing)."""
    if not receipt.task_id or receipt.adapter != record.source_adapter:
        return None
    return (record.source_adapter or "", receipt.task_id, receipt.run_id or "")


def write_reader(record: RecordedEvent) -> Reader | None:
    """The reader whose receipts the write `record` follows: its own adapter, producer and
    run; None for a write with no producer."""
    if not record.producer_task_id:
        return None
    return (record.source_adapter or "", record.producer_task_id, record.run_id or "")


class LineageProjector:
    """Folds recall receipts and declared sources into readers' source sets and links."""

    name = "lineage"
    version = 2
    tables = sql_reads.LINEAGE_TABLES

    def create(self, writer: TableWriter) -> None:
        for statement in sql_reads.LINEAGE_DDL:
            writer.execute(statement)

    def apply(self, writer: TableWriter, records: Sequence[RecordedEvent]) -> None:
        # Each reader's source set (None: nothing reached it yet), read for the whole batch
        # at once; the batch's rows are inserted at its end (nothing here reads them).
        sets = _source_sets(writer, records)
        sources: list[tuple[int, int, int | None]] = []
        writes: list[tuple[int, int]] = []
        for record in records:
            payload = record.payload
            if isinstance(payload, RecallRecorded):
                reader = receipt_reader(record, payload)
                exposed = [p for p in payload.included if 0 < p < record.position]
                if reader is None or not exposed:
                    continue
                named = sets[reader]
                if named is None:
                    named = sets[reader] = record.position
                    writer.execute(sql_reads.LINEAGE_READER_INSERT, (*reader, named))
                sources += [(named, p, record.position) for p in exposed]
            elif isinstance(payload, (MemoryAdded, FactPublished)):
                _link(record, sets, declared_sources(payload), sources, writes)
        if sources:
            writer.executemany(sql_reads.LINEAGE_SOURCE_INSERT, sources)
        if writes:
            writer.executemany(sql_reads.LINEAGE_WRITE_INSERT, writes)


def _source_sets(
    writer: TableWriter, records: Sequence[RecordedEvent]
) -> dict[Reader | None, int | None]:
    """The source set of every reader `records` name (None: none yet), in a few queries."""
    readers: set[Reader] = set()
    for record in records:
        payload = record.payload
        if isinstance(payload, RecallRecorded):
            reader = receipt_reader(record, payload)
        elif isinstance(payload, (MemoryAdded, FactPublished)):
            reader = write_reader(record)
        else:
            continue
        if reader is not None:
            readers.add(reader)
    sets: dict[Reader | None, int | None] = dict.fromkeys(readers)
    sets[None] = None
    wanted = sorted(readers)
    if len(wanted) == 1:
        found = sql_reads.LINEAGE_READER_SET.first(writer, wanted[0])
        sets[wanted[0]] = None if found is None else found.source_set
        return sets
    step = sql_reads.READERS_PER_QUERY
    for start in range(0, len(wanted), step):
        chunk = wanted[start : start + step]
        query = _readers_query(len(chunk))
        for row in query.rows(writer, [part for reader in chunk for part in reader]):
            sets[row.adapter_key, row.task_id, row.run_key] = row.source_set
    return sets


@functools.lru_cache(maxsize=64)
def _readers_query(count: int) -> Query[sql_reads.ReaderSet]:
    """The query for the source sets of `count` readers (kept: batches repeat their size)."""
    return sql_reads.LINEAGE_READER_SETS.format(readers=", ".join(["(?, ?, ?)"] * count))


def _link(
    record: RecordedEvent,
    sets: dict[Reader | None, int | None],
    declared: Sequence[int],
    sources: list[tuple[int, int, int | None]],
    writes: list[tuple[int, int]],
) -> None:
    """Link a write to its reader's source set, and to a set of its own declared sources."""
    read = sets[write_reader(record)]
    if read is not None:
        writes.append((record.position, read))
    own = sorted({p for p in declared if 0 < p < record.position})
    if own:
        sources += [(record.position, p, None) for p in own]
        writes.append((record.position, record.position))


def declared_sources(payload: MemoryAdded | FactPublished) -> tuple[int, ...]:
    """The positions a write's author declared it was derived from (none when unset)."""
    declared = payload.derived_from
    return () if isinstance(declared, UnsetType) else declared


def check_sources(head: int, events: Iterable[NewEvent]) -> None:
    """Refuse events declaring a source past the log's `head` (one not written yet)."""
    for event in events:
        payload = event.payload
        declared = (
            declared_sources(payload) if isinstance(payload, (MemoryAdded, FactPublished)) else ()
        )
        if declared and max(declared) > head:
            raise InvalidInputError(
                f"derived_from names position {max(declared)}, past the log's head ({head})"
            )


def parents(db: Queryable, positions: Sequence[int]) -> list[Link]:
    """Every link into `positions`: from a child (`origin`) to its parent (`reached`)."""
    return sql_reads.LINEAGE_PARENTS.among(db, positions)


def children(db: Queryable, positions: Sequence[int]) -> list[Link]:
    """Every link out of `positions`: from a parent (`origin`) to its child (`reached`)."""
    return sql_reads.LINEAGE_CHILDREN.among(db, positions)


def ancestors(db: Queryable, positions: Sequence[int]) -> dict[int, set[int]]:
    """Every ancestor of each of `positions` that has any."""
    found: dict[int, set[int]] = {}
    for row in sql_reads.LINEAGE_ANCESTORS.among(db, positions):
        found.setdefault(row.root, set()).add(row.position)
    return found
