"""Copying a format-v1 log into a new format-v2 log, and checking a copy against its source.

`migrate` verifies the v1 log, then writes a new log file whose position 1 is a
`LogMigrated` statement, signed by an operator key of the v1 log, naming that log's id, size
and head chain value; the v1 events follow in order, each written by the migration and
carrying its original provenance as `MigrationClaims`, positions in payloads moved up by one
(`eventlog.migration`). Readers take the claims as provenance, and the projector checks each
copied operator action's original signature, only where the statement vouches for them: the
migrated log answers as the v1 log did, its positions one higher. `check_previous` holds a
migrated log to the v1 file it came from (`factledger verify --previous OLD`).
"""

from __future__ import annotations

import base64
import hmac
import itertools
import os
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from eventlog import (
    InvalidInputError,
    LogExistsError,
    NewEvent,
    RecordedEvent,
    SQLiteEventLog,
    Unreadable,
)
from eventlog.checks import check_path, is_dsn
from eventlog.events import LogMigrated, MigrationClaims
from eventlog.formats import V1
from eventlog.migration import shift_positions, statement_in
from eventlog.signing import authorization_of
from eventlog.verify import verify_chain
from replay.errors import NotAuthorizedError
from replay.keys import KeySource, OperatorKey, operator_key
from replay.operators import Actor, list_operators, sign

if TYPE_CHECKING:
    from replay.ledger import Ledger

MIGRATOR = Actor(producer_task_id="migrate")
BATCH = 1000
"""Events copied per append (all in one transaction)."""


class MigrationReport(msgspec.Struct, frozen=True, kw_only=True):
    """What `migrate` wrote."""

    source: str
    target: str
    log_id: str
    previous_log_id: str
    previous_size: int
    previous_head_chain_hash: str
    key_id: str
    """The operator key that signed the statement at position 1."""
    events: int
    """Events copied (positions 2 to `events + 1`)."""


def migrate(
    ledger: Ledger,
    new: str | os.PathLike[str],
    *,
    key: KeySource,
    actor: Actor = MIGRATOR,
) -> MigrationReport:
    """Copy the format-v1 log `ledger` holds into the new log file `new`, the statement at
    its position 1 signed by `key`, an operator key of the v1 log at its head. Refused, with
    nothing written, when `new` exists or is a DSN, the log is not format 1, it does not
    verify, it holds a row this version cannot read, or `key` is not one of its operators."""
    target = _new_file(new)
    signer = operator_key(key)
    previous = ledger.event_log
    if previous.log_format is not V1:
        raise InvalidInputError(
            f"{ledger.target} holds a format-v{previous.log_format.version} log: only "
            "format-v1 logs are migrated; nothing was written"
        )
    report = verify_chain(previous)
    if not report.ok:
        raise InvalidInputError(
            f"{ledger.target} does not verify ({report.problem}: {report.reason}); a log is "
            "migrated only as it verifies; nothing was written"
        )
    if report.findings:
        found = report.findings[0]
        raise InvalidInputError(
            f"{ledger.target} holds a row this version cannot read at position "
            f"{found.position} ({found.reason}); nothing was written"
        )
    _check_operator(ledger, signer)
    size, head_chain = report.head_position, report.head_chain_hash
    statement = LogMigrated(
        previous_log_id=previous.log_id,
        previous_format=V1.version,
        previous_size=size,
        previous_head_chain_hash=head_chain,
        name=signer.name,
        key_id=signer.key_id,
        public_key=base64.b64encode(signer.public.raw).decode("ascii"),
    )

    def first(log_id: str) -> list[NewEvent]:
        return [sign(log_id, statement, actor=actor, key=signer)]

    try:
        made = SQLiteEventLog(target, first_events=first)
    except LogExistsError:
        raise InvalidInputError(f"{target} holds a log already; nothing was written") from None
    try:
        with closing(made):
            log_id = made.log_id
        _copy(ledger, target, size, actor)
    except BaseException:
        _remove(target)
        raise
    return MigrationReport(
        source=ledger.target,
        target=target,
        log_id=log_id,
        previous_log_id=previous.log_id,
        previous_size=size,
        previous_head_chain_hash=head_chain,
        key_id=signer.key_id,
        events=size,
    )


