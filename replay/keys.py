"""Operator keys: Ed25519 key pairs in the text formats of C2SP signed-note (and Go's
golang.org/x/mod/sumdb/note), one line each:

    FILE      PRIVATE+KEY+<name>+<key hash>+<base64(0x01 || 32-byte private key seed)>
    FILE.pub  <name>+<key hash>+<base64(0x01 || 32-byte public key)>

The key hash (8 hex digits, `eventlog.signing.key_hash`) is the key's id. A name is 1 to 128
ASCII letters, digits and `._:-/@`. A private key file must be a regular file no group or
other user may access; an error about a key file never quotes what the file holds.
"""

from __future__ import annotations

import base64
import os
from pathlib import Path

import msgspec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from eventlog import InvalidInputError, InvalidTypeError, StorageError
from eventlog.checks import check_actor, check_path
from eventlog.signing import ED25519, PUBLIC_KEY_SIZE, key_id, strict_base64, verify
from replay.errors import KeyFileError, NotRegularFileError
from replay.regular_files import read_regular

PRIVATE_PREFIX = "PRIVATE+KEY+"
PUBLIC_SUFFIX = ".pub"
MAX_KEY_FILE_BYTES = 4096
_HASH_DIGITS = frozenset("0123456789abcdef")


class PublicKey(msgspec.Struct, frozen=True, kw_only=True):
    """An operator's public key: what the log registers and what checks a signature."""

    name: str
    key_id: str
    raw: bytes
    """The 32-byte Ed25519 public key."""

    @property
    def verifier_key(self) -> str:
        """The key's one-line text form (`<name>+<key hash>+<base64>`), as in FILE.pub."""
        return f"{self.name}+{self.key_id}+{_b64(bytes([ED25519]) + self.raw)}"

    def verify(self, signature: bytes, message: bytes) -> bool:
        """Whether `signature` is this key's Ed25519 signature of `message`."""
        return verify(self.raw, signature, message)


class OperatorKey:
    """An operator's private key, read from its file: it signs, and shows only its public half."""

    __slots__ = ("_private", "public")

    def __init__(self, name: str, seed: bytes) -> None:
        self._private = Ed25519PrivateKey.from_private_bytes(seed)
        raw = self._private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        self.public = PublicKey(name=name, key_id=key_id(name, raw), raw=raw)

    @property
    def name(self) -> str:
        """The key's name."""
        return self.public.name

    @property
    def key_id(self) -> str:
        """The key's id: its key hash in hex."""
        return self.public.key_id

    def sign(self, message: bytes) -> bytes:
        """The 64-byte Ed25519 signature of `message`."""
        return self._private.sign(message)

    def __repr__(self) -> str:
        return f"OperatorKey(name={self.name!r}, key_id={self.key_id!r})"


KeySource = OperatorKey | str | os.PathLike[str]
"""An operator key, or the path of its private key file."""


def generate_key(path: str | os.PathLike[str], *, name: str | None = None) -> Path:
    """Create a new operator key pair: the private key in `path` (mode 0600) and the public key
    in `path` + `.pub`; return the public key's path. Never overwrites a file: an existing
    `path` or `path.pub` is refused. `name` defaults to the file's name without its suffix."""
    target = Path(check_path(path))
    public_path = target.with_name(target.name + PUBLIC_SUFFIX)
    chosen = target.stem if name is None else name
    try:
        check_actor("key name", chosen)
    except (InvalidInputError, InvalidTypeError) as exc:
        hint = " (give one with name=, or --name)" if name is None else ""
        raise type(exc)(f"{exc}{hint}") from None
    seed = Ed25519PrivateKey.generate().private_bytes_raw()
    key = OperatorKey(chosen, seed)
    _create(target, f"{PRIVATE_PREFIX}{chosen}+{key.key_id}+{_b64(bytes([ED25519]) + seed)}\n")
    try:
        _create(public_path, key.public.verifier_key + "\n", mode=0o644)
    except BaseException:
        target.unlink(missing_ok=True)
        raise
    return public_path


def read_operator_key(path: str | os.PathLike[str]) -> OperatorKey:
    """The private key in the file at `path`."""
    where = check_path(path)
    text, mode = _read(where)
    if not text.startswith(PRIVATE_PREFIX):
        _fields(where, text)
        raise KeyFileError(
            f"{where} holds a public key; an operator key is the private key file "
            f"(the one without {PUBLIC_SUFFIX})"
        )
    if mode & 0o077:
        raise KeyFileError(
            f"key file {where} has mode {mode:04o}: group or others may read or write it; "
            "chmod 600 it (or make a new key) first"
        )
    name, hash_text, seed = _fields(where, text[len(PRIVATE_PREFIX) :])
    key = OperatorKey(name, seed)
    if key.key_id != hash_text:
        raise KeyFileError(f"{where}: the key hash does not match the key (a damaged file?)")
    return key


