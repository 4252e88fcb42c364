"""Receipts: the projector that indexes them, and reading them back as typed records.

Every read by a named reader appends a `recall_recorded` event (`projections._reading`).
`ReceiptProjector` indexes those events by reader and by the events they name (forensics);
`receipts` finds them by task, run and position in that index and returns each as its event
records it (`Receipt`): the index only finds them, the log says what they hold.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from eventlog import (
    Exclusion,
    InvalidInputError,
    LogSnapshot,
    RecallRecorded,
    RecordedEvent,
    TrustSettings,
)
from eventlog.checks import check_optional_actor, check_position
from eventlog.logs import get_logger
from projections import _sql_reads as sql_reads
from projections._projector import TableWriter
from projections._sql import Queryable
from projections._validation import check_limit

MAX_RECEIPTS = 10_000
"""The most receipts one call returns (page on with `after`)."""

log = get_logger("factledger.projections")


class Receipt(msgspec.Struct, frozen=True, kw_only=True):
    """A read's receipt, as the event at `position` records it: who read (task, run,
    adapter), what they asked for (tags, limit), the positions shown (`included`) and those
    kept out and why (`excluded`, the first ones), the trust policy, the log head read at,
    and the BLAKE3 hash of what was shown."""

    position: int
    ts_ns: int
    task_id: str | None
    run_id: str | None
    adapter: str | None
    tags: tuple[str, ...]
    limit: int
    included: tuple[int, ...]
    excluded: tuple[Exclusion, ...]
    policy: TrustSettings
    head_position: int
    rendered_hash: str

    @property
    def kept_out_everything(self) -> bool:
        """Whether the read found candidates and kept out every one (it showed nothing)."""
        return not self.included and bool(self.excluded)


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


def receipts(
    index: Queryable,
    events: LogSnapshot,
    *,
    task_id: str | None = None,
    run_id: str | None = None,
    after: int = 0,
    limit: int = 100,
) -> list[Receipt]:
    """The receipts after position `after`, oldest first, of reads for `task_id` and
    `run_id` (None: any), at most `limit`: found in the read model `index`, each read from
    the log `events` as its event records it. A row of the index whose event is not a
    receipt for that reader (an edited read model) is logged and passed over."""
    task = check_optional_actor("task_id", task_id)
    run = check_optional_actor("run_id", run_id)
    start = check_position("after", after)
    count = check_limit(limit)
    if count > MAX_RECEIPTS:
        raise InvalidInputError(f"limit must be at most {MAX_RECEIPTS}, got {count}")
    found = sql_reads.RECEIPTS_AFTER.rows(index, (start, task, task, run, run, count))
    shown: list[Receipt] = []
    for row in found:
        event = events.event_at(row.position)
        payload = event.payload
        if not isinstance(payload, RecallRecorded) or (
            (task is not None and payload.task_id != task)
            or (run is not None and payload.run_id != run)
        ):
            log.warning("receipt_index_mismatch", position=row.position)
            continue
        shown.append(
            Receipt(
                position=event.position,
                ts_ns=event.ts_ns,
                task_id=payload.task_id,
                run_id=payload.run_id,
                adapter=payload.adapter,
                tags=payload.tags,
                limit=payload.limit,
                included=payload.included,
                excluded=payload.excluded,
                policy=payload.policy,
                head_position=payload.head_position,
                rendered_hash=payload.rendered_hash,
            )
        )
    return shown
