"""Quarantine: stop suspect events reaching any reader, without destroying evidence.

A quarantine is an event. From its position on, the earlier content events it covers (memory
entries and fact versions matching every given selector) reach no reader: list, query,
get_relevant, subscribe and the prompt builder skip them, and subscribe falls back to the
newest version not quarantined. The log, history and verify keep them. A release is another
event that undoes one quarantine.

Both are operator actions: once the log has an operator key, they take effect only when
signed by one (`key=`), and without a valid key they are refused before anything is written.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from eventlog import (
    InvalidInputError,
    QuarantineApplied,
    QuarantineReleased,
)
from eventlog.checks import (
    check_optional_identifier,
    check_position,
    check_positions,
)
from eventlog.logs import get_logger
from projections.internal import (
    inquiries,
    matching_positions,
)
from replay.keys import KeySource, operator_key
from replay.operators import Actor, append_with_effect, check_reason, signed_event

if TYPE_CHECKING:
    from replay.ledger import Ledger

log = get_logger("factledger.replay")

RESPONDER = Actor(producer_task_id="responder")


def quarantine(
    ledger: Ledger,
    *,
    positions: Iterable[int] | None = None,
    producer_task_id: str | None = None,
    source_adapter: str | None = None,
    reason: str,
    actor: Actor = RESPONDER,
    key: KeySource | None = None,
) -> int:
    """Quarantine earlier events matching every given selector; return the event's position.

    Refuses (and writes nothing) when no selector is given, nothing written so far matches,
    or the log has an operator key and `key` is not one of them.
    """
    chosen = check_positions("positions", positions)
    producer = check_optional_identifier("producer_task_id", producer_task_id)
    adapter = check_optional_identifier("source_adapter", source_adapter)
    if not chosen and producer is None and adapter is None:
        raise InvalidInputError(
            "quarantine needs at least one selector: positions, producer_task_id or source_adapter"
        )
    payload = QuarantineApplied(
        reason=check_reason(reason),
        match_positions=chosen,
        match_producer_task_id=producer,
        match_source_adapter=adapter,
    )
    signer = None if key is None else operator_key(key)
    with ledger.write_transaction("quarantine") as tx:
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
        event = signed_event(
            tx, ledger.log_id, payload, actor=actor, key=signer, action="quarantine"
        )
        [record] = append_with_effect(tx, [event])
    log.info("quarantine_applied", position=record.position, covered=len(covered))
    return record.position


def release(
    ledger: Ledger,
    quarantine_position: int,
    *,
    reason: str,
    actor: Actor = RESPONDER,
    key: KeySource | None = None,
) -> int:
    """Undo the quarantine appended at `quarantine_position`; return the release's position.
    Needs `key` as `quarantine` does."""
    target = check_position("quarantine_position", quarantine_position, minimum=1)
    payload = QuarantineReleased(quarantine_position=target, reason=check_reason(reason))
    signer = None if key is None else operator_key(key)
    with ledger.write_transaction("release") as tx:
        found = inquiries.quarantine_state(tx, target)
        if found is None:
            refused = next(iter(inquiries.unauthorized(tx, [target])), None)
            if refused is not None:
                raise InvalidInputError(
                    f"the {refused.kind} at position {target} took no effect "
                    f"({refused.reason}): there is nothing to release"
                )
            raise InvalidInputError(f"position {target} is not a quarantine")
        if found.released_by is not None:
            raise InvalidInputError(
                f"the quarantine at position {target} was already released at {found.released_by}"
            )
        event = signed_event(tx, ledger.log_id, payload, actor=actor, key=signer, action="release")
        [record] = append_with_effect(tx, [event])
    log.info("quarantine_released", position=record.position, quarantine_position=target)
    return record.position
