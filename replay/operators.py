"""Operators: the Ed25519 keys a log registers, and the signing of operator actions.

A log with no operator key is open: any local user can act as operator (quarantine, release,
policy, approval, rejection), as in a store without operators, and what it imports is not
trusted. `add_operator` registers a key (the first one signed by itself, later ones by an
operator key; `replay.bootstrap` makes a log with its first key in the step that creates
it); from then on every operator action must carry a signature by a key registered at its
position, and the knowledge projector gives an unsigned or badly signed one no effect
(`projections._operators`). These functions refuse such an action before writing anything,
with `NotAuthorizedError`.
"""

from __future__ import annotations

import base64
import os
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

import msgspec

from eventlog import (
    Authorization,
    EventPayload,
    InvalidInputError,
    InvalidTypeError,
    NewEvent,
    OperatorAdded,
    OperatorRemoved,
    RecordedEvent,
)
from eventlog.checks import check_actor, check_identifier, check_optional_actor
from eventlog.formats import CURRENT, SALT_BYTES
from eventlog.logs import get_logger
from eventlog.signing import action_statement
from projections.internal import (
    ProjectedTransaction,
    Queryable,
    inquiries,
)
from replay.errors import NotAuthorizedError
from replay.keys import KeySource, OperatorKey, PublicKey, operator_key, read_public_key

if TYPE_CHECKING:
    from replay.ledger import Ledger

log = get_logger("factledger.replay")

ACTION_ID_PREFIX = "op:"
"""Event ids of signed actions, chosen before signing (the log stores an id once)."""
OPEN = (
    "no operator key is registered: any local user can act as operator until one is added "
    "(factledger operator add), and nothing imported is trusted; factledger init "
    "--operator-key FILE makes a new log with its operator"
)
ENFORCED = (
    "quarantines, releases, policies, approvals, rejections, imports and operator changes "
    "take effect only when signed by a key registered here"
)
MAX_REASON_CHARS = 2000


class Actor(msgspec.Struct, frozen=True, kw_only=True):
    """Who performs an action: the producer task, run and adapter its event names."""

    producer_task_id: str
    run_id: str | None = None
    source_adapter: str | None = None

    def __post_init__(self) -> None:
        check_actor("producer_task_id", self.producer_task_id)
        check_optional_actor("run_id", self.run_id)
        check_optional_actor("source_adapter", self.source_adapter)

    def event(self, payload: EventPayload, *, event_id: str | None = None) -> NewEvent:
        """An event of `payload` naming this actor."""
        return NewEvent(
            payload=payload,
            producer_task_id=self.producer_task_id,
            run_id=self.run_id,
            source_adapter=self.source_adapter,
            event_id=event_id,
        )


OPERATOR = Actor(producer_task_id="operator")


class Operator(msgspec.Struct, frozen=True, kw_only=True):
    """An operator key of a log: when, by which key and by whom it was added and removed."""

    key_id: str
    name: str
    public_key: str
    """Its verifier key line, as in its `.pub` file."""
    added_position: int
    added_ts_ns: int
    added_by_key: str
    """The key that signed the addition (the key itself, for the first)."""
    added_by_producer: str
    added_by_adapter: str | None
    removed_position: int | None = None
    removed_ts_ns: int | None = None
    removed_by_key: str | None = None
    removed_by_producer: str | None = None
    removed_by_adapter: str | None = None


class Operators(msgspec.Struct, frozen=True, kw_only=True):
    """A log's operator keys as of `at_position`, and what that means for operator actions."""

    at_position: int
    enforced: bool
    """Whether operator actions need a registered key's signature."""
    note: str
    operators: list[Operator]


