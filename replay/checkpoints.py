"""Checkpoints: a log's size, chain hash and Merkle root, kept outside the database.

The text form is a C2SP tlog-checkpoint note (every line ends with a newline):

    factledger/v2/<log id>          (a format-v1 log's: factledger/<log id>)
    <size: decimal, no leading zeros>
    <base64 of the RFC 6962 Merkle root over leaves 1..size>
    chain <hex chain hash at position size>

A checkpoint signed with operator keys is a C2SP signed note: those four lines, a blank line,
and one line per signature, `— <key name> <base64(4-byte key hash || Ed25519 signature)>`,
each signature over the four lines, newlines included. The public key file alone checks it.
The origin names the log's format, so a checkpoint alone says how its tree is hashed: SHA-256
as RFC 6962 writes it (v2), or BLAKE3 (v1).
"""

from __future__ import annotations

import base64
import os
import re

import msgspec

from eventlog import InvalidInputError, InvalidTypeError
from eventlog.chain import HASH_SIZE, ChainScheme
from eventlog.checks import check_identifier, check_position
from eventlog.formats import CURRENT, V1, V2, LogFormat
from eventlog.signing import strict_base64
from replay.errors import UnsignedCheckpointError
from replay.keys import KeySource, PublicKey, operator_key, read_public_key

ORIGIN_PREFIX = "factledger/"
FORMAT_ORIGINS = {V2.version: "v2/", V1.version: ""}
"""What follows `ORIGIN_PREFIX` before the log id, by the log's format."""
_FORMATS = {V1.version: V1, V2.version: V2}
CHAIN_PREFIX = "chain "
SIGNATURE_PREFIX = "\N{EM DASH} "
MAX_SIGNATURES = 100
MAX_SIZE = 2**63 - 1

_SIZE = re.compile(r"0|[1-9][0-9]{0,18}")
_HEX = re.compile(r"[0-9a-f]{64}")


class NoteSignature(msgspec.Struct, frozen=True, kw_only=True):
    """One signature line of a signed note: the key's name and 4-byte hash, and the signature
    (64 bytes for Ed25519; other kinds are kept and ignored)."""

    name: str
    key_hash: bytes
    signature: bytes

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _note_name(self.name):
            raise InvalidInputError(
                "a signature's key name must be non-empty, printable, without spaces or '+'"
            )
        if not isinstance(self.key_hash, bytes) or len(self.key_hash) != 4:
            raise InvalidInputError("a signature's key hash must be 4 bytes")
        if not isinstance(self.signature, bytes) or not self.signature:
            raise InvalidInputError("a signature must not be empty")

    def __str__(self) -> str:
        blob = base64.b64encode(self.key_hash + self.signature).decode("ascii")
        return f"{SIGNATURE_PREFIX}{self.name} {blob}\n"


