"""What an agent may read: facts and memory filtered by a trust policy, each read receipted.

An agent reads as the identity its orchestrator bound (`AgentIdentity`: task, run, adapter),
under a trust policy (`active_trust_policy()` unless one is given) to which its own adapter is
added: it sees its own adapter's writes, operator (untagged) writes when the policy trusts
them, and the writes of the adapters the policy names; never a quarantined version. Where a
fact's newest version is kept out, the agent sees the newest version it may trust, if any.

Every value comes back as shown text: invisible characters escaped (`projections.visible`),
unless a caller that escapes what it prints asks for them as stored (`escape=False`). A
memory entry is held to the event that wrote it before it is shown, as on the prompt path
(`projections.drift`): one its event does not bear out is kept out as `read_model_mismatch`.
Every read appends a `recall_recorded` receipt, as the prompt path does: the positions
returned, the versions passed over and why, the policy, the log head read at, and the
BLAKE3 hash of what was returned (of their msgspec JSON encoding as returned).
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
from eventlog.checks import MAX_POSITION, check_actor, check_optional_actor
from projections import reads, sql
from projections.drift import READ_MODEL_MISMATCH, unconfirmed_entries
from projections.entries import Fact, MemoryEntry
from projections.knowledge import fact_identity, run_key
from projections.projector import ModelSnapshot, ProjectedTransaction
from projections.prompt import (
    QUARANTINED,
    REFUSED_SCAN,
    UNTAGGED_NOT_TRUSTED,
    UNTRUSTED_ADAPTER,
    Recall,
    recall_memory,
)
from projections.store import SQLiteMemoryStore
from projections.taint import TAINTED, taint
from projections.trust import MemoryTrustPolicy, active_trust_policy
from projections.validation import (
    check_allow_list,
    check_key,
    check_limit,
    check_memory_type,
    check_scope,
    check_tag,
    check_tags,
)
from projections.view import READ_ONLY, MemoryView
from projections.visible import escape_invisible

NO_LIMIT = 0
"""The `limit` a receipt records for a read that returns everything it may (subscribe)."""
TRUSTED = "trusted"
"""`trust_of` for a row a reader under the policy may see."""
FIRST_CHUNK = 32
"""Entries an entry read takes at first (at least its limit); then it doubles."""


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


class AgentEntries(msgspec.Struct, frozen=True, kw_only=True):
    """Memory entries an agent read, with how many were kept out and its receipt."""

    entries: list[MemoryEntry]
    kept_out: int
    """Newer entries passed over: not trusted by the policy, or not borne out by their
    events (the receipt names at most `REFUSED_SCAN` of them)."""
    more: bool
    """Whether older entries match too, past the limit (trusted or not)."""
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
    escape: bool = True,
) -> AgentFacts:
    """One fact per key under `tag`, newest first: each key's newest version the policy
    trusts. Scope 'run' reads the reader's run; 'project' reads project facts of every run.
    With `escape=False` the facts come back as stored, for a caller that escapes them."""
    writable = _writable(store)
    policy = policy_for(identity, trust_policy)
    checked_tag = check_tag(tag)
    checked_scope = _scope(scope, identity)
    shown: list[Fact] = []
    passed_over: list[Exclusion] = []
    with writable.write_transaction() as tx, writable.snapshot() as snap:
        head = tx.head_position()
        identity_of_tag = (checked_scope, run_key(checked_scope, identity.run_id), checked_tag)
        currents = reads.current_facts(tx, identity_of_tag, None)
        tainted = taint(snap, [fact.position for fact in currents], policy)
        for current in currents:
            if (
                _reason(policy, current.source_adapter, quarantined=False) is None
                and current.position not in tainted
            ):
                shown.append(current)
                continue
            versions = _versions(tx, (*identity_of_tag, current.key), up_to=current.position)
            trusted, kept = _split(policy, versions, first_only=True, snap=snap)
            shown.extend(trusted)
            passed_over.extend(kept)
        shown.sort(key=_position, reverse=True)
        facts = [_shown(fact) for fact in shown] if _flag("escape", escape) else shown
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
    with writable.write_transaction() as tx, writable.snapshot() as snap:
        head = tx.head_position()
        versions = _versions(tx, identity_of_fact, up_to=head)
        trusted, kept = _split(policy, versions, first_only=False, snap=snap)
        facts = [_shown(fact) for fact in reversed(trusted[:count])]
        receipt = _receipt(
            tx, identity, policy, (identity_of_fact[2],), count or NO_LIMIT, head, facts, kept
        )
    return AgentFacts(facts=facts, kept_out=len(kept), receipt_position=receipt)


def read_entries(
    store: MemoryView,
    identity: AgentIdentity,
    *,
    type: str | None = None,
    tags: Sequence[str] | None = None,
    limit: int = 20,
    adapters: Sequence[str] | None = None,
    trust_policy: MemoryTrustPolicy | None = None,
    escape: bool = True,
) -> AgentEntries:
    """The newest `limit` visible entries, of `type`, with any of `tags` and (an allow-list
    as `MemoryView.query`'s) written by `adapters`, that the policy trusts and their events
    bear out, newest first; those passed over on the way are counted and receipted. With
    `escape=False` they come back as stored."""
    writable = _writable(store)
    policy = policy_for(identity, trust_policy)
    kind = None if type is None else check_memory_type(type)
    wanted = check_tags(tags)
    count = check_limit(limit)
    allowed = check_allow_list(adapters)
    escaped = _flag("escape", escape)
    shown: list[MemoryEntry] = []
    passed_over: list[Exclusion] = []
    more = False
    with writable.snapshot() as snap:
        head = snap.head().position
        before, chunk = None, max(FIRST_CHUNK, count)
        while allowed != ():
            rows = reads.entries(
                snap, type=kind, tags=wanted, adapters=allowed, limit=chunk, before=before
            )
            for entry in rows:
                if len(shown) == count:
                    more = True
                    break
                reason = _reason(policy, entry.source_adapter, quarantined=False)
                if reason is None and unconfirmed_entries(snap, [entry]):
                    reason = READ_MODEL_MISMATCH
                source = (
                    None if reason else taint(snap, [entry.position], policy).get(entry.position)
                )
                if source is not None:
                    passed_over.append(
                        Exclusion(position=entry.position, reason=TAINTED, source=source)
                    )
                elif reason is None:
                    shown.append(entry)
                else:
                    passed_over.append(Exclusion(position=entry.position, reason=reason))
            if more or len(rows) < chunk:
                break
            before, chunk = rows[-1].id, min(2 * chunk, MAX_POSITION)
    entries = [_shown_entry(e) for e in shown] if escaped else shown
    with writable.write_transaction() as tx:
        receipt = _receipt(tx, identity, policy, wanted, count, head, entries, passed_over)
    return AgentEntries(
        entries=entries, kept_out=len(passed_over), more=more, receipt_position=receipt
    )


def trust_of(policy: MemoryTrustPolicy, adapter: str | None, *, quarantined: bool = False) -> str:
    """`TRUSTED` when a reader under `policy` may see a row written under `adapter`;
    otherwise why not (`untrusted_adapter`, `untagged_not_trusted`, `quarantined`)."""
    return _reason(policy, adapter, quarantined=quarantined) or TRUSTED


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
    policy: MemoryTrustPolicy,
    versions: list[tuple[Fact, bool]],
    *,
    first_only: bool,
    snap: ModelSnapshot,
) -> tuple[list[Fact], list[Exclusion]]:
    """The trusted versions (the first one only, if `first_only`) and those passed over on
    the way, in the order given; a version tainted by a source upstream is passed over."""
    trusted: list[Fact] = []
    kept: list[Exclusion] = []
    tainted = taint(snap, [fact.position for fact, _ in versions], policy)
    for fact, quarantined in versions:
        reason = _reason(policy, fact.source_adapter, quarantined=quarantined)
        if reason is not None:
            kept.append(Exclusion(position=fact.position, reason=reason))
            continue
        if fact.position in tainted:
            kept.append(
                Exclusion(position=fact.position, reason=TAINTED, source=tainted[fact.position])
            )
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


def _shown_entry(entry: MemoryEntry) -> MemoryEntry:
    """`entry` as shown to an agent, as `_shown` shows a fact."""
    return msgspec.structs.replace(
        entry,
        content=escape_invisible(entry.content),
        tags=[_field(tag) for tag in entry.tags],
        task_id=None if entry.task_id is None else _field(entry.task_id),
        source_agent=_field(entry.source_agent),
        source_model=_field(entry.source_model),
        source_adapter=None if entry.source_adapter is None else _field(entry.source_adapter),
    )


def _field(text: str) -> str:
    return escape_invisible(text, keep_newlines=False)


def _flag(name: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise InvalidTypeError(f"{name} must be a bool, not {type(value).__name__}")
    return value


def _position(row: Fact | MemoryEntry | msgspec.Struct) -> int:
    position = getattr(row, "position", 0)
    assert isinstance(position, int)
    return position


def _receipt(
    tx: ProjectedTransaction,
    identity: AgentIdentity,
    policy: MemoryTrustPolicy,
    tags: tuple[str, ...],
    limit: int,
    head: int,
    facts: Sequence[msgspec.Struct],
    passed_over: list[Exclusion],
) -> int:
    """Append the read's receipt in the transaction that read; return its position."""
    receipt = RecallRecorded(
        task_id=identity.task_id,
        run_id=identity.run_id or None,
        adapter=identity.adapter,
        tags=tags,
        limit=limit,
        included=tuple(_position(fact) for fact in facts),
        excluded=tuple(passed_over[:REFUSED_SCAN]),
        policy=policy.settings(),
        head_position=head,
        rendered_hash=content_hash(msgspec.json.encode(facts)),
    )
    event = NewEvent(
        payload=receipt,
        producer_task_id=identity.task_id,
        run_id=identity.run_id or None,
        source_adapter=identity.adapter,
    )
    return tx.append([event])[0].position