def add_operator(
    ledger: Ledger,
    public_key_path: str | os.PathLike[str] | PublicKey,
    *,
    key: KeySource,
    actor: Actor = OPERATOR,
) -> int:
    """Register the public key in `public_key_path` as an operator key; return the event's
    position. The first key of a log signs its own registration (`key` is its private key);
    later ones are signed by an operator key."""
    public = (
        public_key_path
        if isinstance(public_key_path, PublicKey)
        else read_public_key(public_key_path)
    )
    signer = operator_key(key)
    payload = OperatorAdded(name=public.name, key_id=public.key_id, public_key=_b64(public.raw))
    with ledger.write_transaction("adding an operator key") as tx:
        found = inquiries.operator(tx, public.key_id)
        if found is not None:
            raise InvalidInputError(
                f"key {public.key_id} ({public.name}) was registered at position "
                f"{found.added_position}"
                + (
                    ""
                    if found.removed_position is None
                    else f" and removed at {found.removed_position}; make a new key"
                )
            )
        event = signed_event(
            tx,
            ledger.log_id,
            payload,
            actor=actor,
            key=signer,
            action="adding an operator key",
            registering=public,
        )
        position = append_with_effect(tx, [event])[0].position
    log.info("operator_added", position=position, key_id=public.key_id, by=signer.key_id)
    return position


def remove_operator(
    ledger: Ledger,
    key_id: str,
    *,
    key: KeySource,
    reason: str,
    actor: Actor = OPERATOR,
) -> int:
    """Stop the operator key `key_id` authorizing anything after the returned position; what
    it signed before stands. Signed by an operator key (it may be the key removed); the last
    key registered cannot be removed."""
    target = check_identifier("key_id", key_id)
    signer = operator_key(key)
    payload = OperatorRemoved(key_id=target, reason=check_reason(reason))
    with ledger.write_transaction("removing an operator key") as tx:
        found = inquiries.operator(tx, target)
        if found is None or found.removed_position is not None:
            raise InvalidInputError(
                f"{target} is not an operator key of this log"
                + ("" if found is None else f" (removed at position {found.removed_position})")
            )
        active = [row for row in inquiries.operators(tx) if row.removed_position is None]
        if len(active) == 1:
            raise InvalidInputError(
                f"{target} is the log's last operator key: add another before removing it"
            )
        event = signed_event(
            tx,
            ledger.log_id,
            payload,
            actor=actor,
            key=signer,
            action="removing an operator key",
        )
        position = append_with_effect(tx, [event])[0].position
    log.info("operator_removed", position=position, key_id=target, by=signer.key_id)
    return position


def list_operators(ledger: Ledger) -> Operators:
    """The log's operator keys, with when and by whom each was added and removed (the log is
    only read)."""
    with ledger.at_head() as (snap, model):
        rows = inquiries.operators(model)
        positions = {row.added_position for row in rows} | {
            row.removed_position for row in rows if row.removed_position is not None
        }
        events = {p: snap.event_at(p) for p in positions}
        return Operators(
            at_position=snap.head().position,
            enforced=bool(rows),
            note=ENFORCED if rows else OPEN,
            operators=[_operator(row, events) for row in rows],
        )


def signed_event(
    tx: Queryable,
    log_id: str,
    payload: EventPayload,
    *,
    actor: Actor,
    key: OperatorKey | None,
    action: str,
    registering: PublicKey | None = None,
) -> NewEvent:
    """The event for an operator action by `actor`, signed with `key` when the log needs it:
    refused (`NotAuthorizedError`) when the log has an operator key and `key` is missing or
    not one of them, or when a key is given to a log that has none to check it against."""
    if not inquiries.has_operator(tx):
        if registering is None:
            if key is None:
                return actor.event(payload)
            raise NotAuthorizedError(
                f"{action}: key {key.key_id} ({key.name}) is not an operator key of this log, "
                f"which has none; {OPEN}"
            )
        if key is None or key.public != registering:
            raise NotAuthorizedError(
                f"{action}: the first operator key signs its own registration; give its "
                "private key with it"
            )
    else:
        if key is None:
            raise NotAuthorizedError(
                f"{action} needs an operator key: this log has operators (give --key FILE "
                "or set FACTLEDGER_OPERATOR_KEY)"
            )
        found = inquiries.operator(tx, key.key_id)
        if found is None or found.public_key != _b64(key.public.raw):
            raise NotAuthorizedError(
                f"{action}: key {key.key_id} ({key.name}) is not an operator key of this log"
            )
        if found.removed_position is not None:
            raise NotAuthorizedError(
                f"{action}: key {key.key_id} ({key.name}) stopped being an operator key at "
                f"position {found.removed_position}"
            )
    assert key is not None
    return sign(log_id, payload, actor=actor, key=key)


