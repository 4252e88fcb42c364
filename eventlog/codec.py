"""The canonical encoding of events: one deterministic encoder, one typed decoder."""

from __future__ import annotations

import blake3
import msgspec

from eventlog.errors import CorruptLogError, UnknownEventKindError
from eventlog.events import PAYLOAD_TYPES, Envelope, RecordedEvent, kind_of

_ENCODER = msgspec.json.Encoder(order="deterministic")
_DECODER = msgspec.json.Decoder(RecordedEvent)
_KNOWN_KINDS = frozenset(kind_of(t) for t in PAYLOAD_TYPES)

CONTENT_HASH_PREFIX = "blake3:"


def encode_envelope(envelope: Envelope) -> bytes:
    """Encode an envelope as canonical JSON: fields in declaration order, no whitespace."""
    return _ENCODER.encode(envelope)


def content_hash(data: bytes) -> str:
    """`blake3:` and the 64 lowercase hex digits of BLAKE3 over `data` (UTF-8 text)."""
    return CONTENT_HASH_PREFIX + blake3.blake3(data).hexdigest()


def decode_record(body: bytes, *, position: int, chain_hash: str) -> RecordedEvent:
    """Decode stored bytes into a typed event, naming the position of anything undecodable."""
    try:
        record = _DECODER.decode(body)
    except msgspec.DecodeError as exc:
        kind = _stored_kind(body)
        if kind is not None and kind not in _KNOWN_KINDS:
            raise UnknownEventKindError(kind, position=position) from None
        raise CorruptLogError(
            f"row at position {position} is not a valid event: {exc}", position=position
        ) from None
    msgspec.structs.force_setattr(record, "chain_hash", chain_hash)
    return record


def _stored_kind(body: bytes) -> str | None:
    """Best-effort read of the kind a row claims, to name it in an error."""
    try:
        raw = msgspec.json.decode(body)
    except msgspec.DecodeError:
        return None
    if isinstance(raw, dict) and isinstance(raw.get("payload"), dict):
        kind = raw["payload"].get("kind")
        return kind if isinstance(kind, str) else None
    return None
