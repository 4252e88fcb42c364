"""Conflict policy per tag, and operators' decisions on the overwrites it holds.

`set_conflict_policy` appends a policy event; from then on an overwrite of a fact under the
tag by another adapter than the current version's is allowed (last write wins), denied
(recorded, never current) or held until `approve` or `reject`. All three are operator
actions: once the log has an operator key, they need `key` and are refused up front without
a valid one (`NotAuthorizedError`), and the projector ignores them unsigned.
"""

from __future__ import annotations

import os

import msgspec

from eventlog import (
    ON_CONFLICT,
    ConflictPolicySet,
    FactApproved,
    FactRejected,
    InvalidInputError,
)
from eventlog.checks import check_position
from eventlog.logs import get_logger
from projections import check_scope, check_tag, conflicts
from replay.keys import KeySource, operator_key
from replay.operators import OPERATOR, Actor, append_with_effect, check_reason, signed_event

log = get_logger("factledger.replay")

HELD_COLUMNS = (
    "position",
    "scope",
    "run_key",
    "tag",
    "key",
    "value",
    "producer_task_id",
    "ts_ns",
    "content_hash",
    "run_id",
    "source_adapter",
    "status",
    "contested",
    "decided_by",
)


class HeldVersion(msgspec.Struct, frozen=True, kw_only=True):
    """A fact version a conflict policy kept from becoming current."""

    position: int
    scope: str
    run_id: str | None
    tag: str
    key: str
    producer_task_id: str
    source_adapter: str | None
    content_hash: str
    status: str
    """`denied`, `pending`, or (decided by an operator) `approved` or `rejected`."""
    contested: int
    """The version that was current when it was written."""
    decided_by: int | None


def held_version(row: tuple[object, ...]) -> HeldVersion:
    """A `HeldVersion` from a row of `projections.conflicts` (columns `HELD_COLUMNS`)."""
    return msgspec.convert(dict(zip(HELD_COLUMNS, row, strict=True)), HeldVersion)


def set_conflict_policy(
    db_path: str | os.PathLike[str],
    tag: str,
    on_conflict: str,
    *,
    scope: str | None = None,
    actor: Actor = OPERATOR,
    key: KeySource | None = None,
    cache: str | os.PathLike[str] | None = None,
) -> int:
    """Set what an overwrite under another adapter does to facts under `tag` (in `scope`, or
    every scope); return the policy event's position. Given a `cache`, writes through that
    host's cache of the log `db_path` names (`Actor.store`), as `approve` and `reject` do."""
    if on_conflict not in ON_CONFLICT:
        raise InvalidInputError(
            f"on_conflict must be one of {', '.join(ON_CONFLICT)}, got {on_conflict!r}"
        )
    payload = ConflictPolicySet(tag=check_tag(tag), on_conflict=on_conflict)
    if scope is not None:
        payload = msgspec.structs.replace(payload, scope=check_scope(scope))
    signer = None if key is None else operator_key(key)
    with actor.store(db_path, cache=cache) as store, store.write_transaction() as tx:
        event = signed_event(
            tx, store.event_log.log_id, payload, actor=actor, key=signer, action="policy set"
        )
        [record] = append_with_effect(tx, [event])
    log.info("conflict_policy_set", position=record.position, on_conflict=on_conflict)
    return record.position


def approve(
    db_path: str | os.PathLike[str],
    position: int,
    *,
    actor: Actor = OPERATOR,
    key: KeySource | None = None,
    cache: str | os.PathLike[str] | None = None,
) -> int:
    """Approve the pending version at `position`: it becomes current unless a later version
    already is. Returns the approval's position."""
    return _decide(db_path, position, None, actor=actor, key=key, cache=cache)


def reject(
    db_path: str | os.PathLike[str],
    position: int,
    *,
    reason: str = "rejected by an operator",
    actor: Actor = OPERATOR,
    key: KeySource | None = None,
    cache: str | os.PathLike[str] | None = None,
) -> int:
    """Reject the pending version at `position`: it never becomes current. Returns the
    rejection's position."""
    return _decide(db_path, position, check_reason(reason), actor=actor, key=key, cache=cache)


def _decide(
    db_path: str | os.PathLike[str],
    position: int,
    reason: str | None,
    *,
    actor: Actor,
    key: KeySource | None,
    cache: str | os.PathLike[str] | None,
) -> int:
    target = check_position("position", position, minimum=1)
    payload: FactApproved | FactRejected = (
        FactApproved(position=target)
        if reason is None
        else FactRejected(position=target, reason=reason)
    )
    action = "approve" if reason is None else "reject"
    signer = None if key is None else operator_key(key)
    with actor.store(db_path, cache=cache) as store, store.write_transaction() as tx:
        found = conflicts.held_versions(tx, [target])
        if not found or found[0][11] != conflicts.PENDING:
            state = f"is {found[0][11]}" if found else "is not a held fact version"
            raise InvalidInputError(f"{action}: position {target} {state}, not pending")
        event = signed_event(
            tx, store.event_log.log_id, payload, actor=actor, key=signer, action=action
        )
        [record] = append_with_effect(tx, [event])
    log.info(
        "fact_approved" if reason is None else "fact_rejected",
        position=record.position,
        held_position=target,
    )
    return record.position
