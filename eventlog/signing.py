"""What an operator signs, and how a signature is checked (Ed25519, RFC 8032, via pyca
cryptography). README, "Operators and signing", is the specification:

    statement = UTF-8("factledger operator action v2\\n")
                || canonical JSON of {"log_id", "event_id", "producer_task_id", "run_id",
                                      "source_adapter", "content_hash", "payload"}
    key hash  = SHA-256(UTF-8(key name) || 0x0A || 0x01 || 32-byte public key)[:4]

The payload is encoded as a format v2 body holds it: without its `authorization`, its text
field empty. The text is bound through the salted `content_hash` instead, so removing the text
and its salt later leaves every signature valid. A format v1 event (whose `content_hash` is
unkeyed) was signed under `factledger operator action v1\\n`, the statement without
`content_hash`, its payload with the text. The canonical JSON is the log's own (msgspec:
members in declaration order, no whitespace, UTF-8). The key hash is C2SP signed-note's, and
its 8 hex digits are the key's id.
"""

from __future__ import annotations

import base64
import binascii
import hashlib

import msgspec
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from eventlog.events import Authorization, LegacyClaims, Payload, RecordedPayload
from eventlog.formats import KEYED_PREFIX

STATEMENT_PREFIX = b"factledger operator action v2\n"
"""Domain separation: no checkpoint note or other signed text starts with this line."""
V1_STATEMENT_PREFIX = b"factledger operator action v1\n"
"""What a format v1 event's signature covers first (read, never written)."""
ED25519 = 0x01
"""C2SP signed-note's signature type for Ed25519."""
PUBLIC_KEY_SIZE = 32
SIGNATURE_SIZE = 64

_ENCODER = msgspec.json.Encoder(order="deterministic")


class _V1Statement(msgspec.Struct, frozen=True, kw_only=True):
    log_id: str
    event_id: str
    producer_task_id: str
    run_id: str | None
    source_adapter: str | None
    payload: RecordedPayload


class _Statement(msgspec.Struct, frozen=True, kw_only=True):
    log_id: str
    event_id: str
    producer_task_id: str
    run_id: str | None
    source_adapter: str | None
    content_hash: str
    payload: RecordedPayload


def authorization_of(payload: Payload) -> Authorization | None:
    """The signature an operator action carries, if any."""
    found = getattr(payload, "authorization", None)
    return found if isinstance(found, Authorization) else None


def claims_of(payload: Payload) -> LegacyClaims | None:
    """The legacy row's claims an import carries; None for any other event."""
    found = getattr(payload, "claims", None)
    return found if isinstance(found, LegacyClaims) else None


def is_unsigned_import(payload: Payload) -> bool:
    """Whether `payload` is an import (it holds claims) that carries no operator signature:
    in no log do its claims count for anything."""
    return claims_of(payload) is not None and authorization_of(payload) is None


def action_statement(
    *,
    log_id: str,
    event_id: str,
    producer_task_id: str,
    run_id: str | None,
    source_adapter: str | None,
    content_hash: str,
    payload: RecordedPayload,
) -> bytes:
    """The bytes an operator signs for an action: binds the log, the event id (which the log
    stores once), the acting producer, run and adapter, the salted content hash and the
    payload without its text. For a v1 event (`content_hash` unkeyed): the payload with its
    text, as format v1 signed it."""
    if not content_hash.startswith(KEYED_PREFIX):
        legacy = _V1Statement(
            log_id=log_id,
            event_id=event_id,
            producer_task_id=producer_task_id,
            run_id=run_id,
            source_adapter=source_adapter,
            payload=_unsigned(payload),
        )
        return V1_STATEMENT_PREFIX + _ENCODER.encode(legacy)
    statement = _Statement(
        log_id=log_id,
        event_id=event_id,
        producer_task_id=producer_task_id,
        run_id=run_id,
        source_adapter=source_adapter,
        content_hash=content_hash,
        payload=_unsigned(payload).without_text(),
    )
    return STATEMENT_PREFIX + _ENCODER.encode(statement)


def _unsigned(payload: RecordedPayload) -> RecordedPayload:
    if "authorization" not in payload.__struct_fields__:
        return payload
    return msgspec.structs.replace(payload, authorization=msgspec.UNSET)


def key_hash(name: str, public_key: bytes, *, signature_type: int = ED25519) -> bytes:
    """C2SP signed-note's 4-byte hash of a key named `name` whose signatures are of
    `signature_type` (Ed25519 by default; a witness's cosignatures are type 0x04)."""
    prefix = name.encode("utf-8") + b"\n" + bytes([signature_type])
    return hashlib.sha256(prefix + public_key).digest()[:4]


def key_id(name: str, public_key: bytes) -> str:
    """A key's id: its key hash in 8 lowercase hex digits."""
    return key_hash(name, public_key).hex()


def strict_base64(text: str) -> bytes | None:
    """`text` decoded as canonical, padded standard base64, or None."""
    try:
        value = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None
    return value if base64.b64encode(value).decode("ascii") == text else None


def verify(public_key: bytes, signature: bytes, message: bytes) -> bool:
    """Whether `signature` is a valid Ed25519 signature of `message` by `public_key`."""
    if len(public_key) != PUBLIC_KEY_SIZE or len(signature) != SIGNATURE_SIZE:
        return False
    try:
        Ed25519PublicKey.from_public_bytes(public_key).verify(signature, message)
    except (InvalidSignature, ValueError):
        return False
    return True
