"""Which erasures took effect, judged from the log alone (for `verify`).

An absent text is lawful only where an erasure signed by an operator key registered at its
position names it. Whether a key was registered there depends only on the operator events
before it, so folding the log's operator and erasure events (a handful, which a verifying
walk notes as it goes) into an empty read model answers it by the very rule the knowledge
projector applies (`projections._operators`), without trusting the read model in the file.
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from eventlog import RecordedEvent
from eventlog.events import ContentErased
from eventlog.signing import authorization_of
from projections import _sql_knowledge as sql_knowledge
from projections._database import ScratchDatabase
from projections._knowledge import KnowledgeProjector


class ErasureVerdict(msgspec.Struct, frozen=True, kw_only=True):
    """An erasure in the log, and whether it took effect."""

    position: int
    key_id: str | None
    """The key that signed it (None: unsigned)."""
    reason: str
    positions: tuple[int, ...]
    """The positions it names."""
    authorized: bool
    refused: str | None = None
    """Why it took no effect (`projections._operators`), when it did not."""


def judge_erasures(log_id: str, records: Iterable[RecordedEvent]) -> list[ErasureVerdict]:
    """The erasures among `records` (the log's operator and erasure events, in position
    order), each judged as the knowledge projector judges it when folding the log."""
    kept = list(records)
    projector = KnowledgeProjector(log_id)
    with ScratchDatabase() as scratch:
        projector.create(scratch)
        projector.apply(scratch, kept)
        refused = {row.position: row.reason for row in sql_knowledge.UNAUTHORIZED_ALL.rows(scratch)}
    verdicts = []
    for record in kept:
        payload = record.payload
        if not isinstance(payload, ContentErased):
            continue
        signature = authorization_of(payload)
        verdicts.append(
            ErasureVerdict(
                position=record.position,
                key_id=None if signature is None else signature.key_id,
                reason=payload.reason,
                positions=tuple(p for p in payload.positions if p < record.position),
                authorized=record.position not in refused,
                refused=refused.get(record.position),
            )
        )
    return verdicts