class Checkpoint(msgspec.Struct, frozen=True, kw_only=True):
    """A log's state at one size: what a later `verify` holds the log to."""

    log_id: str
    size: int
    root: bytes
    """RFC 6962 Merkle root over the leaf hashes of positions 1..size."""
    chain_hash: str
    """Hex chain value after position `size` (the genesis when the size is 0)."""
    signatures: tuple[NoteSignature, ...] = ()
    """Signed-note signatures over `body`, in the order of their lines."""
    format: int = CURRENT.version
    """The log's format (`eventlog.formats`), named by the origin line: it fixes the hash."""

    def __post_init__(self) -> None:
        check_identifier("log_id", self.log_id)
        if self.format not in _FORMATS or isinstance(self.format, bool):
            raise InvalidInputError(f"format must be one of {sorted(_FORMATS)}")
        check_position("size", self.size)
        if self.size > MAX_SIZE:
            raise InvalidInputError(f"size {self.size} does not fit in 63 bits")
        _check_digest("root", self.root)
        if not isinstance(self.chain_hash, str):
            raise InvalidTypeError(f"chain_hash must be str, not {type(self.chain_hash).__name__}")
        if not _HEX.fullmatch(self.chain_hash):
            raise InvalidInputError("chain_hash must be 64 lowercase hex digits")
        if not isinstance(self.signatures, tuple) or not all(
            isinstance(s, NoteSignature) for s in self.signatures
        ):
            raise InvalidTypeError("signatures must be a tuple of NoteSignature")
        if len(self.signatures) > MAX_SIGNATURES:
            raise InvalidInputError(f"a checkpoint holds at most {MAX_SIGNATURES} signatures")

    @property
    def log_format(self) -> LogFormat:
        """The format of the log this checkpoint was taken of."""
        return _FORMATS[self.format]

    @property
    def scheme(self) -> ChainScheme:
        """How this checkpoint's tree and chain are hashed."""
        return self.log_format.chain

    @property
    def origin(self) -> str:
        """The first line: `factledger/`, the format's part, and the log id."""
        return f"{ORIGIN_PREFIX}{FORMAT_ORIGINS[self.format]}{self.log_id}"

    @property
    def body(self) -> str:
        """The four lines every signature covers."""
        root = base64.b64encode(self.root).decode("ascii")
        return f"{self.origin}\n{self.size}\n{root}\n{CHAIN_PREFIX}{self.chain_hash}\n"

    def __str__(self) -> str:
        if not self.signatures:
            return self.body
        return self.body + "\n" + "".join(str(signature) for signature in self.signatures)

    @classmethod
    def parse(cls, text: str) -> Checkpoint:
        """Read a checkpoint's text form back, refusing anything not exactly in that form."""
        if not isinstance(text, str):
            raise InvalidTypeError(f"checkpoint text must be str, not {type(text).__name__}")
        if not text.endswith("\n"):
            raise InvalidInputError("checkpoint text must end with a newline")
        lines = text[:-1].split("\n")
        if len(lines) != 4 and (len(lines) < 6 or lines[4]):
            raise InvalidInputError(
                f"checkpoint text has {len(lines)} lines; expected 4, or 4, an empty line and "
                "signature lines"
            )
        origin, size, root, chain_line = lines[:4]
        if not origin.startswith(ORIGIN_PREFIX):
            raise InvalidInputError(f"checkpoint line 1 must start with {ORIGIN_PREFIX!r}")
        if not _SIZE.fullmatch(size):
            raise InvalidInputError(
                "checkpoint line 2 must be the size in decimal digits without leading zeros"
            )
        if not chain_line.startswith(CHAIN_PREFIX) or not _HEX.fullmatch(
            chain_line[len(CHAIN_PREFIX) :]
        ):
            raise InvalidInputError(
                f"checkpoint line 4 must be {CHAIN_PREFIX!r} and 64 lowercase hex digits"
            )
        signatures = tuple(
            _signature(number, line) for number, line in enumerate(lines[5:], start=6)
        )
        root_hash = _base64_digest("line 3 (the root)", root)
        named = origin[len(ORIGIN_PREFIX) :]
        version = V2.version if named.startswith(FORMAT_ORIGINS[V2.version]) else V1.version
        try:
            return cls(
                format=version,
                log_id=named.removeprefix(FORMAT_ORIGINS[version]),
                size=int(size),
                root=root_hash,
                chain_hash=chain_line[len(CHAIN_PREFIX) :],
                signatures=signatures,
            )
        except InvalidInputError as exc:
            raise InvalidInputError(f"checkpoint line 1 names no valid log id: {exc}") from None

    def sign(self, key: KeySource) -> Checkpoint:
        """This checkpoint with a signature by the operator key `key` (or its file) added,
        in place of an earlier one by the same key."""
        signer = operator_key(key)
        line = NoteSignature(
            name=signer.name,
            key_hash=bytes.fromhex(signer.key_id),
            signature=signer.sign(self.body.encode("utf-8")),
        )
        kept = tuple(s for s in self.signatures if not _by(s, signer.public))
        return msgspec.structs.replace(self, signatures=(*kept, line))

    def verify_signature(self, public_key: str | os.PathLike[str] | PublicKey) -> bool:
        """Whether this checkpoint is signed by `public_key` (or the key in that `.pub` file):
        False when no signature names that key, or one that does fails (C2SP: a failing
        signature by a known key rejects the note). Raises `UnsignedCheckpointError` when the
        checkpoint carries no signature at all."""
        key = public_key if isinstance(public_key, PublicKey) else read_public_key(public_key)
        if not self.signatures:
            raise UnsignedCheckpointError(
                "the checkpoint carries no signature, so it cannot be checked against a key "
                "(take it with --key, or key=, to sign it)"
            )
        matching = [s for s in self.signatures if _by(s, key)]
        message = self.body.encode("utf-8")
        return bool(matching) and all(key.verify(s.signature, message) for s in matching)


def _by(signature: NoteSignature, key: PublicKey) -> bool:
    return signature.name == key.name and signature.key_hash.hex() == key.key_id


def _note_name(name: str) -> bool:
    return bool(name) and name.isprintable() and "+" not in name and " " not in name


def _signature(number: int, line: str) -> NoteSignature:
    """A signature line: `— <name> <base64(key hash || signature)>`."""
    rest = line.removeprefix(SIGNATURE_PREFIX)
    name, _, blob = rest.partition(" ")
    data = strict_base64(blob)
    if rest == line or data is None or len(data) < 5 or not _note_name(name):
        raise InvalidInputError(
            f"checkpoint line {number} must be a signature line: {SIGNATURE_PREFIX!r}, a key "
            "name, a space and base64 of the key hash and signature"
        )
    return NoteSignature(name=name, key_hash=data[:4], signature=data[4:])


def _check_digest(name: str, value: object) -> None:
    if not isinstance(value, bytes):
        raise InvalidTypeError(f"{name} must be bytes, not {type(value).__name__}")
    if len(value) != HASH_SIZE:
        raise InvalidInputError(f"{name} must be {HASH_SIZE} bytes, not {len(value)}")


def _base64_digest(where: str, text: str) -> bytes:
    """A 32-byte value in canonical, padded standard base64."""
    value = strict_base64(text)
    if value is None:
        raise InvalidInputError(f"checkpoint {where} is not valid base64")
    if len(value) != HASH_SIZE:
        raise InvalidInputError(f"checkpoint {where} must be {HASH_SIZE} bytes in base64")
    return value
