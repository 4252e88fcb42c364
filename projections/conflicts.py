"""Conflict policy per tag: what an overwrite under another adapter does to a fact.

`allow` is last-write-wins by position (the default). Under `deny`, a version written under
another adapter than the current version's is recorded and never becomes current; under
`hold`, it waits (`pending`) until an operator approves it (then it becomes current, unless
a later version already is) or rejects it. Readers keep seeing the previous version. Held
versions live in their own table, so no read of `fl_fact` can serve one by accident.

The knowledge projector calls these as it folds, so policies, approvals and rejections (all
operator actions, signed once the log has an operator) are honoured by rebuild and as-of.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

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


def set_policy(writer: TableWriter, position: int, payload: ConflictPolicySet) -> None:
    """Fold a policy: it applies to versions written after `position`."""
    scope = "" if isinstance(payload.scope, UnsetType) else payload.scope
    writer.execute(sql.CONFLICT_POLICY_PUT, (scope, payload.tag, payload.on_conflict, position))


def admitted(
    writer: TableWriter,
    facts: Sequence[Published],
    identity_of: Callable[[RecordedEvent, FactPublished], Identity],
) -> list[Published]:
    """The versions among `facts` (in log order) that may become current; the others are
    recorded as denied or pending. A version is kept out when its tag's policy is `deny` or
    `hold` and it was written under another adapter than the version current at its position
    (the table's, or an earlier admitted one in `facts`)."""
    if not writer.execute(sql.CONFLICT_ANY):
        return list(facts)
    policies: dict[str, dict[str, str]] = {}
    current: dict[Identity, tuple[int, str | None] | None] = {}
    kept: list[Published] = []
    for record, fact in facts:
        if fact.tag not in policies:
            rows = writer.execute(sql.CONFLICT_POLICIES_FOR, (fact.tag,))
            policies[fact.tag] = {scope: mode for scope, _, mode in rows}
        by_scope = policies[fact.tag]
        mode = by_scope.get(fact.scope, by_scope.get("", ALLOW))
        identity = identity_of(record, fact)
        if identity not in current:
            found = writer.execute(sql.CONFLICT_CURRENT, identity)
            current[identity] = (found[0][0], found[0][1]) if found else None
        now = current[identity]
        if mode != ALLOW and now is not None and now[1] != record.source_adapter:
            status = DENIED if mode == DENY else PENDING
            writer.execute(sql.HELD_INSERT, _held_row(record, fact, identity, status, now[0]))
            continue
        current[identity] = (record.position, record.source_adapter)
        kept.append((record, fact))
    return kept


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
    """Every tag's policy in force: (scope or '' for every scope, tag, on_conflict, position)."""
    return db.execute(sql.CONFLICT_POLICIES)


def _held_row(
    record: RecordedEvent, fact: FactPublished, identity: Identity, status: str, contested: int
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
