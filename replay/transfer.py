"""Moving history out and in: the raw log as JSON Lines, and legacy databases as events.

Export format (`factledger-export/2`, docs/spec/export.md): the first line is a header naming
the log id, its format and the genesis domain; each further line is one event, once: `body`,
the exact stored bytes the chain covers, its chain hash and, in format 2, its text and salt
beside it. The envelope fields (kind, time, writer) are in `body`; `fields=True` adds a copy
of them for reading, which a verifier holds to `body`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from contextlib import closing
from typing import TYPE_CHECKING, TextIO

import msgspec

from eventlog import MemoryAdded, NewEvent, RecordedEvent, read_row
from eventlog.chain import GENESIS_CONTEXT, GENESIS_DOMAIN
from projections.internal import (
    LegacyFile,
    SecretsMode,
    chosen_mode,
    inquiries,
    legacy_events,
    legacy_identity,
)
from replay.keys import KeySource, operator_key
from replay.operators import Actor, append_with_effect, signed_event

if TYPE_CHECKING:
    from replay.ledger import Ledger

EXPORT_FORMAT = "factledger-export/2"
Progress = Callable[[int, int], None]
PROGRESS_EVERY = 1024
"""Rows written between calls to an export's `progress` (and one at the last)."""
ERASED = "erased"
"""The `text_state` of a text an authorized erasure removed."""
IMPORTER = Actor(producer_task_id="import-legacy")


class ExportHeader(msgspec.Struct, frozen=True, kw_only=True):
    """The first line of an export."""

    format: str
    log_id: str
    log_format: int
    """The log's format (`eventlog.formats`): 2, SHA-256 chain with texts beside the bodies;
    1, BLAKE3 chain with texts inside them."""
    genesis_context: str
    """What the genesis hashes before the log id (v2), or its BLAKE3 context (v1)."""
    events: int
    head_chain_hash: str


class EventFields(msgspec.Struct, frozen=True, kw_only=True):
    """A copy of an event's envelope fields, for reading (`export(fields=True)`): each is
    what `body` holds."""

    position: int
    event_id: str
    kind: str
    ts_ns: int
    producer_task_id: str
    run_id: str | None
    source_adapter: str | None


