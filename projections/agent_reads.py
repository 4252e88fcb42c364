"""What an agent may read: facts and memory filtered by a trust policy, each read receipted.

An agent reads as the identity its orchestrator bound (`AgentIdentity`: task, run, adapter),
under a trust policy (`active_trust_policy()` unless one is given) to which its own adapter is
added: it sees its own adapter's writes, operator (untagged) writes when the policy trusts
them, and the writes of the adapters the policy names; never a quarantined version. Where a
fact's newest version is kept out, the agent sees the newest version it may trust, if any.

Every value comes back as shown text: invisible characters escaped (`projections.visible`).
Every read appends a `recall_recorded` receipt, as the prompt path does: the positions
returned, the versions passed over and why, the policy, the log head read at, and the
BLAKE3 hash of what was returned (for facts, of their msgspec JSON encoding as returned).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import msgspec

from eventlog import (
    Exclusion,
    InvalidInputError,
    InvalidTypeError,
    NewEvent,
    ReadOnlyStoreError,
    RecallRecorded,
    content_hash,
)
from eventlog.checks import check_actor, check_optional_actor
from projections import reads, sql
from projections.entries import Fact
from projections.knowledge import fact_identity, run_key
from projections.projector import ProjectedTransaction
from projections.prompt import (
    QUARANTINED,
    REFUSED_SCAN,
    UNTAGGED_NOT_TRUSTED,
    UNTRUSTED_ADAPTER,
    Recall,
    recall_memory,
)
from projections.store import SQLiteMemoryStore
from projections.trust import MemoryTrustPolicy, active_trust_policy
from projections.validation import check_key, check_limit, check_scope, check_tag
from projections.view import READ_ONLY, MemoryView
from projections.visible import escape_invisible

NO_LIMIT = 0
"""The `limit` a receipt records for a read that returns everything it may (subscribe)."""


@dataclass(frozen=True)
class AgentIdentity:
    """Who an agent is, as its orchestrator bound it: the task it runs, the run it belongs
    to ('' for none), and the adapter driving it (None: an operator, writing untagged)."""

    task_id: str
    run_id: str = ""
    adapter: str | None = None

    def __post_init__(self) -> None:
        check_actor("task_id", self.task_id)
        check_actor("run_id", self.run_id, allow_empty=True)
        check_optional_actor("adapter", self.adapter)


class AgentFacts(msgspec.Struct, frozen=True, kw_only=True):
    """Facts an agent read, as shown, with how many versions were kept out and its receipt."""

    facts: list[Fact]
    kept_out: int
    """Versions passed over because the policy does not trust their source or they are
    quarantined (the receipt names at most `REFUSED_SCAN` of them)."""
    receipt_position: int


def policy_for(
    identity: AgentIdentity, trust_policy: MemoryTrustPolicy | None
) -> MemoryTrustPolicy:
    """`trust_policy` (the environment's when None) with the reader's own adapter trusted."""
    if not isinstance(identity, AgentIdentity):
        raise InvalidTypeError(f"identity must be an AgentIdentity, not {type(identity).__name__}")
    if trust_policy is not None and not isinstance(trust_policy, MemoryTrustPolicy):
        raise InvalidTypeError(
            f"trust_policy must be a MemoryTrustPolicy, not {type(trust_policy).__name__}"
        )
    policy = trust_policy if trust_policy is not None else active_trust_policy()
    if identity.adapter is None or identity.adapter in policy.trusted_adapters:
        return policy
    return MemoryTrustPolicy(
        enabled=policy.enabled,
        trusted_adapters=policy.trusted_adapters | {identity.adapter},
        trust_untagged=policy.trust_untagged,
    )


def read_facts(
    store: MemoryView,
    identity: AgentIdentity,
    tag: str,
    *,
    scope: str = "project",
    trust_policy: MemoryTrustPolicy | None = None,
) -> AgentFacts:
    """One fact per key under `tag`, newest first: each key's newest version the policy
    trusts. Scope 'run' reads the reader's run; 'project' reads project facts of every run."""
    writable = _writable(store)
    policy = policy_for(identity, trust_policy)
    checked_tag = check_tag(tag)
    checked_scope = _scope(scope, identity)
    shown: list[Fact] = []
    passed_over: list[Exclusion] = []
    with writable.write_transaction() as tx:
        head = tx.head_position()
        identity_of_tag = (checked_scope, run_key(checked_scope, identity.run_id), checked_tag)
        for current in reads.current_facts(tx, identity_of_tag, None):
            if _reason(policy, current.source_adapter, quarantined=False) is None:
                shown.append(current)
                continue
            versions = _versions(tx, (*identity_of_tag, current.key), up_to=current.position)
            trusted, kept = _split(policy, versions, first_only=True)
            shown.extend(trusted)
            passed_over.extend(kept)
        shown.sort(key=_position, reverse=True)
        facts = [_shown(fact) for fact in shown]
        receipt = _receipt(tx, identity, policy, (checked_tag,), NO_LIMIT, head, facts, passed_over)
    return AgentFacts(facts=facts, kept_out=len(passed_over), receipt_position=receipt)


def read_history(
    store: MemoryView,
    identity: AgentIdentity,
    tag: str,
    key: str,
    *,
    scope: str = "project",
    trust_policy: MemoryTrustPolicy | None = None,
    limit: int | None = None,
) -> AgentFacts:
    """The versions of one fact the policy trusts, oldest first: the newest `limit` of them
    (all when None)."""
    writable = _writable(store)
    policy = policy_for(identity, trust_policy)
    identity_of_fact = fact_identity(
        _scope(scope, identity), identity.run_id, check_tag(tag), check_key(key)
    )
    count = None if limit is None else check_limit(limit)
    with writable.write_transaction() as tx:
        head = tx.head_position()
        versions = _versions(tx, identity_of_fact, up_to=head)
        trusted, kept = _split(policy, versions, first_only=False)
        facts = [_shown(fact) for fact in reversed(trusted[:count])]
        receipt = _receipt(
            tx, identity, policy, (identity_of_fact[2],), count or NO_LIMIT, head, facts, kept
        )
    return AgentFacts(facts=facts, kept_out=len(kept), receipt_position=receipt)


def recall(
    store: MemoryView,
    identity: AgentIdentity,
    tags: Sequence[str] | None,
    *,
    limit: int = 10,
    trust_policy: MemoryTrustPolicy | None = None,
) -> Recall:
    """The prompt section `load_persistent_memory` builds for this reader, with its receipt."""
    return recall_memory(
        store,
        tags,
        trust_policy=policy_for(identity, trust_policy),
        limit=limit,
        task_id=identity.task_id,
        run_id=identity.run_id or None,
        adapter=identity.adapter,
    )


def _writable(store: object) -> SQLiteMemoryStore:
    """Reads are receipted, so they need a store that writes."""
    if isinstance(store, SQLiteMemoryStore):
        return store
    if isinstance(store, MemoryView):
        raise ReadOnlyStoreError(READ_ONLY)
    raise InvalidTypeError(f"store must be a SQLiteMemoryStore, not {type(store).__name__}")


def _scope(scope: object, identity: AgentIdentity) -> str:
    checked = check_scope(scope)
    if checked == "run" and not identity.run_id:
        raise InvalidInputError("scope 'run' needs a run id, and this reader has none")
    return checked


def _versions(
    tx: ProjectedTransaction, identity: tuple[str, str, str, str], *, up_to: int
) -> list[tuple[Fact, bool]]:
    """Versions of one fact identity at or below `up_to`, newest first, with their
    quarantine flags."""
    rows = tx.execute(sql.FACT_VERSIONS_NEWEST_FIRST, (*identity, up_to))
    return [(reads.fact_from_row(row[1:]), bool(row[0])) for row in rows]


def _split(
    policy: MemoryTrustPolicy, versions: list[tuple[Fact, bool]], *, first_only: bool
) -> tuple[list[Fact], list[Exclusion]]:
    """The trusted versions (the first one only, if `first_only`) and those passed over on
    the way, in the order given."""
    trusted: list[Fact] = []
    kept: list[Exclusion] = []
    for fact, quarantined in versions:
        reason = _reason(policy, fact.source_adapter, quarantined=quarantined)
        if reason is not None:
            kept.append(Exclusion(position=fact.position, reason=reason))
            continue
        trusted.append(fact)
        if first_only:
            break
    return trusted, kept


def _reason(policy: MemoryTrustPolicy, adapter: str | None, *, quarantined: bool) -> str | None:
    """Why a version written under `adapter` is kept out, or None if the reader may see it."""
    if quarantined:
        return QUARANTINED
    if not policy.enabled:
        return None
    if adapter is None:
        return None if policy.trust_untagged else UNTAGGED_NOT_TRUSTED
    return None if adapter in policy.trusted_adapters else UNTRUSTED_ADAPTER


def _shown(fact: Fact) -> Fact:
    """`fact` as shown to an agent: the value with invisible characters escaped (newlines and
    tabs kept), every one-line field with them all escaped."""
    return Fact(
        tag=_field(fact.tag),
        key=_field(fact.key),
        value=escape_invisible(fact.value),
        scope=fact.scope,
        producer_task_id=_field(fact.producer_task_id),
        ts_ns=fact.ts_ns,
        content_hash=fact.content_hash,
        position=fact.position,
        run_id=None if fact.run_id is None else _field(fact.run_id),
        source_adapter=None if fact.source_adapter is None else _field(fact.source_adapter),
    )


def _field(text: str) -> str:
    return escape_invisible(text, keep_newlines=False)


def _position(fact: Fact) -> int:
    return fact.position


def _receipt(
    tx: ProjectedTransaction,
    identity: AgentIdentity,
    policy: MemoryTrustPolicy,
    tags: tuple[str, ...],
    limit: int,
    head: int,
    facts: list[Fact],
    passed_over: list[Exclusion],
) -> int:
    """Append the read's receipt in the transaction that read; return its position."""
    receipt = RecallRecorded(
        task_id=identity.task_id,
        run_id=identity.run_id or None,
        adapter=identity.adapter,
        tags=tags,
        limit=limit,
        included=tuple(fact.position for fact in facts),
        excluded=tuple(passed_over[:REFUSED_SCAN]),
        policy=policy.settings(),
        head_position=head,
        rendered_hash=content_hash(msgspec.json.encode(facts)),
    )
    event = NewEvent(
        payload=receipt, producer_task_id=identity.task_id, run_id=identity.run_id or None
    )
    return tx.append([event])[0].position
