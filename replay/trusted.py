"""Histories, blame and diffs as a reader is shown them: through the one read path
(`projections._reading`), each version judged in the live read model, marked with its
verdict, and (for a named reader) only the trusted ones shown and the read receipted.

The history, blame or diff itself is read from the log as `replay.history` reads it; the
store given is where its versions are judged (its snapshot of the live read model: trust,
quarantine, taint) and, for a named reader, where the receipt goes.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from projections import (
    MemoryView,
)
from projections.internal import (
    reading,
)
from replay.conflicts import HeldVersion
from replay.history import (
    Blame,
    BlameLine,
    FactChange,
    FactDiff,
    FactHistory,
    FactVersion,
    OperatorAction,
    UnreadableRow,
)


class TrustedVersion(FactVersion, frozen=True, kw_only=True):
    """A fact version and its trust: `trusted`, or why the policy keeps it out."""

    trust: str


class TrustedHistory(msgspec.Struct, frozen=True, kw_only=True):
    """`FactHistory` with each version's trust; `kept_out` versions not shown (a named
    reader's trusted-only history, which lists no held versions either), and the read's
    receipt (None for an audit)."""

    at_position: int
    versions: list[TrustedVersion]
    actions: list[OperatorAction]
    held: list[HeldVersion]
    """Versions a conflict policy kept from becoming current, for an operator to decide."""
    kept_out: int
    receipt_position: int | None
    unreadable: list[UnreadableRow] = []
    """Rows this version could not decode, with position and writer (`FactHistory`)."""


class TrustedBlameLine(BlameLine, frozen=True, kw_only=True):
    """A current fact, the event that set it, and its trust."""

    trust: str


class TrustedBlame(msgspec.Struct, frozen=True, kw_only=True):
    """`Blame` with each line's trust, the lines kept out, and the read's receipt."""

    at_position: int
    facts: list[TrustedBlameLine]
    kept_out: int
    receipt_position: int | None


class TrustedChange(FactChange, frozen=True, kw_only=True):
    """A changed fact and its trust: `trusted` when both values it shows are."""

    trust: str


class TrustedDiff(msgspec.Struct, frozen=True, kw_only=True):
    """`FactDiff` with each change's trust, the changes kept out, and the read's receipt."""

    from_position: int
    to_position: int
    tag: str | None
    added: list[TrustedChange]
    changed: list[TrustedChange]
    removed: list[TrustedChange]
    kept_out: int
    receipt_position: int | None


def trusted_history(
    found: FactHistory, store: MemoryView, how: reading.Reading, *, tags: tuple[str, ...]
) -> TrustedHistory:
    """`found` as `how` reads it; a trusted-only read keeps only the operator actions that
    cover a version it shows."""
    read = reading.read(
        store,
        how,
        reading.judged_rows(found.versions, _version_judged),
        tags=tags,
        limit=reading.NO_LIMIT,
        show=reading.shown_as_stored,
    )
    versions = [
        TrustedVersion(**msgspec.structs.asdict(version), trust=trust)
        for version, trust in zip(read.shown, read.trust, strict=True)
    ]
    actions = found.actions
    if not how.everything:
        shown = {version.position for version in versions}
        actions = [
            msgspec.structs.replace(action, covers=tuple(p for p in action.covers if p in shown))
            for action in found.actions
            if shown.intersection(action.covers)
        ]
    return TrustedHistory(
        at_position=found.at_position,
        versions=versions,
        actions=actions,
        held=found.held if how.everything else [],
        kept_out=len(read.kept_out),
        receipt_position=read.receipt_position,
        unreadable=found.unreadable,
    )


def trusted_blame(
    found: Blame, store: MemoryView, how: reading.Reading, *, tags: tuple[str, ...]
) -> TrustedBlame:
    """`found` as `how` reads it."""
    read = reading.read(
        store,
        how,
        reading.judged_rows(
            found.facts, lambda line: [reading.Judged(line.position, line.source_adapter)]
        ),
        tags=tags,
        limit=reading.NO_LIMIT,
        show=reading.shown_as_stored,
    )
    return TrustedBlame(
        at_position=found.at_position,
        facts=[
            TrustedBlameLine(**msgspec.structs.asdict(line), trust=trust)
            for line, trust in zip(read.shown, read.trust, strict=True)
        ],
        kept_out=len(read.kept_out),
        receipt_position=read.receipt_position,
    )


def trusted_diff(found: FactDiff, store: MemoryView, how: reading.Reading) -> TrustedDiff:
    """`found` as `how` reads it: a change is trusted when the old and new versions it
    shows both are."""
    changes = [*found.added, *found.changed, *found.removed]
    read = reading.read(
        store,
        how,
        reading.judged_rows(changes, _change_judged),
        tags=() if found.tag is None else (found.tag,),
        limit=reading.NO_LIMIT,
        show=reading.shown_as_stored,
    )
    marked = [
        TrustedChange(**msgspec.structs.asdict(change), trust=trust)
        for change, trust in zip(read.shown, read.trust, strict=True)
    ]
    return TrustedDiff(
        from_position=found.from_position,
        to_position=found.to_position,
        tag=found.tag,
        added=[c for c in marked if c.change == "added"],
        changed=[c for c in marked if c.change == "changed"],
        removed=[c for c in marked if c.change == "removed"],
        kept_out=len(read.kept_out),
        receipt_position=read.receipt_position,
    )


def _version_judged(version: FactVersion) -> Sequence[reading.Judged]:
    quarantined = version.status == "quarantined"
    return [reading.Judged(version.position, version.source_adapter, quarantined)]


def _change_judged(change: FactChange) -> Sequence[reading.Judged]:
    sides = (
        (change.old_position, change.old_source_adapter),
        (change.new_position, change.new_source_adapter),
    )
    return [reading.Judged(position, adapter) for position, adapter in sides if position]
