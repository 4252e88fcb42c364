"""What readers get back: memory entries and published facts."""

from __future__ import annotations

import msgspec

from eventlog import LegacyClaims


class MemoryEntry(msgspec.Struct, frozen=True, kw_only=True):
    """One visible memory entry. Its `id` is the log position of the event that wrote it."""

    id: int
    type: str
    content: str
    tags: list[str]
    created_at: float
    """Epoch seconds: the writing event's `ts_ns`, or an honoured import's claimed value."""
    importance: float = 1.0
    task_id: str | None = None
    source_agent: str = ""
    source_model: str = ""
    source_adapter: str | None = None
    position: int = 0
    content_hash: str = ""
    claims: LegacyClaims | None = None
    """For an imported entry: what the legacy row said about itself (its id, created_at,
    task, agent, model and adapter), shown as claims. The fields above say what readers and
    the trust policy go by (README, "Imports")."""
    unsigned_import: bool = False
    """An import no operator key signed: the fields above name its importer, its claims are
    only claims, and no trust policy trusts it (the reason `unsigned_import`)."""

    def __post_init__(self) -> None:
        if not self.position:
            msgspec.structs.force_setattr(self, "position", self.id)


class Fact(msgspec.Struct, frozen=True):
    """One published version of a fact, with its attribution."""

    tag: str
    key: str
    value: str
    scope: str
    producer_task_id: str
    ts_ns: int
    content_hash: str
    position: int = 0
    run_id: str | None = None
    source_adapter: str | None = None
