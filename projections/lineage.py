"""Lineage: which writes were derived from which events, and the taint that follows it.

A write (a memory entry or a fact version) is derived from the events that reached its task
earlier in the same run, as its recall receipts record (the positions each included), and
from any positions its writer declared (`derived_from`). The projector folds both into
edges child -> parent; a parent always precedes its child, so the graph has no cycles.
What the graph means for trust is `projections.taint`'s.
"""

from __future__ import annotations

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
from projections import sql
from projections.projector import TableWriter
from projections.reads import Readable, Row, over_positions


class LineageProjector:
    """Folds recall receipts and declared sources into derivation edges."""

    name = "lineage"
    version = 1
    tables = sql.LINEAGE_TABLES

    def create(self, writer: TableWriter) -> None:
        for statement in sql.LINEAGE_DDL:
            writer.execute(statement)

    def apply(self, writer: TableWriter, records: Sequence[RecordedEvent]) -> None:
        # Each (task, run)'s exposures, read once per batch until a receipt adds to them.
        exposures: dict[tuple[str, str], list[Row]] = {}
        for record in records:
            payload = record.payload
            if isinstance(payload, RecallRecorded):
                if payload.task_id:
                    run = payload.run_id or ""
                    writer.executemany(
                        sql.LINEAGE_EXPOSURE_INSERT,
                        [(payload.task_id, run, p, record.position) for p in payload.included],
                    )
                    exposures.pop((payload.task_id, run), None)
            elif isinstance(payload, (MemoryAdded, FactPublished)):
                exposed: list[Row] = []
                if record.producer_task_id:
                    key = (record.producer_task_id, record.run_id or "")
                    if key not in exposures:
                        exposures[key] = writer.execute(sql.LINEAGE_EXPOSURES_OF, key)
                    exposed = exposures[key]
                _derive(writer, record, exposed, declared_sources(payload))


def _derive(
    writer: TableWriter, record: RecordedEvent, exposed: Sequence[Row], declared: Sequence[int]
) -> None:
    edges: dict[int, int | None] = {parent: via for parent, via in exposed}
    for parent in declared:
        edges.setdefault(parent, None)
    writer.executemany(
        sql.LINEAGE_EDGE_INSERT,
        [(record.position, p, via) for p, via in edges.items() if 0 < p < record.position],
    )


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


def parents(db: Readable, positions: Sequence[int]) -> list[Row]:
    """(child, parent, via receipt or None) for every edge into `positions`."""
    return over_positions(db, sql.LINEAGE_PARENTS, positions)


def children(db: Readable, positions: Sequence[int]) -> list[Row]:
    """(parent, child, via receipt or None) for every edge out of `positions`."""
    return over_positions(db, sql.LINEAGE_CHILDREN, positions)


def ancestors(db: Readable, positions: Sequence[int]) -> dict[int, set[int]]:
    """Every ancestor of each of `positions` that has any."""
    found: dict[int, set[int]] = {}
    for root, ancestor in over_positions(db, sql.LINEAGE_ANCESTORS, positions):
        found.setdefault(root, set()).add(ancestor)
    return found
