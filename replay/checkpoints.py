"""Checkpoints: a log's size, chain hash and Merkle root, kept outside the database.

The text form, in the spirit of C2SP tlog-checkpoint (every line ends with a newline):

    factledger/<log id>
    <size: decimal, no leading zeros>
    <base64 of the RFC 6962 Merkle root over leaves 1..size>
    chain <hex chain hash at position size>

A checkpoint signed with an operator key adds a blank line and a MAC line,
`— factledger-mac <base64 MAC>`, the MAC being BLAKE3 in keyed mode (the 32-byte key) over
the four lines above, newlines included.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import os
import re
import secrets
import stat
from contextlib import closing
from pathlib import Path

import blake3
import msgspec

from eventlog import InvalidInputError, InvalidTypeError, StorageError, open_log
from eventlog.chain import HASH_SIZE
from eventlog.checks import check_identifier, check_path, check_position
from replay.merkle_index import MerkleIndex

ORIGIN_PREFIX = "factledger/"
CHAIN_PREFIX = "chain "
MAC_PREFIX = "\N{EM DASH} factledger-mac "
KEY_SIZE = 32
MAX_SIZE = 2**63 - 1

KeySource = bytes | str | os.PathLike[str]
"""An operator key: its 32 bytes, or the path of the file that holds them."""

_SIZE = re.compile(r"0|[1-9][0-9]{0,18}")
_HEX = re.compile(r"[0-9a-f]{64}")


class Checkpoint(msgspec.Struct, frozen=True, kw_only=True):
    """A log's state at one size: what a later `verify` holds the log to."""

    log_id: str
    size: int
    root: bytes
    """RFC 6962 Merkle root over the leaf hashes of positions 1..size."""
    chain_hash: str
    """Hex chain value after position `size` (the genesis when the size is 0)."""
    mac: bytes | None = None
    """BLAKE3 keyed MAC of `body` under the operator key, if signed."""

    def __post_init__(self) -> None:
        check_identifier("log_id", self.log_id)
        check_position("size", self.size)
        if self.size > MAX_SIZE:
            raise InvalidInputError(f"size {self.size} does not fit in 63 bits")
        _check_digest("root", self.root)
        if not isinstance(self.chain_hash, str):
            raise InvalidTypeError(f"chain_hash must be str, not {type(self.chain_hash).__name__}")
        if not _HEX.fullmatch(self.chain_hash):
            raise InvalidInputError("chain_hash must be 64 lowercase hex digits")
        if self.mac is not None:
            _check_digest("mac", self.mac)

    @property
    def body(self) -> str:
        """The four lines the MAC covers."""
        root = base64.b64encode(self.root).decode("ascii")
        return (
            f"{ORIGIN_PREFIX}{self.log_id}\n{self.size}\n{root}\n{CHAIN_PREFIX}{self.chain_hash}\n"
        )

    def __str__(self) -> str:
        if self.mac is None:
            return self.body
        return f"{self.body}\n{MAC_PREFIX}{base64.b64encode(self.mac).decode('ascii')}\n"

    @classmethod
    def parse(cls, text: str) -> Checkpoint:
        """Read a checkpoint's text form back, refusing anything not exactly in that form."""
        if not isinstance(text, str):
            raise InvalidTypeError(f"checkpoint text must be str, not {type(text).__name__}")
        if not text.endswith("\n"):
            raise InvalidInputError("checkpoint text must end with a newline")
        lines = text[:-1].split("\n")
        if len(lines) not in (4, 6):
            raise InvalidInputError(
                f"checkpoint text has {len(lines)} lines; expected 4, or 6 with a MAC"
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
        mac = None
        if len(lines) == 6:
            if lines[4] or not lines[5].startswith(MAC_PREFIX):
                raise InvalidInputError(
                    f"checkpoint lines 5 and 6 must be an empty line and {MAC_PREFIX!r} "
                    "with a base64 MAC"
                )
            mac = _base64_digest("line 6 (the MAC)", lines[5][len(MAC_PREFIX) :])
        root_hash = _base64_digest("line 3 (the root)", root)
        try:
            return cls(
                log_id=origin[len(ORIGIN_PREFIX) :],
                size=int(size),
                root=root_hash,
                chain_hash=chain_line[len(CHAIN_PREFIX) :],
                mac=mac,
            )
        except InvalidInputError as exc:
            raise InvalidInputError(f"checkpoint line 1 names no valid log id: {exc}") from None

    def sign(self, key: KeySource) -> Checkpoint:
        """This checkpoint with a MAC under `key`."""
        return msgspec.structs.replace(self, mac=_mac(load_key(key), self.body))

    def verify_mac(self, key: KeySource) -> bool:
        """Whether this checkpoint carries a MAC made with `key` (compared in constant time)."""
        expected = _mac(load_key(key), self.body)
        return self.mac is not None and hmac.compare_digest(expected, self.mac)


def checkpoint(db_path: str | os.PathLike[str], *, key: KeySource | None = None) -> Checkpoint:
    """Take a checkpoint of the log at `db_path` at its head, MAC-signed if `key` is given.

    The file is opened read-only and every row is walked on the way; a row that does not
    verify raises `CorruptLogError`. To take checkpoints of a growing log again and again,
    keep a `replay.Prover`: it walks only the rows appended since.
    """
    key_bytes = None if key is None else load_key(key)
    with closing(open_log(db_path, read_only=True)) as event_log:
        return at_head(MerkleIndex(event_log), key_bytes)


def at_head(index: MerkleIndex, key: bytes | None) -> Checkpoint:
    """A checkpoint at the head of the log `index` keeps, MAC-signed if `key` is given."""
    head = index.refresh()
    index.extend(head)
    root, chain_value = index.tip(head)
    taken = Checkpoint(log_id=index.log.log_id, size=head, root=root, chain_hash=chain_value.hex())
    return taken if key is None else taken.sign(key)


def generate_key(path: str | os.PathLike[str]) -> Path:
    """Create a new operator key file: 32 random bytes, mode 0600. Never overwrites a file."""
    check_path(path)
    target = Path(path)
    try:
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise InvalidInputError(f"{target} already exists; refusing to overwrite a key") from None
    except OSError as exc:
        raise StorageError(f"cannot create key file {target}: {exc.strerror}") from None
    problem = "short write"
    try:
        os.fchmod(fd, 0o600)
        written = os.write(fd, secrets.token_bytes(KEY_SIZE))
        os.fsync(fd)
    except OSError as exc:
        written, problem = 0, str(exc.strerror)
    finally:
        os.close(fd)
    if written != KEY_SIZE:
        target.unlink(missing_ok=True)
        raise StorageError(f"cannot write key file {target}: {problem}")
    return target


def load_key(key: KeySource) -> bytes:
    """The 32 key bytes given, or read from a key file no group or other user may access."""
    if isinstance(key, bytes):
        if len(key) != KEY_SIZE:
            raise InvalidInputError(f"an operator key is {KEY_SIZE} bytes, not {len(key)}")
        return key
    if not isinstance(key, (str, os.PathLike)):
        raise InvalidTypeError(
            f"key must be {KEY_SIZE} bytes or a key file path, not {type(key).__name__}"
        )
    try:
        fd = os.open(key, os.O_RDONLY)
    except FileNotFoundError:
        raise InvalidInputError(f"no key file at {key}") from None
    except OSError as exc:
        raise StorageError(f"cannot open key file {key}: {exc.strerror}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise InvalidInputError(f"key file {key} is not a regular file")
        if info.st_mode & 0o077:
            raise InvalidInputError(
                f"key file {key} has mode {stat.S_IMODE(info.st_mode):04o}: group or others "
                "may read or write it; chmod 600 it (or make a new key) first"
            )
        data = os.read(fd, KEY_SIZE + 1)
    finally:
        os.close(fd)
    if len(data) != KEY_SIZE:
        raise InvalidInputError(
            f"key file {key} must hold exactly {KEY_SIZE} bytes; it holds "
            f"{'more' if len(data) > KEY_SIZE else len(data)}"
        )
    return data


def _mac(key: bytes, body: str) -> bytes:
    return blake3.blake3(body.encode("utf-8"), key=key).digest()


def _check_digest(name: str, value: object) -> None:
    if not isinstance(value, bytes):
        raise InvalidTypeError(f"{name} must be bytes, not {type(value).__name__}")
    if len(value) != HASH_SIZE:
        raise InvalidInputError(f"{name} must be {HASH_SIZE} bytes, not {len(value)}")


def _base64_digest(where: str, text: str) -> bytes:
    """A 32-byte value in canonical, padded standard base64."""
    try:
        value = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidInputError(f"checkpoint {where} is not valid base64") from None
    if len(value) != HASH_SIZE or base64.b64encode(value).decode("ascii") != text:
        raise InvalidInputError(f"checkpoint {where} must be {HASH_SIZE} bytes in base64")
    return value
