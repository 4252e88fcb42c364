"""The receipt projector: which prompt builds included or kept out which events."""

from __future__ import annotations

from collections.abc import Sequence

from eventlog import RecallRecorded, RecordedEvent
from projections import sql_reads
from projections.projector import TableWriter


class ReceiptProjector:
    """Indexes recall receipts by the events they name, for forensics."""

    name = "receipts"
    version = 1
    tables = sql_reads.RECEIPT_TABLES

    def create(self, writer: TableWriter) -> None:
        for statement in sql_reads.RECEIPT_DDL:
            writer.execute(statement)

    def apply(self, writer: TableWriter, records: Sequence[RecordedEvent]) -> None:
        for record in records:
            receipt = record.payload
            if not isinstance(receipt, RecallRecorded):
                continue
            writer.execute(
                sql_reads.RECEIPT_INSERT,
                (
                    record.position,
                    receipt.task_id,
                    receipt.run_id,
                    receipt.adapter,
                    receipt.head_position,
                    receipt.rendered_hash,
                    record.ts_ns,
                ),
            )
            items: list[tuple[int, int, int, str | None]] = [
                (p, record.position, 1, None) for p in receipt.included
            ]
            items += [(e.position, record.position, 0, e.reason) for e in receipt.excluded]
            writer.executemany(sql_reads.RECEIPT_ITEM_INSERT, items)
