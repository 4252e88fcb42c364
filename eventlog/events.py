"""Event types: the payload kinds, the draft a caller appends, and the recorded envelope.

Payloads are frozen, keyword-only msgspec Structs on one tagged base; the tag is the event's
`kind`. A shipped tag is never renamed, and fields added later get defaults, so every stored
event stays decodable. Fields added after events were first stored (an operator's
`authorization`, an import's `claims`, a write's `derived_from`, a policy's `owners`) default
to `UNSET` and are left out of the encoding when unset, so a stored event of an earlier
version still re-encodes to its very bytes.
"""

from __future__ import annotations

from typing import ClassVar, Literal, Self

import msgspec
from msgspec import UNSET, UnsetType


class MigrationClaims(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """What an event copied by a migration was in the log it came from: its log, position,
    id, writer and time there, and, for an event an operator signed, its content hash there
    (the v1 signature covers it). Claims, kept as written; readers take them as the event's
    provenance only under the log's signed migration statement."""

    log_id: str
    position: int
    event_id: str
    ts_ns: int
    producer_task_id: str
    run_id: str | None
    source_adapter: str | None
    content_hash: str | None = None
    """Only for a signed event: a v1 content hash is unkeyed BLAKE3 over the text, so kept
    in the chain for every event it would let anyone confirm a guessed text forever."""


class Payload(msgspec.Struct, frozen=True, kw_only=True, tag_field="kind"):
    """Base of every event payload. The struct tag is the event's kind."""

    text_field: ClassVar[str | None] = None
    """The field holding the text this event writes, if it writes any."""
    operator_only: ClassVar[bool] = False
    """Whether every event of this kind is an operator action: signed by an operator key once
    the log has one, and never written by an agent's PostgreSQL login."""
    operator_fields: ClassVar[tuple[str, ...]] = ()
    """Fields that make an event of this kind an operator action when set (an import's
    `claims`)."""

    migrated: MigrationClaims | UnsetType = UNSET
    """Set on an event copied from a format-v1 log by `factledger migrate`: what the
    original event said about itself. Honoured only within the range the log's migration
    statement (`LogMigrated`, at position 1) vouches for (`eventlog.migration`)."""

    @property
    def kind(self) -> str:
        """The event kind, as stored in the log."""
        return kind_of(type(self))

    def written_text(self) -> str:
        """The text this event writes, whose BLAKE3 digest is its `content_hash`."""
        if self.text_field is None:
            return ""
        text: str = getattr(self, self.text_field)
        return text

    def without_text(self) -> Self:
        """This payload with its text field (if it has one) empty: as a v2 body holds it."""
        if self.text_field is None:
            return self
        return msgspec.structs.replace(self, **{self.text_field: ""})


def kind_of(payload_type: type[Payload]) -> str:
    """The kind events of `payload_type` are stored under (its struct tag)."""
    tag = payload_type.__struct_config__.tag
    assert isinstance(tag, str)
    return tag


class Authorization(msgspec.Struct, frozen=True, kw_only=True):
    """An operator's Ed25519 signature over an action (`eventlog.signing.action_statement`)."""

    key_id: str
    """The signing key's id: 8 lowercase hex digits, its C2SP signed-note key hash."""
    signature: str
    """The 64-byte Ed25519 signature, in standard base64."""


class LegacyClaims(msgspec.Struct, frozen=True, kw_only=True):
    """What an imported row of the replaced store said about itself: claims, kept as written,
    never the event's own provenance."""

    id: int
    created_at: float
    task_id: str | None = None
    source_agent: str = ""
    source_model: str = ""
    source_adapter: str | None = None


class MemoryAdded(Payload, tag="memory_added", frozen=True, kw_only=True):
    """A memory entry was added. Its entry id is the position of this event."""

    text_field: ClassVar[str | None] = "content"
    operator_fields: ClassVar[tuple[str, ...]] = ("claims",)

    type: str
    content: str
    tags: tuple[str, ...] = ()
    importance: float = 1.0
    task_id: str | None = None
    source_agent: str = ""
    source_model: str = ""
    created_at: float | None = None
    """Epoch seconds kept from an imported legacy row; None means the event's `ts_ns`."""
    legacy_id: int | None = None
    """The row id in the legacy `memory` table this entry was imported from (imports written
    before imports kept `claims`)."""
    claims: LegacyClaims | UnsetType = UNSET
    """What the legacy row this entry was imported from said about itself. Set on imports;
    readers honour these claims only as README's "Imports" section says."""
    authorization: Authorization | UnsetType = UNSET
    """An operator's signature, on an import."""
    derived_from: tuple[int, ...] | UnsetType = UNSET
    """Positions the writer says this entry was derived from (lineage, besides the recalls
    its task made earlier in its run)."""


class MemoryRemoved(Payload, tag="memory_removed", frozen=True, kw_only=True):
    """Memory entries stopped being visible to readers (remove or prune)."""

    entry_ids: tuple[int, ...]
    reason: str


class MemoryReweighted(Payload, tag="memory_reweighted", frozen=True, kw_only=True):
    """Every visible entry's importance was multiplied by `factor` (decay)."""

    factor: float


class FactPublished(Payload, tag="fact_published", frozen=True, kw_only=True):
    """A fact was published under (scope, tag, key); run scope takes the envelope's run_id."""

    text_field: ClassVar[str | None] = "value"

    scope: str
    tag: str
    key: str
    value: str
    derived_from: tuple[int, ...] | UnsetType = UNSET
    """Positions the writer says this value was derived from (see `MemoryAdded`)."""


class Exclusion(msgspec.Struct, frozen=True, kw_only=True):
    """One event kept out of a prompt, and why."""

    position: int
    reason: str
    source: int | UnsetType = UNSET
    """For reason `tainted`: the source position, upstream in its lineage, that taints it."""


class TrustSettings(msgspec.Struct, frozen=True, kw_only=True):
    """The trust policy a prompt was built under."""

    enabled: bool
    trusted_adapters: tuple[str, ...]
    trust_untagged: bool
    propagate_taint: bool | UnsetType = UNSET
    """Whether writes derived from untrusted, quarantined or mismatched sources were kept
    out too (unset on receipts written before lineage existed: they were not)."""


class RecallRecorded(Payload, tag="recall_recorded", frozen=True, kw_only=True):
    """A prompt section was built from memory: what went in, what was kept out, and why."""

    task_id: str | None
    run_id: str | None
    adapter: str | None
    tags: tuple[str, ...]
    limit: int
    included: tuple[int, ...]
    excluded: tuple[Exclusion, ...]
    policy: TrustSettings
    head_position: int
    rendered_hash: str


class QuarantineApplied(Payload, tag="quarantine_applied", frozen=True, kw_only=True):
    """Earlier events matching every given selector stop reaching readers."""

    operator_only: ClassVar[bool] = True

    reason: str
    match_positions: tuple[int, ...] = ()
    match_producer_task_id: str | None = None
    match_source_adapter: str | None = None
    authorization: Authorization | UnsetType = UNSET


class QuarantineReleased(Payload, tag="quarantine_released", frozen=True, kw_only=True):
    """An earlier quarantine no longer applies."""

    operator_only: ClassVar[bool] = True

    quarantine_position: int
    reason: str
    authorization: Authorization | UnsetType = UNSET


class OperatorAdded(Payload, tag="operator_added", frozen=True, kw_only=True):
    """An Ed25519 key became an operator key: after this position it may sign operator actions.
    The first is signed by the key it adds; later ones by an operator key."""

    operator_only: ClassVar[bool] = True

    name: str
    key_id: str
    public_key: str
    """The 32-byte Ed25519 public key, in standard base64."""
    authorization: Authorization | UnsetType = UNSET


class OperatorRemoved(Payload, tag="operator_removed", frozen=True, kw_only=True):
    """An operator key stopped being one: after this position it authorizes nothing, while
    what it signed before stands."""

    operator_only: ClassVar[bool] = True

    key_id: str
    reason: str
    authorization: Authorization | UnsetType = UNSET


class ContentErased(Payload, tag="content_erased", frozen=True, kw_only=True):
    """An operator erased the texts written at `positions`: once folded, their text and salt
    are gone from the content store and the read model, while every chain value, proof and
    checkpoint stays valid (they commit to the salted hash, not the text). Names the
    positions and why, never the text. Takes effect only when signed by an operator key
    registered at its position (a log with no operator key cannot erase)."""

    operator_only: ClassVar[bool] = True

    positions: tuple[int, ...]
    reason: str
    authorization: Authorization | UnsetType = UNSET


ON_CONFLICT = ("allow", "deny", "hold")
"""What a conflict policy does with a version written by someone who does not own the fact:
`allow` (last write wins), `deny` (recorded, never current), `hold` (pending until an
operator approves or rejects it)."""


class ConflictPolicySet(Payload, tag="conflict_policy_set", frozen=True, kw_only=True):
    """From here on, facts under `tag` (in `scope`, or in every scope when unset) follow
    `on_conflict` (one of `ON_CONFLICT`)."""

    operator_only: ClassVar[bool] = True

    tag: str
    on_conflict: str
    scope: str | UnsetType = UNSET
    owners: tuple[str, ...] | UnsetType = UNSET
    """Under `deny` and `hold`, the adapters that own the tag's facts: their versions, and
    versions written under no adapter (an operator's), become current; any other adapter's
    is denied or held, whoever wrote first. Unset on policies written before owners existed:
    the adapter of the version current when another is written owns it (the first writer)."""
    authorization: Authorization | UnsetType = UNSET


class FactApproved(Payload, tag="fact_approved", frozen=True, kw_only=True):
    """An operator approved the held fact version written at `position`."""

    operator_only: ClassVar[bool] = True

    position: int
    authorization: Authorization | UnsetType = UNSET


class FactRejected(Payload, tag="fact_rejected", frozen=True, kw_only=True):
    """An operator rejected the held fact version written at `position`."""

    operator_only: ClassVar[bool] = True

    position: int
    reason: str
    authorization: Authorization | UnsetType = UNSET


class LogMigrated(Payload, tag="log_migrated", frozen=True, kw_only=True):
    """The first event of a log made by `factledger migrate`: an operator's signed statement
    that the events after it, up to position `previous_size + 1`, are the events of the
    format-v1 log `previous_log_id` (whose head chain value was `previous_head_chain_hash`),
    in order. Signed by the key it names, which was an operator key of that log."""

    operator_only: ClassVar[bool] = True

    previous_log_id: str
    previous_format: int
    previous_size: int
    previous_head_chain_hash: str
    name: str
    key_id: str
    public_key: str
    """The signing key's 32-byte Ed25519 public key, in standard base64."""
    authorization: Authorization | UnsetType = UNSET


EventPayload = (
    MemoryAdded
    | MemoryRemoved
    | MemoryReweighted
    | FactPublished
    | RecallRecorded
    | QuarantineApplied
    | QuarantineReleased
    | OperatorAdded
    | OperatorRemoved
    | ConflictPolicySet
    | FactApproved
    | FactRejected
    | LogMigrated
    | ContentErased
)
"""Every event kind the log can hold."""

PAYLOAD_TYPES: tuple[type[Payload], ...] = (
    MemoryAdded,
    MemoryRemoved,
    MemoryReweighted,
    FactPublished,
    RecallRecorded,
    QuarantineApplied,
    QuarantineReleased,
    OperatorAdded,
    OperatorRemoved,
    ConflictPolicySet,
    FactApproved,
    FactRejected,
    LogMigrated,
    ContentErased,
)


class Unreadable(Payload, tag="unreadable", frozen=True, kw_only=True):
    """A stored row this version cannot decode (an unknown kind, a malformed or oversized
    body, written by a later version or by hand): read as an event that changes nothing.
    Never appended; its envelope holds the row's position and event id and, where the body
    names them readably, its writer."""

    reason: str
    claimed_kind: str | None = None
    """The kind the row names, when it names one readably."""


RecordedPayload = EventPayload | Unreadable
"""What a recorded event's payload can be: an event kind, or a row read as unreadable."""

OPERATOR_KINDS = frozenset(kind_of(t) for t in PAYLOAD_TYPES if t.operator_only)
"""Kinds whose every event is an operator action (`Payload.operator_only`)."""
OPERATOR_FIELDS = {kind_of(t): t.operator_fields for t in PAYLOAD_TYPES if t.operator_fields}
"""Per kind, the fields whose presence makes one of its events an operator action (an
import: a `memory_added` holding `claims`)."""
AGENT_KINDS = frozenset(kind_of(t) for t in PAYLOAD_TYPES) - OPERATOR_KINDS
"""Kinds an agent may write (an event of them is still an operator action when it sets one
of its kind's `OPERATOR_FIELDS`)."""


def is_operator_action(payload: Payload) -> bool:
    """Whether `payload` is an operator action: a kind only operators write, or an event
    setting a field only operators set (README, "Operators and signing")."""
    return payload.operator_only or any(
        getattr(payload, name) is not UNSET for name in payload.operator_fields
    )


GENERATED_ID_PREFIX = "fl:"
"""Event ids the log generates start with this; ids a caller gives may not."""


class NewEvent(msgspec.Struct, frozen=True, kw_only=True):
    """An event to append. The log assigns position, timestamp (unless given) and hashes."""

    payload: EventPayload
    producer_task_id: str = ""
    run_id: str | None = None
    source_adapter: str | None = None
    event_id: str | None = None
    """Give one to make a retry idempotent (it may not start with `fl:`); the log generates a
    unique one otherwise."""
    ts_ns: int | None = None
    """Wall-clock nanoseconds; the log's clock is used when None. Attribution, not order."""
    salt: bytes | None = None
    """The 32 random bytes keying `content_hash`; the log draws them when None. Given only
    by a signer, who needs the content hash before the event is appended."""


class Envelope(msgspec.Struct, frozen=True, kw_only=True):
    """The stored form of an event: these fields, encoded canonically, are the hashed bytes."""

    position: int
    event_id: str
    ts_ns: int
    producer_task_id: str
    run_id: str | None
    source_adapter: str | None
    content_hash: str
    payload: RecordedPayload

    @property
    def kind(self) -> str:
        """The event kind (the payload's tag)."""
        return self.payload.kind


TextState = Literal["intact", "absent", "mismatch"]
"""How a recorded event's text was found (format v2 keeps it beside the chain): `intact`, it
matches `content_hash`; `absent`, no text is stored for the event (erased, or a row written
around the API); `mismatch`, the stored text does not match `content_hash` (drift). Unless
intact, the payload's text field reads empty: nothing unproven reaches a reader."""


class RecordedEvent(Envelope, frozen=True, kw_only=True):
    """An event as read back from the log, with the chain hash that seals it."""

    chain_hash: str = ""
    """Hex chain value after this event; not part of the hashed bytes."""
    text_state: TextState = "intact"
    """Whether the text read back is the one `content_hash` names (`TextState`)."""
