"""From a draft to stored bytes: what every log backend does the same way, in the format
new logs are written in (`eventlog.formats.CURRENT`, v2).

A backend checks each draft (`prepare`: its text, and a fresh random salt that keys its
content hash), gives it the next position under its write lock, and `seal`s it: the
canonical body (without the text), the chain value after it, the text and salt stored
beside it, and the record. Decoding what is about to be stored guarantees nothing
undecodable is written.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from typing import NamedTuple

import msgspec

from eventlog.checks import (
    check_actor,
    check_content,
    check_identifier,
    check_optional_actor,
    check_ts_ns,
)
from eventlog.codec import decode_record, encode_body
from eventlog.errors import CorruptLogError, InvalidInputError, InvalidTypeError
from eventlog.events import GENERATED_ID_PREFIX, Envelope, NewEvent, Payload, RecordedEvent
from eventlog.formats import CURRENT, MAX_ENVELOPE_BYTES, SALT_BYTES


class Prepared(msgspec.Struct, frozen=True):
    """A checked draft, ready to be given a position."""

    event: NewEvent
    event_id: str
    caller_event_id: bool
    ts_ns: int
    content_hash: str
    text: bytes
    """The UTF-8 text the event writes, stored beside its body."""
    salt: bytes
    """Random bytes drawn for this event alone, keying its content hash."""


class Sealed(NamedTuple):
    """A prepared event at its position: what a backend stores, and the record it reads as."""

    body: bytes
    chain_hash: bytes
    text: bytes
    salt: bytes
    record: RecordedEvent
    leaf: bytes
    """The body's leaf hash, linked after the chain value before it into `chain_hash`."""


def new_event_id() -> str:
    """A random event id laid out like a UUIDv7: a millisecond timestamp, then 80 random bits.

    Ids of events appended close in time sort close together, and the reserved prefix keeps
    them apart from every id a caller can give.
    """
    return f"{GENERATED_ID_PREFIX}{time.time_ns() // 1_000_000:012x}{os.urandom(10).hex()}"


def prepare(event: object, *, clock_ns: Callable[[], int], max_content_bytes: int) -> Prepared:
    """Check a draft and fix its id, timestamp and content hash (no storage touched)."""
    if not isinstance(event, NewEvent):
        raise InvalidTypeError(f"expected a NewEvent, got {type(event).__name__}")
    if not isinstance(event.payload, Payload):
        raise InvalidTypeError(
            f"payload must be an event payload, not {type(event.payload).__name__}"
        )
    check_actor("producer_task_id", event.producer_task_id, allow_empty=True)
    check_optional_actor("run_id", event.run_id)
    check_optional_actor("source_adapter", event.source_adapter)
    data = check_content(
        f"{event.payload.kind} content", event.payload.written_text(), max_bytes=max_content_bytes
    )
    if event.event_id is None:
        event_id, caller_id = new_event_id(), False
    else:
        event_id, caller_id = check_identifier("event_id", event.event_id), True
        if event_id.startswith(GENERATED_ID_PREFIX):
            raise InvalidInputError(
                f"event ids starting with {GENERATED_ID_PREFIX!r} are reserved for ids the "
                "log generates"
            )
    ts_ns = check_ts_ns(clock_ns() if event.ts_ns is None else event.ts_ns)
    salt = os.urandom(SALT_BYTES) if event.salt is None else event.salt
    if not isinstance(salt, bytes) or len(salt) != SALT_BYTES:
        raise InvalidInputError(f"salt must be {SALT_BYTES} bytes")
    return Prepared(event, event_id, caller_id, ts_ns, CURRENT.content_hash(data, salt), data, salt)


def check_distinct_ids(prepared: Sequence[Prepared]) -> None:
    """Refuse a batch that gives the same event id twice."""
    given = [p.event_id for p in prepared if p.caller_event_id]
    if len(given) != len(set(given)):
        raise InvalidInputError("the same event_id appears twice in one append")


def seal(item: Prepared, position: int, previous: bytes) -> Sealed:
    """`item` at `position`, after the chain value `previous`."""
    body = _encode_checked(item, position)
    scheme = CURRENT.chain
    leaf = scheme.leaf_hash(body)
    chain_value = scheme.link(previous, leaf)
    try:
        record = decode_record(body, position=position, chain_hash=chain_value.hex())
    except CorruptLogError as exc:
        raise InvalidInputError(f"event does not match its schema: {exc}") from None
    field = record.payload.text_field
    if field is not None:
        payload = msgspec.structs.replace(
            record.payload, **{field: item.event.payload.written_text()}
        )
        msgspec.structs.force_setattr(record, "payload", payload)
    return Sealed(body, chain_value, item.text, item.salt, record, leaf)


def same_event(record: RecordedEvent, draft: NewEvent) -> bool:
    """Whether a retry's draft is the event already recorded under its id."""
    return (
        record.payload == draft.payload
        and record.producer_task_id == draft.producer_task_id
        and record.run_id == draft.run_id
        and record.source_adapter == draft.source_adapter
    )


def _encode_checked(item: Prepared, position: int) -> bytes:
    """Encode an event at `position`, refusing anything too large or unencodable."""
    draft = item.event
    envelope = Envelope(
        position=position,
        event_id=item.event_id,
        ts_ns=item.ts_ns,
        producer_task_id=draft.producer_task_id,
        run_id=draft.run_id,
        source_adapter=draft.source_adapter,
        content_hash=item.content_hash,
        payload=draft.payload,
    )
    try:
        body = encode_body(envelope, CURRENT)
    except (msgspec.EncodeError, TypeError, ValueError, UnicodeError) as exc:
        raise InvalidInputError(f"{draft.payload.kind} event cannot be encoded: {exc}") from None
    if len(body) > MAX_ENVELOPE_BYTES:
        raise InvalidInputError(
            f"{draft.payload.kind} event is {len(body)} bytes encoded without its text; "
            f"the limit is {MAX_ENVELOPE_BYTES}"
        )
    return body
