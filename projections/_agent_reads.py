"""What an agent may read: facts and memory filtered by a trust policy, each read receipted.

An agent reads as the identity its orchestrator bound (`AgentIdentity`: task, run, adapter),
under a trust policy (`active_trust_policy()` unless one is given) to which its own adapter is
added: it sees its own adapter's writes, operator (untagged) writes when the policy trusts
them, and the writes of the adapters the policy names; never a quarantined version, nor an
import no operator signed, and never a write tainted by a source upstream it may not trust.
Where a fact's newest version is kept out, the agent sees the newest version it may trust, if
any. With `show_all`, it sees every row, each marked with its verdict (`trust`), and the
receipt says so.

Every value comes back as shown text: invisible characters escaped (`projections._visible`),
unless a caller that escapes what it prints asks for them as stored (`escape=False`). A
memory entry is held to the event that wrote it before it is shown, as on the prompt path
(`projections._drift`): one its event does not bear out is kept out as `read_model_mismatch`.
Each function here is a selection for the one read path (`projections._reading`), which
judges, escapes and appends the receipt: the positions returned, the versions passed over
and why, the policy, the log head read at, and the BLAKE3 hash of what was returned (of
their msgspec JSON encoding as returned).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import msgspec

from eventlog import InvalidInputError, InvalidTypeError
from eventlog.checks import check_actor, check_optional_actor
from projections import _reading as reading
from projections._entries import Fact, MemoryEntry
from projections._knowledge import fact_identity, run_key
from projections._prompt import Recall, recall_memory
from projections._tags import TagListing, list_tags
from projections._trust import MemoryTrustPolicy, active_trust_policy
from projections._validation import (
    check_allow_list,
    check_key,
    check_limit,
    check_memory_type,
    check_scope,
    check_tag,
    check_tags,
)
from projections._view import MemoryView


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
    """Versions passed over because the policy does not trust their source, they are
    quarantined or tainted (the receipt names at most `NAMED_EXCLUSIONS` of them)."""
    receipt_position: int
    trust: list[str] = []
    """Each fact's verdict, in order: `trusted`, or (with `show_all`) why the policy would
    keep it out."""


class AgentEntries(msgspec.Struct, frozen=True, kw_only=True):
    """Memory entries an agent read, with how many were kept out and its receipt."""

    entries: list[MemoryEntry]
    kept_out: int
    """Newer entries passed over: not trusted by the policy, tainted, or not borne out by
    their events (the receipt names at most `NAMED_EXCLUSIONS` of them)."""
    more: bool
    """Whether older entries match too, past the limit (trusted or not)."""
    receipt_position: int
    trust: list[str] = []
    """Each entry's verdict, in order, as `AgentFacts.trust`."""


def policy_for(
    identity: AgentIdentity, trust_policy: MemoryTrustPolicy | None
) -> MemoryTrustPolicy:
    """`trust_policy` (the environment's when None) with the reader's own adapter trusted."""
    _check_identity(identity)
    if trust_policy is not None and not isinstance(trust_policy, MemoryTrustPolicy):
        raise InvalidTypeError(
            f"trust_policy must be a MemoryTrustPolicy, not {type(trust_policy).__name__}"
        )
    policy = trust_policy if trust_policy is not None else active_trust_policy()
    return reading.reader_policy(policy, identity.adapter)


def agent_reading(
    store: MemoryView,
    identity: AgentIdentity,
    trust_policy: MemoryTrustPolicy | None,
    *,
    show_all: bool = False,
) -> reading.Reading:
    """How `identity` reads through `store`: named in its receipts (under the adapter the
    store writes as when the identity names none), under `trust_policy` (the store's when
    None: `MemoryView.trust_policy`) with the reader's own adapter trusted."""
    _check_identity(identity)
    policy = reading.policy_given(store, trust_policy)
    reader = reading.NamedReader.of(store, identity.task_id, identity.run_id, identity.adapter)
    return reading.Reading(reader, policy, _flag("show_all", show_all))


