"""Histories as a reader at a shell is shown them: every version marked with its trust under
a policy, and for an agent only the versions its policy trusts (`projections.trust_of`).
"""

from __future__ import annotations

import msgspec

from projections import TRUSTED, MemoryTrustPolicy, trust_of
from replay.conflicts import HeldVersion
from replay.history import FactHistory, FactVersion, OperatorAction


class TrustedVersion(FactVersion, frozen=True, kw_only=True):
    """A fact version and its trust: `trusted`, or why the policy keeps it out."""

    trust: str


class TrustedHistory(msgspec.Struct, frozen=True, kw_only=True):
    """`FactHistory` with each version's trust; `kept_out` versions not shown (an agent's
    history shows only what its policy trusts, and no held versions)."""

    at_position: int
    versions: list[TrustedVersion]
    actions: list[OperatorAction]
    kept_out: int
    held: list[HeldVersion] = []
    """Versions a conflict policy kept from becoming current, for an operator to decide."""


def marked_history(
    found: FactHistory, policy: MemoryTrustPolicy, *, trusted_only: bool
) -> TrustedHistory:
    """`found` with each version's trust under `policy`; with `trusted_only`, only the
    versions it trusts, and only the operator actions that cover one of them."""
    marked = [
        TrustedVersion(
            **msgspec.structs.asdict(version),
            trust=trust_of(
                policy, version.source_adapter, quarantined=version.status == "quarantined"
            ),
        )
        for version in found.versions
    ]
    if not trusted_only:
        return TrustedHistory(
            at_position=found.at_position,
            versions=marked,
            actions=found.actions,
            kept_out=0,
            held=found.held,
        )
    shown = [version for version in marked if version.trust == TRUSTED]
    positions = {version.position for version in shown}
    actions = [
        msgspec.structs.replace(action, covers=tuple(p for p in action.covers if p in positions))
        for action in found.actions
        if positions.intersection(action.covers)
    ]
    return TrustedHistory(
        at_position=found.at_position,
        versions=shown,
        actions=actions,
        kept_out=len(marked) - len(shown),
    )
