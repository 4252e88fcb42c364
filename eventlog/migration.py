"""A migrated log's events read as the events they were copied from, under its statement.

`factledger migrate` makes a format-v2 log whose position 1 is a `LogMigrated` statement,
signed by the key it names, followed by the events of a format-v1 log in order, each
carrying `MigrationClaims` (what it was there). Positions move up by one; positions inside
payloads (entry ids, quarantined positions, a receipt's inclusions, ...) are written moved
up too (`shift_positions`), so every reference keeps naming the same event.

A reader takes the claims as the event's provenance (producer, run, adapter, time) only for
an event the statement vouches for: a validly signed statement at position 1, the event at
position 2 to `previous_size + 1`, claiming the statement's previous log and its own
position less one. Any other event claiming to be migrated is read as `Unreadable`, which
changes nothing: no event written after a migration, and none in a log with no statement,
can pass itself off as one. Whether the statement's key was an operator key of the previous
log is checked against that log's file (`replay.migrate.check_previous`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple, assert_never

import msgspec
from msgspec import UNSET

from eventlog.backend import StoredRow
from eventlog.codec import read_row
from eventlog.events import (
    ConflictPolicySet,
    ContentErased,
    Exclusion,
    FactApproved,
    FactPublished,
    FactRejected,
    LogMigrated,
    MemoryAdded,
    MemoryRemoved,
    MemoryReweighted,
    MigrationClaims,
    OperatorAdded,
    OperatorRemoved,
    QuarantineApplied,
    QuarantineReleased,
    RecallRecorded,
    RecordedEvent,
    RecordedPayload,
    Unreadable,
)
from eventlog.formats import LogFormat
from eventlog.signing import action_statement, authorization_of, key_id, strict_base64, verify

NOT_VOUCHED = (
    "it claims to be copied from another log, but the log's migration statement does not "
    "vouch for it at this position"
)


class Statement(NamedTuple):
    """What a log's valid migration statement vouches for."""

    previous_log_id: str
    previous_size: int

    def vouches_for(self, position: int, claims: MigrationClaims) -> bool:
        """Whether the event at `position` claiming `claims` is one the statement covers."""
        return (
            2 <= position <= self.previous_size + 1
            and claims.position == position - 1
            and claims.log_id == self.previous_log_id
        )


def statement_in(log_id: str, first: RecordedEvent) -> Statement | None:
    """The statement `first` (a log's event at position 1) makes, if it is a migration
    statement signed by the key it names for the log `log_id`; None otherwise."""
    payload = first.payload
    if first.position != 1 or not isinstance(payload, LogMigrated):
        return None
    raw = strict_base64(payload.public_key)
    auth = authorization_of(payload)
    signature = None if auth is None else strict_base64(auth.signature)
    if (
        raw is None
        or auth is None
        or signature is None
        or auth.key_id != payload.key_id
        or key_id(payload.name, raw) != payload.key_id
    ):
        return None
    signed = action_statement(
        log_id=log_id,
        event_id=first.event_id,
        producer_task_id=first.producer_task_id,
        run_id=first.run_id,
        source_adapter=first.source_adapter,
        content_hash=first.content_hash,
        payload=payload,
    )
    if not verify(raw, signature, signed):
        return None
    return Statement(payload.previous_log_id, payload.previous_size)