def previous_problem(ledger: Ledger, old: str | os.PathLike[str]) -> str | None:
    """Why the log `ledger` holds is not a migration of the v1 log file `old`, or None:
    its statement at position 1 must be validly signed and name `old`'s id, size and head
    chain value (compared in constant time); `old` must verify, its key must be one of
    `old`'s operators at its head, and each copied event must be `old`'s event at its
    position less one, as `migrate` writes it."""
    from replay.ledger import Ledger

    event_log = ledger.event_log
    first = next(event_log.read(until=1), None)
    found = None if first is None else statement_in(event_log.log_id, first)
    if first is None or found is None or not isinstance(first.payload, LogMigrated):
        return "position 1 holds no validly signed migration statement"
    stated = first.payload
    with Ledger.open(old) as source:
        report = verify_chain(source.event_log)
        if not report.ok or report.findings:
            return f"{source.target} does not verify: {report.reason or 'an unreadable row'}"
        same = [
            hmac.compare_digest(stated.previous_log_id.encode(), source.log_id.encode()),
            hmac.compare_digest(
                str(stated.previous_size).encode(), str(report.head_position).encode()
            ),
            hmac.compare_digest(
                stated.previous_head_chain_hash.encode(), report.head_chain_hash.encode()
            ),
        ]
        if not all(same):
            return (
                f"the migration statement names log {stated.previous_log_id} at size "
                f"{stated.previous_size}, which is not {source.target} (log {source.log_id}, "
                f"size {report.head_position}, or another head chain value)"
            )
        operators = list_operators(source).operators
        if not any(o.key_id == stated.key_id and o.removed_position is None for o in operators):
            return f"the statement's key {stated.key_id} is not an operator key of {source.target}"
        last = min(stated.previous_size + 1, event_log.head().position)
        copies = event_log.read(after=1, until=last)
        pairs = itertools.zip_longest(source.event_log.read(), copies)
        for position, (original, copy) in enumerate(pairs, start=2):
            expected = None if original is None else _stored(_copied(source.log_id, original))
            if copy is None or expected != _stored(copy):
                return f"position {position} is not {source.target}'s event {position - 1}"
    return None


def _new_file(new: str | os.PathLike[str]) -> str:
    target = check_path(new)
    if is_dsn(target):
        raise InvalidInputError(
            "a migration writes a new log file; migrating into PostgreSQL is not supported "
            "(migrate into a file, then copy it with export); nothing was written"
        )
    if os.path.lexists(target) or any(os.path.lexists(target + s) for s in ("-wal", "-journal")):
        raise InvalidInputError(
            f"{target} exists: a migration writes a new file; nothing was written"
        )
    return target


def _check_operator(ledger: Ledger, signer: OperatorKey) -> None:
    mine = signer.public.verifier_key
    for found in list_operators(ledger).operators:
        if found.removed_position is None and hmac.compare_digest(found.public_key, mine):
            return
    raise NotAuthorizedError(
        f"key {signer.key_id} ({signer.name}) is not an operator key of {ledger.target}: "
        "only one of its operators may vouch for its migration; nothing was written"
    )


def _copied(log_id: str, record: RecordedEvent) -> RecordedEvent:
    """The event `migrate` writes for `record`, event `record.position` of the log `log_id`:
    its payload's positions moved up by one, its provenance kept as claims."""
    claims = MigrationClaims(
        log_id=log_id,
        position=record.position,
        event_id=record.event_id,
        ts_ns=record.ts_ns,
        producer_task_id=record.producer_task_id,
        run_id=record.run_id,
        source_adapter=record.source_adapter,
        content_hash=None if authorization_of(record.payload) is None else record.content_hash,
    )
    payload = msgspec.structs.replace(shift_positions(record.payload, 1), migrated=claims)
    return msgspec.structs.replace(record, payload=payload)


def _stored(record: RecordedEvent) -> bytes:
    return msgspec.json.encode(record.payload)


def _events(ledger: Ledger, size: int, actor: Actor) -> Iterator[NewEvent]:
    for record in ledger.event_log.read(until=size):
        if isinstance(record.payload, Unreadable):
            raise InvalidInputError(
                f"position {record.position} of {ledger.target} is unreadable; nothing was written"
            )
        copy = _copied(ledger.log_id, record).payload
        assert not isinstance(copy, Unreadable)
        yield actor.event(copy)


def _copy(ledger: Ledger, target: str, size: int, actor: Actor) -> None:
    from replay.ledger import Ledger

    with Ledger.open(target, read_only=False) as new, new.write_transaction("migrating") as tx:
        batch: list[NewEvent] = []
        for event in _events(ledger, size, actor):
            batch.append(event)
            if len(batch) == BATCH:
                tx.append(batch)
                batch = []
        if batch:
            tx.append(batch)


def _remove(target: str) -> None:
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(target + suffix).unlink(missing_ok=True)
