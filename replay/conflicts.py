"""Conflict policy per tag, and operators' decisions on the versions it holds.

`set_conflict_policy` appends a policy event; from then on a version of a fact under the tag
is allowed to become current (`allow`: last write wins) or, unless its adapter owns the tag
(or it was written under no adapter, by an operator), denied (recorded, never current) or
held until `approve` or `reject`. The owners are named in the event: those given, or by
default the adapters the caller's trust policy trusts. All three are operator actions: once
the log has an operator key, they need `key` and are refused up front without a valid one
(`NotAuthorizedError`), and the projector ignores them unsigned.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import msgspec

from eventlog import (
    ON_CONFLICT,
    ConflictPolicySet,
    FactApproved,
    FactRejected,
    InvalidInputError,
    InvalidTypeError,
)
from eventlog.checks import check_actor, check_position
from eventlog.logs import get_logger
from projections import (
    active_trust_policy,
)
from projections.internal import (
    check_scope,
    check_tag,
    conflicts,
)
from replay.keys import KeySource, operator_key
from replay.operators import OPERATOR, Actor, append_with_effect, check_reason, signed_event

if TYPE_CHECKING:
    from replay.ledger import Ledger

log = get_logger("factledger.replay")

MAX_OWNERS = 64
"""Adapters one policy may name as owners."""


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
    contested: int | None
    """The version that was current when it was written (None when none was)."""
    decided_by: int | None


def held_version(row: conflicts.Held) -> HeldVersion:
    """A `HeldVersion` from a row of `projections._conflicts`."""
    return HeldVersion(
        position=row.position,
        scope=row.scope,
        run_id=row.run_id,
        tag=row.tag,
        key=row.key,
        producer_task_id=row.producer_task_id,
        source_adapter=row.source_adapter,
        content_hash=row.content_hash,
        status=row.status,
        contested=row.contested,
        decided_by=row.decided_by,
    )


def set_conflict_policy(
    ledger: Ledger,
    tag: str,
    on_conflict: str,
    *,
    owners: Iterable[str] | None = None,
    scope: str | None = None,
    actor: Actor = OPERATOR,
    key: KeySource | None = None,
) -> int:
    """Set which versions of facts under `tag` (in `scope`, or every scope) become current,
    and return the policy event's position. Under `deny` and `hold`, versions by `owners`
    (default: `policy_owners`) and by no adapter do; others are denied or held."""
    payload = ConflictPolicySet(tag=check_tag(tag), on_conflict=on_conflict)
    named = policy_owners(on_conflict, owners)
    if named is not None:
        payload = msgspec.structs.replace(payload, owners=named)
    if scope is not None:
        payload = msgspec.structs.replace(payload, scope=check_scope(scope))
    signer = None if key is None else operator_key(key)
    with ledger.write_transaction("policy set") as tx:
        event = signed_event(
            tx, ledger.log_id, payload, actor=actor, key=signer, action="policy set"
        )
        [record] = append_with_effect(tx, [event])
    log.info(
        "conflict_policy_set",
        position=record.position,
        on_conflict=on_conflict,
        owners=None if named is None else list(named),
    )
    return record.position


def policy_owners(on_conflict: str, owners: Iterable[str] | None = None) -> tuple[str, ...] | None:
    """The owners a policy set now records: None under `allow`, where every version may
    become current; under `deny` and `hold`, `owners` (sorted, each once), or by default the
    adapters the active trust policy trusts (`active_trust_policy`), which may be none: then
    only versions written under no adapter, an operator's, become current."""
    if on_conflict not in ON_CONFLICT:
        raise InvalidInputError(
            f"on_conflict must be one of {', '.join(ON_CONFLICT)}, got {on_conflict!r}"
        )
    if on_conflict == conflicts.ALLOW:
        if owners is not None:
            raise InvalidInputError(
                "owners apply to deny and hold; under allow every version may become current"
            )
        return None
    if owners is None:
        trust = active_trust_policy()
        if not trust.enabled:
            raise InvalidInputError(
                "the trust policy is switched off, so it trusts every adapter and names none "
                "to own the tag: give the owners"
            )
        owners = trust.trusted_adapters
    if isinstance(owners, (str, bytes)) or not isinstance(owners, Iterable):
        raise InvalidTypeError(
            f"owners must be a list of adapter names, not {type(owners).__name__}"
        )
    named = sorted({check_actor("owner", owner) for owner in owners})
    if len(named) > MAX_OWNERS:
        raise InvalidInputError(f"owners names {len(named)} adapters; the limit is {MAX_OWNERS}")
    return tuple(named)


def approve(
    ledger: Ledger,
    position: int,
    *,
    actor: Actor = OPERATOR,
    key: KeySource | None = None,
) -> int:
    """Approve the pending version at `position`: it becomes current unless a later version
    already is. Returns the approval's position."""
    return _decide(ledger, position, None, actor=actor, key=key)


def reject(
    ledger: Ledger,
    position: int,
    *,
    reason: str = "rejected by an operator",
    actor: Actor = OPERATOR,
    key: KeySource | None = None,
) -> int:
    """Reject the pending version at `position`: it never becomes current. Returns the
    rejection's position."""
    return _decide(ledger, position, check_reason(reason), actor=actor, key=key)


def _decide(
    ledger: Ledger,
    position: int,
    reason: str | None,
    *,
    actor: Actor,
    key: KeySource | None,
) -> int:
    target = check_position("position", position, minimum=1)
    payload: FactApproved | FactRejected = (
        FactApproved(position=target)
        if reason is None
        else FactRejected(position=target, reason=reason)
    )
    action = "approve" if reason is None else "reject"
    signer = None if key is None else operator_key(key)
    with ledger.write_transaction(action) as tx:
        held = next(iter(conflicts.held_versions(tx, [target])), None)
        if held is None or held.status != conflicts.PENDING:
            state = "is not a held fact version" if held is None else f"is {held.status}"
            raise InvalidInputError(f"{action}: position {target} {state}, not pending")
        event = signed_event(tx, ledger.log_id, payload, actor=actor, key=signer, action=action)
        [record] = append_with_effect(tx, [event])
    log.info(
        "fact_approved" if reason is None else "fact_rejected",
        position=record.position,
        held_position=target,
    )
    return record.position