class Migration:
    """Reads a log's events as their claims say, where its statement vouches for them. The
    statement is looked up once, when the first event claiming to be migrated is read (a log
    with none never pays for it); position 1 never changes once written."""

    def __init__(self, log_id: str) -> None:
        self._log_id = log_id
        self._statement: Statement | None = None
        self._looked_up = False

    def honour(
        self, record: RecordedEvent, first: Callable[[], RecordedEvent | None]
    ) -> RecordedEvent:
        """`record` as readers take it: an event with no claims as it is; a migrated one
        vouched for with its claimed producer, run, adapter and time; any other claiming to be
        migrated as `Unreadable`. `first` reads the log's event at position 1, if any."""
        claims = record.payload.migrated
        if claims is UNSET:
            return record
        statement = self._statement_of(first)
        if statement is None or not statement.vouches_for(record.position, claims):
            return msgspec.structs.replace(
                record, payload=Unreadable(reason=NOT_VOUCHED, claimed_kind=record.kind)
            )
        return msgspec.structs.replace(
            record,
            ts_ns=claims.ts_ns,
            producer_task_id=claims.producer_task_id,
            run_id=claims.run_id,
            source_adapter=claims.source_adapter,
        )

    def _statement_of(self, first: Callable[[], RecordedEvent | None]) -> Statement | None:
        if not self._looked_up:
            found = first()
            if found is None:
                return None
            self._statement = statement_in(self._log_id, found)
            self._looked_up = True
        return self._statement


def original_statement(record: RecordedEvent) -> bytes | None:
    """What the operator signed for the event `record` in the format-v1 log it was copied
    from (its claims, its payload as it was there); None unless `record` is migrated."""
    claims = record.payload.migrated
    if claims is UNSET or claims.content_hash is None:
        return None
    original = msgspec.structs.replace(shift_positions(record.payload, -1), migrated=UNSET)
    return action_statement(
        log_id=claims.log_id,
        event_id=claims.event_id,
        producer_task_id=claims.producer_task_id,
        run_id=claims.run_id,
        source_adapter=claims.source_adapter,
        content_hash=claims.content_hash,
        payload=original,
    )


def shift_positions(payload: RecordedPayload, by: int) -> RecordedPayload:
    """`payload` with every log position it names moved by `by`."""

    def moved(positions: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(p + by for p in positions)

    replace = msgspec.structs.replace
    match payload:
        case MemoryAdded() | FactPublished():
            found = payload.derived_from
            return payload if found is UNSET else replace(payload, derived_from=moved(found))
        case MemoryRemoved():
            return replace(payload, entry_ids=moved(payload.entry_ids))
        case RecallRecorded():
            return replace(
                payload,
                included=moved(payload.included),
                excluded=tuple(_moved_exclusion(e, by) for e in payload.excluded),
                head_position=payload.head_position + by,
            )
        case QuarantineApplied():
            return replace(payload, match_positions=moved(payload.match_positions))
        case QuarantineReleased():
            return replace(payload, quarantine_position=payload.quarantine_position + by)
        case FactApproved() | FactRejected():
            return replace(payload, position=payload.position + by)
        case ContentErased():
            return replace(payload, positions=moved(payload.positions))
        case (
            MemoryReweighted()
            | OperatorAdded()
            | OperatorRemoved()
            | ConflictPolicySet()
            | LogMigrated()
            | Unreadable()
        ):
            return payload
        case _:
            assert_never(payload)


def _moved_exclusion(exclusion: Exclusion, by: int) -> Exclusion:
    source = exclusion.source
    return msgspec.structs.replace(
        exclusion,
        position=exclusion.position + by,
        source=source if source is UNSET else source + by,
    )


Fetch = Callable[[int, int, int], list[StoredRow]]
"""Reads stored rows after a position up to another, at most a count (`eventlog.rows`)."""


class Reading(NamedTuple):
    """How a log's rows are read as events: its format, and its migration statement's
    claims (`eventlog.migration`)."""

    log_format: LogFormat
    migration: Migration

    def event(self, row: StoredRow, fetch: Fetch) -> RecordedEvent:
        """The event `row` holds (`eventlog.codec.read_row`), its migration claims honoured
        as the log's statement says; `fetch` reads the log (its position 1)."""
        return self.honour(read_row(row, self.log_format), fetch)

    def honour(self, record: RecordedEvent, fetch: Fetch) -> RecordedEvent:
        """`record` as readers take it (`eventlog.migration.Migration.honour`)."""

        def first() -> RecordedEvent | None:
            rows = fetch(0, 1, 1)
            return read_row(rows[0], self.log_format) if rows else None

        return self.migration.honour(record, first)
