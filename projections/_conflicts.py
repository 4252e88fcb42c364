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
from projections import _sql_audit as sql_audit
from projections import _sql_knowledge as sql_knowledge
from projections._projector import TableWriter
from projections._sql import Queryable
from projections._sql_knowledge import Held as Held
from projections._sql_knowledge import Policy as Policy

ALLOW = "allow"
DENY = "deny"
HOLD = "hold"

DENIED = "denied"
PENDING = "pending"
APPROVED = "approved"
REJECTED = "rejected"

Identity = tuple[str, str, str, str]
InForce = tuple[str, frozenset[str] | None]
"""A policy in force: its mode, and its owners (None: the first writer owns)."""

_OWNERS = msgspec.json.Decoder(tuple[str, ...])


class Publication(msgspec.Struct, frozen=True, kw_only=True):
    """A fact version as the knowledge projector folds it: the fact, and the attribution of
    the event that published it (read from the event, or from the row that held it)."""

    position: int
    scope: str
    tag: str
    key: str
    value: str
    producer_task_id: str
    ts_ns: int
    content_hash: str
    run_id: str | None
    source_adapter: str | None

    @classmethod
    def of(cls, record: RecordedEvent, fact: FactPublished) -> Publication:
        """The version the event `record`, publishing `fact`, wrote."""
        return cls(
            position=record.position,
            scope=fact.scope,
            tag=fact.tag,
            key=fact.key,
            value=fact.value,
            producer_task_id=record.producer_task_id,
            ts_ns=record.ts_ns,
            content_hash=record.content_hash,
            run_id=record.run_id,
            source_adapter=record.source_adapter,
        )

    @classmethod
    def held(cls, row: Held) -> Publication:
        """The version a policy held, as its row recorded it."""
        return cls(
            position=row.position,
            scope=row.scope,
            tag=row.tag,
            key=row.key,
            value=row.value,
            producer_task_id=row.producer_task_id,
            ts_ns=row.ts_ns,
            content_hash=row.content_hash,
            run_id=row.run_id,
            source_adapter=row.source_adapter,
        )


def set_policy(writer: TableWriter, position: int, payload: ConflictPolicySet) -> None:
    """Fold a policy: it applies to versions written after `position`."""
    scope = "" if isinstance(payload.scope, UnsetType) else payload.scope
    owners = None
    if payload.on_conflict != ALLOW and not isinstance(payload.owners, UnsetType):
        owners = msgspec.json.encode(sorted(set(payload.owners))).decode("utf-8")
    writer.execute(
        sql_knowledge.CONFLICT_POLICY_PUT,
        (scope, payload.tag, payload.on_conflict, position, owners),
    )


def owned(policy: InForce, adapter: str | None, current: sql_knowledge.Current | None) -> bool:
    """Whether a version written under `adapter` may become current under `policy`, given
    the version current when it was written, if any."""
    mode, owners = policy
    if mode == ALLOW:
        return True
    if owners is None:
        return current is None or current.source_adapter == adapter
    return adapter is None or adapter in owners


def admitted(
    writer: TableWriter,
    facts: Sequence[Publication],
    identity_of: Callable[[Publication], Identity],
) -> list[Publication]:
    """The versions among `facts` (in log order) that may become current (`owned`); the
    others are recorded as denied or pending. The version current at each one's position is
    the table's, or an earlier admitted one in `facts`."""
    if not sql_knowledge.CONFLICT_ANY.exists(writer):
        return list(facts)
    policies: dict[str, dict[str, InForce]] = {}
    current: dict[Identity, sql_knowledge.Current | None] = {}
    kept: list[Publication] = []
    for fact in facts:
        if fact.tag not in policies:
            rows = sql_knowledge.CONFLICT_POLICIES_FOR.rows(writer, (fact.tag,))
            policies[fact.tag] = {row.scope: (row.on_conflict, _owners(row.owners)) for row in rows}
        by_scope = policies[fact.tag]
        policy = by_scope.get(fact.scope, by_scope.get("", (ALLOW, None)))
        identity = identity_of(fact)
        if identity not in current:
            current[identity] = sql_knowledge.CONFLICT_CURRENT.first(writer, identity)
        now = current[identity]
        if not owned(policy, fact.source_adapter, now):
            mode, _ = policy
            status = DENIED if mode == DENY else PENDING
            contested = None if now is None else now.position
            writer.execute(sql_knowledge.HELD_INSERT, _held_row(fact, identity, status, contested))
            continue
        current[identity] = sql_knowledge.Current(fact.position, fact.source_adapter)
        kept.append(fact)
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
) -> Publication | None:
    """Fold an operator's decision on a pending version. An approval returns the version to
    publish when it is newer than the current one (an older one is recorded approved only);
    a decision on anything but a pending version changes nothing."""
    held = sql_knowledge.HELD_GET.first(writer, (payload.position,))
    if held is None or held.status != PENDING:
        return None
    status = APPROVED if isinstance(payload, FactApproved) else REJECTED
    writer.execute(sql_knowledge.HELD_DECIDE, (status, position, payload.position))
    if status == REJECTED:
        return None
    now = sql_knowledge.CONFLICT_CURRENT.first(
        writer, (held.scope, held.run_key, held.tag, held.key)
    )
    if now is not None and now.position > held.position:
        return None
    return Publication.held(held)


def held_versions(db: Queryable, positions: Sequence[int]) -> list[Held]:
    """Held versions among `positions`."""
    return sql_knowledge.HELD_AMONG.among(db, positions)


def held_matching(
    db: Queryable,
    *,
    scope: str | None = None,
    tag: str | None = None,
    key: str | None = None,
    run_id: str | None = None,
) -> list[Held]:
    """Held versions matching every given filter, oldest first."""
    filters, params = sql_audit.fact_filters(scope, tag, key, run_id)
    return sql_knowledge.HELD_MATCHING.format(filters=filters).rows(db, params)


def policies(db: Queryable) -> list[Policy]:
    """Every tag's policy in force."""
    return sql_knowledge.CONFLICT_POLICIES.rows(db)


def _held_row(
    fact: Publication, identity: Identity, status: str, contested: int | None
) -> tuple[object, ...]:
    """A `fl_fact_held` row, in `sql_knowledge.HELD_INSERT`'s column order."""
    return (
        fact.position,
        *identity,
        fact.value,
        fact.producer_task_id,
        fact.ts_ns,
        fact.content_hash,
        fact.run_id,
        fact.source_adapter,
        status,
        contested,
    )
