"""Witness cosignatures on a checkpoint (C2SP tlog-cosignature, Ed25519 type 0x04).

A witness that has checked a checkpoint's consistency with what it saw before adds a signature
line of its own to the note: `— <witness name> <base64(key hash || timestamp || signature)>`,
where the key hash is SHA-256(name || 0x0A || 0x04 || 32-byte key)[:4], the timestamp the
8-byte big-endian POSIX time of cosigning, and the Ed25519 signature is over

    cosignature/v1
    time <timestamp, decimal>
    <the checkpoint's four lines>

The witness's key is given as its C2SP verifier key: `<name>+<key hash>+<base64(0x04 || key)>`.
"""

from __future__ import annotations

import hmac

from eventlog import InvalidInputError, InvalidTypeError
from eventlog.signing import PUBLIC_KEY_SIZE, key_hash, strict_base64, verify
from replay.checkpoints import Checkpoint

COSIGNATURE_V1 = 0x04
"""C2SP's signature type for an Ed25519 tlog-cosignature/v1."""
TIMESTAMP_SIZE = 8
MAX_TIMESTAMP = 2**63 - 1


def cosigned_message(checkpoint: Checkpoint, timestamp: int) -> bytes:
    """The bytes a witness signs to cosign `checkpoint` at POSIX time `timestamp`."""
    if not 0 <= timestamp <= MAX_TIMESTAMP or isinstance(timestamp, bool):
        raise InvalidInputError(f"a cosignature's time must be 0 to {MAX_TIMESTAMP}")
    return f"cosignature/v1\ntime {timestamp}\n{checkpoint.body}".encode()


def cosignature_time(checkpoint: Checkpoint, witness: str) -> int | None:
    """When the witness whose verifier key is `witness` cosigned `checkpoint` (POSIX seconds),
    or None if no valid cosignature by it is there; a line naming that key that fails makes it
    None too. The operator's signature is never taken for a cosignature, nor one for it."""
    name, hashed, key = _witness_key(witness)
    times = []
    for line in checkpoint.signatures:
        if line.name != name or not hmac.compare_digest(line.key_hash, hashed):
            continue
        stamp, signature = line.signature[:TIMESTAMP_SIZE], line.signature[TIMESTAMP_SIZE:]
        timestamp = int.from_bytes(stamp, "big")
        if timestamp > MAX_TIMESTAMP or not verify(
            key, signature, cosigned_message(checkpoint, timestamp)
        ):
            return None
        times.append(timestamp)
    return max(times) if times else None


def _witness_key(witness: str) -> tuple[str, bytes, bytes]:
    """The name, key hash and raw key of a cosignature verifier key, or a clear error."""
    if not isinstance(witness, str):
        raise InvalidTypeError(f"a witness key must be str, not {type(witness).__name__}")
    name, _, rest = witness.strip().partition("+")
    digits, _, encoded = rest.partition("+")
    data = strict_base64(encoded)
    if data is None or len(data) != 1 + PUBLIC_KEY_SIZE or data[0] != COSIGNATURE_V1:
        raise InvalidInputError(
            "a witness key must read <name>+<key hash>+<base64 of 0x04 and a 32-byte Ed25519 key>"
        )
    hashed = key_hash(name, data[1:], signature_type=COSIGNATURE_V1)
    if not name or hashed.hex() != digits:
        raise InvalidInputError("the witness key's hash is not that of its name and key")
    return name, hashed, data[1:]