class ExportedEvent(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One line of an export: the chained bytes, the chain hash, and the text beside them."""

    body: str
    """The chained bytes as UTF-8 (invalid bytes replaced): in format 2 without the text."""
    chain_hash: str
    text: str | None = None
    """Format 2: the text `content_hash` is keyed over, when intact (none for kinds
    without one, or when not intact)."""
    salt: str | None = None
    """Format 2: the hex salt keying `content_hash` (none when no text is stored)."""
    text_state: str = "intact"
    """`intact`, or why no text is given: `erased` (an authorized erasure removed it),
    `absent` or `mismatch` (as `verify` finds them)."""
    fields: EventFields | None = None


class ImportReport(msgspec.Struct, frozen=True, kw_only=True):
    """What importing a legacy database did."""

    source: str
    rows: int
    imported: int
    already_present: int
    first_position: int | None
    last_position: int | None
    claims_honoured: bool
    """Whether readers take the rows' own claims (adapter, task, created_at) as their
    provenance: only when signed by an operator key. Otherwise the rows count as written by
    the importer, now, their claims shown as claims, and no trust policy trusts them
    (`unsigned_import`)."""


_ENCODER = msgspec.json.Encoder()


def export_log(
    ledger: Ledger,
    out: TextIO,
    *,
    progress: Progress | None = None,
    fields: bool = False,
) -> ExportHeader:
    """Write the whole log to `out` as JSON Lines (streaming; the log is only read), each
    event once; with `fields`, each line also copies its envelope fields for reading.
    `progress(position, head)` every `PROGRESS_EVERY` events and at the last."""
    log = ledger.event_log
    head = log.head()
    header = ExportHeader(
        format=EXPORT_FORMAT,
        log_id=log.log_id,
        log_format=log.log_format.version,
        genesis_context=(
            GENESIS_DOMAIN.decode("ascii") if log.log_format.text_beside else GENESIS_CONTEXT
        ),
        events=head.position,
        head_chain_hash=head.chain_hash,
    )
    out.write(_ENCODER.encode(header).decode() + "\n")
    with ledger.at_head() as (_, model):
        erased = inquiries.erased_positions(model)
    for row in log.scan(until=head.position):
        record = read_row(row, log.log_format) if fields or row.salt is not None else None
        intact = record is not None and record.text_state == "intact"
        line = ExportedEvent(
            body=row.body.decode("utf-8", "replace"),
            chain_hash=row.chain_hash.hex(),
            text=(
                row.text.decode("utf-8", "replace")
                if intact and row.text and row.salt is not None
                else None
            ),
            salt=None if row.salt is None else row.salt.hex(),
            text_state=ERASED
            if row.position in erased and row.salt is None
            else "intact"
            if record is None
            else record.text_state,
            fields=None if not fields or record is None else _fields(record),
        )
        out.write(_ENCODER.encode(line).decode() + "\n")
        if progress is not None and (
            row.position % PROGRESS_EVERY == 0 or row.position == head.position
        ):
            progress(row.position, head.position)
    return header


def _fields(record: RecordedEvent) -> EventFields:
    return EventFields(
        position=record.position,
        event_id=record.event_id,
        kind=record.kind,
        ts_ns=record.ts_ns,
        producer_task_id=record.producer_task_id,
        run_id=record.run_id,
        source_adapter=record.source_adapter,
    )


def import_legacy(
    ledger: Ledger,
    source: str | os.PathLike[str],
    *,
    actor: Actor = IMPORTER,
    key: KeySource | None = None,
    secrets: SecretsMode | None = None,
) -> ImportReport:
    """Import the `memory` table of a legacy database file as events written now by `actor`,
    each row's own fields kept as claims, honoured only when `key`, an operator key of the
    log, signs the import. Rows already imported (from this or an identical file) are
    written again never, but for a signed import of rows only an unsigned one imported. An
    import is an operator action: once the log has an operator key it needs `key`. A file
    with no `memory` table, or a row that cannot be represented, is an error naming it, and
    nothing is imported. Rows' text is screened for secrets in mode `secrets` (default
    FACTLEDGER_SECRETS, else 'refuse'): under 'refuse' one secret refuses the whole import
    (`SecretRefusedError`, naming the row's id and the offset)."""
    signer = None if key is None else operator_key(key)
    events = legacy_rows(source, actor, secrets=chosen_mode(secrets))
    with ledger.write_transaction("import") as tx:
        fresh = not_imported(inquiries.imported_rows(tx, signed=signer is not None), events)
        signed = [
            signed_event(tx, ledger.log_id, e.payload, actor=actor, key=signer, action="import")
            for e in fresh
        ]
        records = append_with_effect(tx, signed) if signed else []
    return import_report(source, events, [r.position for r in records], signed=signer is not None)


def legacy_rows(
    source: str | os.PathLike[str], actor: Actor, *, secrets: SecretsMode
) -> list[NewEvent]:
    """Events importing every row of the `memory` table in the file `source`, written by
    `actor`, screened for secrets in mode `secrets` (a file with no such table, or a row that
    cannot be represented, is an error)."""
    with closing(LegacyFile(source)) as legacy:
        events = legacy_events(
            legacy,
            producer_task_id=actor.producer_task_id,
            run_id=actor.run_id,
            source_adapter=actor.source_adapter,
            strict=True,
            secrets=secrets,
        )
    assert events is not None
    return events


def import_report(
    source: str | os.PathLike[str], events: list[NewEvent], new: list[int], *, signed: bool
) -> ImportReport:
    """What importing `events` from `source` did, the rows written at positions `new`."""
    return ImportReport(
        source=str(source),
        rows=len(events),
        imported=len(new),
        already_present=len(events) - len(new),
        first_position=new[0] if new else None,
        last_position=new[-1] if new else None,
        claims_honoured=signed,
    )


def not_imported(done: set[str], events: list[NewEvent]) -> list[NewEvent]:
    """`events` whose legacy rows (by the identity they claim) were not imported yet, once
    each."""
    fresh = []
    for event in events:
        payload = event.payload
        assert isinstance(payload, MemoryAdded)
        row = legacy_identity(payload)
        if row not in done:
            done.add(row)
            fresh.append(event)
    return fresh