def sign(log_id: str, payload: EventPayload, *, actor: Actor, key: OperatorKey) -> NewEvent:
    """The event for `payload` by `actor`, signed with `key` for the log `log_id` (checking
    that the log accepts the key is the caller's part: `signed_event`)."""
    event = actor.event(payload, event_id=new_action_id())
    assert event.event_id is not None
    salt = os.urandom(SALT_BYTES)  # drawn first: the signature covers the salted hash
    statement = action_statement(
        log_id=log_id,
        event_id=event.event_id,
        producer_task_id=event.producer_task_id,
        run_id=event.run_id,
        source_adapter=event.source_adapter,
        content_hash=CURRENT.content_hash(payload.written_text().encode("utf-8"), salt),
        payload=payload,
    )
    authorization = Authorization(key_id=key.key_id, signature=_b64(key.sign(statement)))
    signed = msgspec.structs.replace(payload, authorization=authorization)
    return msgspec.structs.replace(event, payload=signed, salt=salt)


def first_operator(log_id: str, key: OperatorKey, *, actor: Actor = OPERATOR) -> NewEvent:
    """The registration of `key` as the first operator key of the new log `log_id`, signed
    by itself: what a log made with its operator starts with (`replay.bootstrap`)."""
    public = key.public
    payload = OperatorAdded(name=public.name, key_id=public.key_id, public_key=_b64(public.raw))
    return sign(log_id, payload, actor=actor, key=key)


def append_with_effect(tx: ProjectedTransaction, events: Sequence[NewEvent]) -> list[RecordedEvent]:
    """Append operator actions and check the projector gave each its effect; in one file a
    refusal rolls the whole write back."""
    records = tx.append(events)
    refused = next(iter(inquiries.unauthorized(tx, [r.position for r in records])), None)
    if refused is not None:
        raise NotAuthorizedError(
            f"the {refused.kind} at position {refused.position} took no effect: {refused.reason}"
        )
    return records


def new_action_id() -> str:
    """A fresh event id for a signed action: a millisecond timestamp and 80 random bits."""
    return f"{ACTION_ID_PREFIX}{time.time_ns() // 1_000_000:012x}{os.urandom(10).hex()}"


def check_reason(reason: object) -> str:
    """A reason recorded in the log: some text, at most `MAX_REASON_CHARS`, no NUL."""
    if not isinstance(reason, str):
        raise InvalidTypeError(f"reason must be str, not {type(reason).__name__}")
    if not reason.strip():
        raise InvalidInputError("reason must say why: it is the record responders read later")
    if len(reason) > MAX_REASON_CHARS or "\x00" in reason:
        raise InvalidInputError(f"reason must be at most {MAX_REASON_CHARS} characters, no NUL")
    return reason


def _operator(row: inquiries.Operator, events: dict[int, RecordedEvent]) -> Operator:
    raw = base64.b64decode(row.public_key)
    verifier = PublicKey(name=row.name, key_id=row.key_id, raw=raw).verifier_key
    add_event = events[row.added_position]
    gone = None if row.removed_position is None else events.get(row.removed_position)
    return Operator(
        key_id=row.key_id,
        name=row.name,
        public_key=verifier,
        added_position=row.added_position,
        added_ts_ns=add_event.ts_ns,
        added_by_key=row.added_by,
        added_by_producer=add_event.producer_task_id,
        added_by_adapter=add_event.source_adapter,
        removed_position=None if gone is None else gone.position,
        removed_ts_ns=None if gone is None else gone.ts_ns,
        removed_by_key=None if gone is None else row.removed_by,
        removed_by_producer=None if gone is None else gone.producer_task_id,
        removed_by_adapter=None if gone is None else gone.source_adapter,
    )


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")
