"""Quarantine: stop suspect events reaching any reader, without destroying evidence.

A quarantine is an event. From its position on, the earlier content events it covers (memory
entries and fact versions matching every given selector) reach no reader: list, query,
get_relevant, subscribe and the prompt builder skip them, and subscribe falls back to the
newest version not quarantined. The log, history and verify keep them. A release is another
event that undoes one quarantine.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from eventlog import (
    InvalidInputError,
    InvalidTypeError,
    NewEvent,
    QuarantineApplied,
    QuarantineReleased,
)
from eventlog.checks import (
    check_identifier,
    check_optional_identifier,
    check_position,
    check_positions,
)
from eventlog.logs import get_logger
from projections import SQLiteMemoryStore, inquiries, matching_positions

log = get_logger("factledger.replay")

MAX_REASON_CHARS = 2000


def quarantine(
    db_path: str | os.PathLike[str],
    *,
    positions: Iterable[int] | None = None,
    producer_task_id: str | None = None,
    source_adapter: str | None = None,
    reason: str,
    by: str = "responder",
) -> int:
    """Quarantine earlier events matching every given selector; return the event's position.

    Refuses (and writes nothing) when no selector is given or nothing written so far matches.
    """
    chosen = check_positions("positions", positions)
    producer = check_optional_identifier("producer_task_id", producer_task_id)
    adapter = check_optional_identifier("source_adapter", source_adapter)
    if not chosen and producer is None and adapter is None:
        raise InvalidInputError(
            "quarantine needs at least one selector: positions, producer_task_id or source_adapter"
        )
    payload = QuarantineApplied(
        reason=_reason(reason),
        match_positions=chosen,
        match_producer_task_id=producer,
        match_source_adapter=adapter,
    )
    actor = check_identifier("by", by)
    with SQLiteMemoryStore(db_path) as store, store.write_transaction() as tx:
        head = tx.head_position()
        beyond = [p for p in chosen if p > head]
        if beyond:
            raise InvalidInputError(f"positions {beyond} are past the log head {head}")
        covered = matching_positions(tx, head + 1, payload)
        if not covered:
            raise InvalidInputError(
                "no memory entry or fact version written so far matches every selector; "
                "nothing was quarantined"
            )
        [record] = tx.append([NewEvent(payload=payload, producer_task_id=actor)])
    log.info("quarantine_applied", position=record.position, covered=len(covered))
    return record.position


def release(
    db_path: str | os.PathLike[str],
    quarantine_position: int,
    *,
    reason: str,
    by: str = "responder",
) -> int:
    """Undo the quarantine appended at `quarantine_position`; return the release's position."""
    target = check_position("quarantine_position", quarantine_position, minimum=1)
    payload = QuarantineReleased(quarantine_position=target, reason=_reason(reason))
    actor = check_identifier("by", by)
    with SQLiteMemoryStore(db_path) as store, store.write_transaction() as tx:
        found = inquiries.quarantine_state(tx, target)
        if found is None:
            raise InvalidInputError(f"position {target} is not a quarantine")
        if found[1] is not None:
            raise InvalidInputError(
                f"the quarantine at position {target} was already released at {found[1]}"
            )
        [record] = tx.append([NewEvent(payload=payload, producer_task_id=actor)])
    log.info("quarantine_released", position=record.position, quarantine_position=target)
    return record.position


def _reason(reason: object) -> str:
    if not isinstance(reason, str):
        raise InvalidTypeError(f"reason must be str, not {type(reason).__name__}")
    if not reason.strip():
        raise InvalidInputError("reason must say why: it is the record responders read later")
    if len(reason) > MAX_REASON_CHARS or "\x00" in reason:
        raise InvalidInputError(f"reason must be at most {MAX_REASON_CHARS} characters, no NUL")
    return reason
