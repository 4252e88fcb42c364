"""Moving history out and in: the raw log as JSON Lines, and legacy databases as events.

Export format (`factledger-export/1`): the first line is a header naming the log id and the
genesis context; each further line is one event with every envelope field, its chain hash,
and `body`, the exact stored bytes the chain covers (README, "Verifying an export offline").
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TextIO

import msgspec

from eventlog import decode_record, open_log
from eventlog.chain import GENESIS_CONTEXT
from projections import LegacyFile, SQLiteMemoryStore, legacy_events

EXPORT_FORMAT = "factledger-export/1"
Progress = Callable[[int, int], None]


class ExportHeader(msgspec.Struct, frozen=True, kw_only=True):
    """The first line of an export."""

    format: str
    log_id: str
    genesis_context: str
    events: int
    head_chain_hash: str


class ExportedEvent(msgspec.Struct, frozen=True, kw_only=True):
    """One line of an export: the envelope, the chain hash and the stored bytes."""

    position: int
    event_id: str
    kind: str
    ts_ns: int
    producer_task_id: str
    run_id: str | None
    source_adapter: str | None
    content_hash: str
    chain_hash: str
    payload: msgspec.Raw
    body: str


class ImportReport(msgspec.Struct, frozen=True, kw_only=True):
    """What importing a legacy database did."""

    source: str
    rows: int
    imported: int
    already_present: int
    first_position: int | None
    last_position: int | None


_ENCODER = msgspec.json.Encoder()


def export_log(
    db_path: str | os.PathLike[str], out: TextIO, *, progress: Progress | None = None
) -> ExportHeader:
    """Write the whole log to `out` as JSON Lines (streaming; the database is opened read-only)."""
    log = open_log(db_path, read_only=True)
    try:
        head = log.head()
        header = ExportHeader(
            format=EXPORT_FORMAT,
            log_id=log.log_id,
            genesis_context=GENESIS_CONTEXT,
            events=head.position,
            head_chain_hash=head.chain_hash,
        )
        out.write(_ENCODER.encode(header).decode() + "\n")
        for row in log.scan(until=head.position):
            record = decode_record(row.body, position=row.position, chain_hash=row.chain_hash.hex())
            line = ExportedEvent(
                position=record.position,
                event_id=record.event_id,
                kind=record.kind,
                ts_ns=record.ts_ns,
                producer_task_id=record.producer_task_id,
                run_id=record.run_id,
                source_adapter=record.source_adapter,
                content_hash=record.content_hash,
                chain_hash=record.chain_hash,
                payload=msgspec.Raw(_ENCODER.encode(record.payload)),
                body=row.body.decode("utf-8"),
            )
            out.write(_ENCODER.encode(line).decode() + "\n")
            if progress is not None:
                progress(row.position, head.position)
        return header
    finally:
        log.close()


def import_legacy(db_path: str | os.PathLike[str], source: str | os.PathLike[str]) -> ImportReport:
    """Import the `memory` table of a legacy database file, once: rows already imported (from
    this or an identical file) are recognised by their event ids and written again never."""
    legacy = LegacyFile(source)
    try:
        events = legacy_events(legacy) or []
    finally:
        legacy.close()
    with SQLiteMemoryStore(db_path) as store:
        before = store.event_log.head().position
        with store.write_transaction() as tx:
            records = tx.append(events) if events else []
    new = [r.position for r in records if r.position > before]
    return ImportReport(
        source=str(source),
        rows=len(events),
        imported=len(new),
        already_present=len(events) - len(new),
        first_position=new[0] if new else None,
        last_position=new[-1] if new else None,
    )
