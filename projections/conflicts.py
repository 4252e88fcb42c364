"""Conflict policy per tag: which writers' versions of a fact may become current.

`allow` is last-write-wins by position (the default). Under `deny` and `hold`, the policy
names the adapters that own the tag's facts (`ConflictPolicySet.owners`): a version written
under an owner, or under no adapter (an operator's write), becomes current as under `allow`;
a version under any other adapter is recorded and never becomes current (`deny`), or waits
(`pending`) until an operator approves it (then it becomes current, unless a later version
already is) or rejects it, whoever wrote first. A policy written before owners existed keeps
its first meaning: the adapter of the version current when another is written owns it, so
its first writer does. Readers keep seeing the current version. Held versions live in their
own table, so no read of `fl_fact` can serve one by accident.

A policy applies to versions written after it: a version current when it is set stays
current until an owner writes (quarantine removes it sooner).

The knowledge projector calls these as it folds, so policies, approvals and rejections (all
operator actions, signed once the log has an operator) are honoured by rebuild and as-of.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import msgspec
from msgspec import UnsetType

from eventlog import (
    ConflictPolicySet,
    FactApproved,
    FactPublished,
    FactRejected,
    RecordedEvent,
)
from projections import sql
from projections.projector import TableWriter
from projections.reads import Readable, Row, over_positions

ALLOW = "allow"
DENY = "deny"
HOLD = "hold"

DENIED = "denied"
PENDING = "pending"
APPROVED = "approved"
REJECTED = "rejected"

Identity = tuple[str, str, str, str]
Published = tuple[RecordedEvent, FactPublished]
Policy = tuple[str, frozenset[str] | None]
"""A policy in force: its mode, and its owners (None: the first writer owns)."""

_OWNERS = msgspec.json.Decoder(tuple[str, ...])


def set_policy(writer: TableWriter, position: int, payload: ConflictPolicySet) -> None:
    """Fold a policy: it applies to versions written after `position`."""
    scope = "" if isinstance(payload.scope, UnsetType) else payload.scope
    owners = None
    if payload.on_conflict != ALLOW and not isinstance(payload.owners, UnsetType):
        owners = msgspec.json.encode(sorted(set(payload.owners))).decode("utf-8")
    writer.execute(
        sql.CONFLICT_POLICY_PUT, (scope, payload.tag, payload.on_conflict, position, owners)
    )


def owned(policy: Policy, adapter: str | None, current: tuple[int, str | None] | None) -> bool:
    """Whether a version written under `adapter` may become current under `policy`, given
    the version current when it was written (its position and adapter), if any."""
    mode, owners = policy
    if mode == ALLOW:
        return True
    if owners is None:
        return current is None or current[1] == adapter
    return adapter is None or adapter in owners


def admitted(
    writer: TableWriter,
    facts: Sequence[Published],
    identity_of: Callable[[RecordedEvent, FactPublished], Identity],
) -> list[Published]:
    """The versions among `facts` (in log order) that may become current (`owned`); the
    others are recorded as denied or pending. The version current at each one's position is
    the table's, or an earlier admitted one in `facts`."""
    if not writer.execute(sql.CONFLICT_ANY):
        return list(facts)
    policies: dict[str, dict[str, Policy]] = {}
    current: dict[Identity, tuple[int, str | None] | None] = {}
    kept: list[Published] = []
    for record, fact in facts:
        if fact.tag not in policies:
            rows = writer.execute(sql.CONFLICT_POLICIES_FOR, (fact.tag,))
            policies[fact.tag] = {scope: (mode, _owners(text)) for scope, mode, text in rows}
        by_scope = policies[fact.tag]
        policy = by_scope.get(fact.scope, by_scope.get("", (ALLOW, None)))
        identity = identity_of(record, fact)
        if identity not in current:
            found = writer.execute(sql.CONFLICT_CURRENT, identity)
            current[identity] = (found[0][0], found[0][1]) if found else None
        now = current[identity]
        if not owned(policy, record.source_adapter, now):
            status = DENIED if policy[0] == DENY else PENDING
            contested = None if now is None else now[0]
            writer.execute(sql.HELD_INSERT, _held_row(record, fact, identity, status, contested))
            continue
        current[identity] = (record.position, record.source_adapter)
        kept.append((record, fact))
    return kept


def _owners(text: str | None) -> frozenset[str] | None:
    """A policy's owners as its row keeps them; a row edited past reading owns nothing (only
    operators' versions become current) until `verify --deep` or a rebuild finds it."""
    if text is None:
        return None
    try:
        return frozenset(_OWNERS.decode(text))
    except msgspec.DecodeError:
        return frozenset()


def decide(
    writer: TableWriter, position: int, payload: FactApproved | FactRejected
) -> Published | None:
    """Fold an operator's decision on a pending version. An approval returns the version to
    publish when it is newer than the current one (an older one is recorded approved only);
    a decision on anything but a pending version changes nothing."""
    found = writer.execute(sql.HELD_GET, (payload.position,))
    if not found or found[0][11] != PENDING:
        return None
    row = found[0]
    status = APPROVED if isinstance(payload, FactApproved) else REJECTED
    writer.execute(sql.HELD_DECIDE, (status, position, payload.position))
    if status == REJECTED:
        return None
    now = writer.execute(sql.CONFLICT_CURRENT, row[1:5])
    if now and now[0][0] > row[0]:
        return None
    return _version(row)


def held_versions(db: Readable, positions: Sequence[int]) -> list[Row]:
    """Held versions among `positions` (columns `sql.HELD_COLUMNS`)."""
    return over_positions(db, sql.HELD_AMONG, positions)


def held_matching(
    db: Readable,
    *,
    scope: str | None = None,
    tag: str | None = None,
    key: str | None = None,
    run_id: str | None = None,
) -> list[Row]:
    """Held versions matching every given filter, oldest first (columns `sql.HELD_COLUMNS`)."""
    filters, params = sql.fact_filters(scope, tag, key, run_id)
    return db.execute(sql.HELD_MATCHING.format(filters=filters), params)


def policies(db: Readable) -> list[Row]:
    """Every tag's policy in force: (scope or '' for every scope, tag, on_conflict, position,
    owners as a JSON array or None)."""
    return db.execute(sql.CONFLICT_POLICIES)


def _held_row(
    record: RecordedEvent,
    fact: FactPublished,
    identity: Identity,
    status: str,
    contested: int | None,
) -> tuple[object, ...]:
    return (
        record.position,
        *identity,
        fact.value,
        record.producer_task_id,
        record.ts_ns,
        record.content_hash,
        record.run_id,
        record.source_adapter,
        status,
        contested,
    )


def _version(row: Row) -> Published:
    """The held version `row` as the event that wrote it (the fields the fold reads)."""
    fact = FactPublished(scope=row[1], tag=row[3], key=row[4], value=row[5])
    record = RecordedEvent(
        position=row[0],
        event_id="",
        ts_ns=row[7],
        producer_task_id=row[6],
        run_id=row[9],
        source_adapter=row[10],
        content_hash=row[8],
        payload=fact,
    )
    return record, fact
