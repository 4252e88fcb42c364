"""What the audit views show of a write whose text an operator erased: never a text, but
the erasure that removed it (its position, the key that signed it, and its reason, read
from the erasure event in the log).

Which writes are erased is read from the read model at the log's head, so a view of a past
state (folded before the erasure, when its text was already gone from the log) shows them as
erased too.
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from eventlog import CorruptLogError, LogSnapshot
from eventlog.events import ContentErased
from eventlog.signing import authorization_of
from projections.internal import Queryable, inquiries


class ErasedBy(msgspec.Struct, frozen=True, kw_only=True):
    """The erasure that removed a write's text."""

    erasure_position: int
    key_id: str | None
    """The operator key that signed it."""
    reason: str
    ts_ns: int


def erased_by(snap: LogSnapshot, model: Queryable, positions: Iterable[int]) -> dict[int, ErasedBy]:
    """The writes among `positions` whose text an authorized erasure removed, each with that
    erasure (`model` is the read model at the head of `snap`)."""
    found = inquiries.erased_among(model, sorted(set(positions)))
    erasures = {p: _erasure(snap, p) for p in set(found.values())}
    return {position: erasures[erasure] for position, erasure in found.items()}


def _erasure(snap: LogSnapshot, position: int) -> ErasedBy:
    record = snap.event_at(position)
    payload = record.payload
    if not isinstance(payload, ContentErased):  # an edited read model: refuse to guess
        raise CorruptLogError(
            f"the read model names position {position} as an erasure, but it holds a "
            f"{record.kind} event: rebuild the read model (factledger rebuild)",
            position=position,
        )
    signature = authorization_of(payload)
    return ErasedBy(
        erasure_position=position,
        key_id=None if signature is None else signature.key_id,
        reason=payload.reason,
        ts_ns=record.ts_ns,
    )
