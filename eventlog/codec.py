"""The canonical encoding of events: one deterministic encoder, one typed decoder, and a
stored row read as an event (its text checked, or the row read as `Unreadable`)."""

from __future__ import annotations

import msgspec

from eventlog.backend import StoredRow
from eventlog.errors import CorruptLogError, UnknownEventKindError
from eventlog.events import (
    PAYLOAD_TYPES,
    Envelope,
    RecordedEvent,
    TextState,
    Unreadable,
    kind_of,
)
from eventlog.formats import V1, LogFormat
from eventlog.logs import get_logger

log = get_logger("factledger.eventlog")

_ENCODER = msgspec.json.Encoder(order="deterministic")
_DECODER = msgspec.json.Decoder(RecordedEvent)
_KNOWN_KINDS = frozenset(kind_of(t) for t in PAYLOAD_TYPES)
_UNREADABLE = kind_of(Unreadable)

CONTENT_HASH_PREFIX = "blake3:"
"""Format v1's `content_hash` prefix (v2's is `eventlog.formats.KEYED_PREFIX`)."""
CONTENT_MISMATCH = "content_mismatch"
"""The log event of a text that does not match its event's `content_hash`."""


def encode_envelope(envelope: Envelope) -> bytes:
    """Encode an envelope as canonical JSON: fields in declaration order, no whitespace."""
    return _ENCODER.encode(envelope)


def encode_body(envelope: Envelope, log_format: LogFormat) -> bytes:
    """The chained bytes of `envelope` in `log_format`: in v2, its payload's text field
    empty (the text is stored beside the body)."""
    return encode_envelope(without_text(envelope) if log_format.text_beside else envelope)


def without_text(envelope: Envelope) -> Envelope:
    """`envelope` with its payload's text field (if it has one) empty."""
    if envelope.payload.text_field is None:
        return envelope
    return msgspec.structs.replace(envelope, payload=envelope.payload.without_text())


def content_hash(data: bytes) -> str:
    """`blake3:` and the 64 lowercase hex digits of unkeyed BLAKE3 over `data` (format v1's
    content hash; a prompt receipt's `rendered_hash`)."""
    return V1.content_hash(data, None)


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
    if type(record.payload) is Unreadable:
        raise UnknownEventKindError(_UNREADABLE, position=position)
    msgspec.structs.force_setattr(record, "chain_hash", chain_hash)
    return record


def read_row(row: StoredRow, log_format: LogFormat) -> RecordedEvent:
    """The event a stored row holds, never raising: a row this version cannot decode (an
    unknown kind, a malformed or oversized body) is read as `Unreadable`; in v2 the text
    stored beside it is checked against `content_hash` and kept out unless it matches."""
    if row.leaf is not None or len(row.body) > log_format.max_body_bytes:
        return unreadable(row, f"its body is over the {log_format.max_body_bytes}-byte limit")
    try:
        record = decode_record(row.body, position=row.position, chain_hash=row.chain_hash.hex())
    except UnknownEventKindError as exc:
        return unreadable(row, str(exc), kind=exc.kind)
    except CorruptLogError as exc:
        return unreadable(row, str(exc))
    if not log_format.text_beside:
        return record
    return with_text(record, row.text, row.salt, log_format)


def with_text(
    record: RecordedEvent, text: bytes | None, salt: bytes | None, log_format: LogFormat
) -> RecordedEvent:
    """`record` (decoded from a v2 body) with its text field filled from the content table
    if `text` and `salt` match its `content_hash`; empty otherwise, with its `text_state`
    saying why (a mismatch is logged as `content_mismatch`, naming only the position)."""
    state: TextState = "intact"
    value = ""
    if salt is None:
        state = "absent"
    elif text is None or not log_format.text_matches(text, salt, record.content_hash):
        state = "mismatch"
    else:
        try:
            value = text.decode("utf-8")
        except UnicodeDecodeError:
            state = "mismatch"
    if state == "mismatch":
        log.error(CONTENT_MISMATCH, position=record.position)
    field = record.payload.text_field
    if field is not None:
        payload = msgspec.structs.replace(record.payload, **{field: value})
        msgspec.structs.force_setattr(record, "payload", payload)
    if state != "intact":
        msgspec.structs.force_setattr(record, "text_state", state)
    return record


def unreadable(row: StoredRow, reason: str, *, kind: str | None = None) -> RecordedEvent:
    """A row read as an `Unreadable` event: its position, event id and chain value, and
    the writer its body names, where it names one readably."""
    writer = _writer(row.body) if row.leaf is None else {}
    return RecordedEvent(
        position=row.position,
        event_id=row.event_id,
        ts_ns=0,
        producer_task_id=writer.get("producer_task_id") or "",
        run_id=writer.get("run_id"),
        source_adapter=writer.get("source_adapter"),
        content_hash="",
        payload=Unreadable(reason=reason, claimed_kind=kind),
        chain_hash=row.chain_hash.hex(),
        text_state="absent",
    )


class _Writer(msgspec.Struct, frozen=True):
    """Who a row says wrote it, read leniently from a body that is not a valid event."""

    producer_task_id: str | None = None
    run_id: str | None = None
    source_adapter: str | None = None


_WRITER = msgspec.json.Decoder(_Writer)


def _writer(body: bytes) -> dict[str, str | None]:
    """The writer fields a body names as printable ASCII of at most 128 characters."""
    try:
        found = _WRITER.decode(body)
    except msgspec.DecodeError:
        return {}
    return {
        name: value
        for name in _Writer.__struct_fields__
        if isinstance(value := getattr(found, name), str) and _printable_name(value)
    }


def _printable_name(value: str) -> bool:
    return 0 < len(value) <= 128 and value.isascii() and value.isprintable()


def _stored_kind(body: bytes) -> str | None:
    """Best-effort read of the kind a row claims, to name it in an error."""
    try:
        raw = msgspec.json.decode(body)
    except msgspec.DecodeError:
        return None
    if isinstance(raw, dict) and isinstance(raw.get("payload"), dict):
        kind = raw["payload"].get("kind")
        return kind if isinstance(kind, str) and _printable_name(kind) else None
    return None