def read_facts(
    store: MemoryView,
    identity: AgentIdentity,
    tag: str,
    *,
    scope: str = "project",
    trust_policy: MemoryTrustPolicy | None = None,
    escape: bool = True,
    show_all: bool = False,
) -> AgentFacts:
    """One fact per key under `tag`, newest first: each key's newest version the policy
    trusts (with `show_all`, the current version, marked). Scope 'run' reads the reader's
    run; 'project' reads project facts of every run. With `escape=False` the facts come back
    as stored, for a caller that escapes them."""
    how = agent_reading(store, identity, trust_policy, show_all=show_all)
    checked_tag = check_tag(tag)
    checked_scope = _scope(scope, identity)
    of_tag = (checked_scope, run_key(checked_scope, identity.run_id), checked_tag)
    found = reading.read(
        store,
        how,
        reading.current_facts(of_tag, None),
        tags=(checked_tag,),
        limit=reading.NO_LIMIT,
        show=reading.shown_escaped if _flag("escape", escape) else reading.shown_as_stored,
    )
    return AgentFacts(
        facts=found.shown,
        kept_out=len(found.kept_out),
        receipt_position=_receipted(found.receipt_position),
        trust=found.trust,
    )


def read_history(
    store: MemoryView,
    identity: AgentIdentity,
    tag: str,
    key: str,
    *,
    scope: str = "project",
    trust_policy: MemoryTrustPolicy | None = None,
    limit: int | None = None,
    escape: bool = True,
    show_all: bool = False,
) -> AgentFacts:
    """The versions of one fact the policy trusts (with `show_all`, every version, marked),
    oldest first: the newest `limit` of them (all when None)."""
    how = agent_reading(store, identity, trust_policy, show_all=show_all)
    of_fact = fact_identity(
        _scope(scope, identity), identity.run_id, check_tag(tag), check_key(key)
    )
    count = None if limit is None else check_limit(limit)
    found = reading.read(
        store,
        how,
        reading.fact_versions(of_fact, count),
        tags=(of_fact[2],),
        limit=count or reading.NO_LIMIT,
        show=reading.shown_escaped if _flag("escape", escape) else reading.shown_as_stored,
    )
    return AgentFacts(
        facts=found.shown,
        kept_out=len(found.kept_out),
        receipt_position=_receipted(found.receipt_position),
        trust=found.trust,
    )


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
    show_all: bool = False,
) -> AgentEntries:
    """The newest `limit` visible entries, of `type`, with any of `tags` and (an allow-list
    as `MemoryView.query`'s) written by `adapters`, that the policy trusts and their events
    bear out (with `show_all`, every one, marked), newest first; those passed over on the
    way are counted and receipted. With `escape=False` they come back as stored."""
    how = agent_reading(store, identity, trust_policy, show_all=show_all)
    kind = None if type is None else check_memory_type(type)
    wanted = check_tags(tags)
    count = check_limit(limit)
    found = reading.read(
        store,
        how,
        reading.newest_entries(kind, wanted, check_allow_list(adapters), count),
        tags=wanted,
        limit=count,
        show=reading.shown_escaped if _flag("escape", escape) else reading.shown_as_stored,
    )
    return AgentEntries(
        entries=found.shown,
        kept_out=len(found.kept_out),
        more=found.more,
        receipt_position=_receipted(found.receipt_position),
        trust=found.trust,
    )


def recall(
    store: MemoryView,
    identity: AgentIdentity,
    tags: Sequence[str] | None,
    *,
    limit: int = 10,
    trust_policy: MemoryTrustPolicy | None = None,
) -> Recall:
    """The prompt section `load_persistent_memory` builds for this reader, with its receipt."""
    _check_identity(identity)
    return recall_memory(
        store,
        tags,
        trust_policy=trust_policy,
        limit=limit,
        task_id=identity.task_id,
        run_id=identity.run_id or None,
        adapter=identity.adapter,
    )


def read_tags(
    store: MemoryView,
    identity: AgentIdentity,
    *,
    scope: str = "project",
    trust_policy: MemoryTrustPolicy | None = None,
) -> TagListing:
    """The tags under `scope` this reader may see, with their facts' keys and counts
    (`projections._tags`), receipted: what to pass `read_facts`, `read_history` and `recall`."""
    how = agent_reading(store, identity, trust_policy)
    return list_tags(store, how, _scope(scope, identity), identity.run_id)


def _check_identity(identity: object) -> None:
    if not isinstance(identity, AgentIdentity):
        raise InvalidTypeError(f"identity must be an AgentIdentity, not {type(identity).__name__}")


def _scope(scope: object, identity: AgentIdentity) -> str:
    checked = check_scope(scope)
    if checked == "run" and not identity.run_id:
        raise InvalidInputError("scope 'run' needs a run id, and this reader has none")
    return checked


def _flag(name: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise InvalidTypeError(f"{name} must be a bool, not {type(value).__name__}")
    return value


def _receipted(position: int | None) -> int:
    assert position is not None, "a named reader's read is receipted"
    return position