def read_public_key(path: str | os.PathLike[str]) -> PublicKey:
    """The public key in the file at `path` (a `.pub` file)."""
    where = check_path(path)
    text, _ = _read(where)
    if text.startswith(PRIVATE_PREFIX):
        raise KeyFileError(
            f"{where} holds a private key, which must never be shared or stored in the log; "
            f"give its public key file ({where}{PUBLIC_SUFFIX})"
        )
    name, hash_text, raw = _fields(where, text)
    public = PublicKey(name=name, key_id=key_id(name, raw), raw=raw)
    if public.key_id != hash_text:
        raise KeyFileError(f"{where}: the key hash does not match the key (a damaged file?)")
    return public


def operator_key(source: object) -> OperatorKey:
    """An operator key given as itself or as the path of its file."""
    if isinstance(source, OperatorKey):
        return source
    if not isinstance(source, (str, os.PathLike)):
        raise InvalidTypeError(
            f"key must be an OperatorKey or a key file path, not {type(source).__name__}"
        )
    return read_operator_key(source)


def _fields(where: str, text: str) -> tuple[str, str, bytes]:
    """(name, key hash, 32 key bytes) from `<name>+<hash>+<base64(0x01 || key)>`."""
    parts = text.split("+", 2)
    if len(parts) != 3:
        raise KeyFileError(f"{where} is not a factledger key file")
    name, hash_text, encoded = parts
    try:
        check_actor("key name", name)
    except (InvalidInputError, InvalidTypeError) as exc:
        raise KeyFileError(f"{where}: {exc}") from None
    if len(hash_text) != 8 or not _HASH_DIGITS.issuperset(hash_text):
        raise KeyFileError(f"{where}: the key hash must be 8 lowercase hex digits")
    data = strict_base64(encoded)
    if data is None or len(data) != 1 + PUBLIC_KEY_SIZE:
        raise KeyFileError(f"{where}: the key is not 33 bytes of base64")
    if data[0] != ED25519:
        raise KeyFileError(f"{where} holds a key of type {data[0]}, not Ed25519 (1)")
    return name, hash_text, data[1:]


def _read(where: str) -> tuple[str, int]:
    """The one line of a key file, checked to be a small regular text file (never waiting on a
    pipe), and its mode."""
    try:
        data, mode = read_regular(where, max_bytes=MAX_KEY_FILE_BYTES)
    except FileNotFoundError:
        raise KeyFileError(f"no key file at {where}") from None
    except NotRegularFileError as exc:
        raise KeyFileError(f"key file {where} is {exc.kind}, not a regular file") from None
    except OSError as exc:
        raise KeyFileError(f"cannot read key file {where}: {exc.strerror or exc}") from None
    if len(data) > MAX_KEY_FILE_BYTES:
        raise KeyFileError(f"{where} is too large to be a key file")
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError:
        raise KeyFileError(
            f"{where} is not a factledger key file (it is not text; a 32-byte key from an "
            "earlier version signs nothing now: make a key pair with factledger keygen)"
        ) from None
    line = text.removesuffix("\n")
    if not line or any(c.isspace() or not c.isprintable() for c in line):
        raise KeyFileError(f"{where} is not a factledger key file (expected one line)")
    return line, mode


def _create(path: Path, text: str, *, mode: int = 0o600) -> None:
    """Write `text` to a new file at `path`; refuse an existing file (or a link in its place)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    except FileExistsError:
        raise InvalidInputError(f"{path} already exists; refusing to overwrite a key") from None
    except OSError as exc:
        raise StorageError(f"cannot create key file {path}: {exc.strerror or exc}") from None
    data = text.encode("ascii")
    try:
        os.fchmod(fd, mode)
        written = os.write(fd, data)
        os.fsync(fd)
    except OSError as exc:
        os.close(fd)
        path.unlink(missing_ok=True)
        raise StorageError(f"cannot write key file {path}: {exc.strerror or exc}") from None
    os.close(fd)
    if written != len(data):
        path.unlink(missing_ok=True)
        raise StorageError(f"cannot write key file {path}: short write")


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")
