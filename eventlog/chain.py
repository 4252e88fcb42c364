"""The hash constructions that seal a log, one `ChainScheme` per format.
docs/spec/format-v2.md states them for auditors.

Every hash has 32-byte output and is domain-separated by a one-byte prefix, as RFC 6962 does:

    leaf[n]   = H(0x00 || body[n])                   (RFC 6962 leaf hash; body = stored bytes)
    node(l,r) = H(0x01 || l || r)                     (RFC 6962 interior node, for checkpoints)
    chain[n]  = H(0x02 || chain[n-1] || leaf[n]),  chain[0] = genesis(log id)
    MTH({})   = H("")                                 (the root of the empty tree)

Format v2 (`SHA256`): H is SHA-256; genesis = SHA-256(GENESIS_DOMAIN || UTF-8(log id)).
Format v1 (`BLAKE3`, read only): H is BLAKE3; genesis = BLAKE3.derive_key(context=
GENESIS_CONTEXT, key_material=UTF-8(log id)).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import NamedTuple, Protocol

import blake3

LEAF_PREFIX = b"\x00"
NODE_PREFIX = b"\x01"
LINK_PREFIX = b"\x02"
HASH_SIZE = 32
GENESIS_DOMAIN = b"factledger/v2 genesis\x00"
"""Format v2: what the genesis hashes before the log id."""
GENESIS_CONTEXT = "factledger 2026-11-29 event log genesis v1"
"""Format v1: the BLAKE3 key-derivation context of the genesis."""


class Hasher(Protocol):
    """An incremental hash (hashlib's and blake3's objects both are)."""

    def update(self, data: bytes, /) -> object: ...

    def digest(self) -> bytes: ...


class HashFactory(Protocol):
    """A hash constructor taking the first data to hash (hashlib's and blake3's do)."""

    def __call__(self, data: bytes = ..., /) -> Hasher: ...


class ChainScheme(NamedTuple):
    """One format's hash: the function H above, an incremental hasher (`new()`, or `new(data)`
    holding `data` already), and the genesis."""

    name: str
    new: HashFactory
    """A hasher, fed the data given (`new(data).digest()` is H(data), in one call)."""
    genesis_of: Callable[[str], bytes]

    def digest(self, data: bytes) -> bytes:
        """H(data)."""
        return self.new(data).digest()

    def genesis(self, log_id: str) -> bytes:
        """The chain value before the first event of the log named `log_id`."""
        return self.genesis_of(log_id)

    def leaf_hash(self, body: bytes) -> bytes:
        """The hash of one event's stored bytes (an RFC 6962 leaf)."""
        return self.digest(LEAF_PREFIX + body)

    def link(self, previous: bytes, leaf: bytes) -> bytes:
        """The chain value after an event whose leaf hash is `leaf`."""
        return self.digest(LINK_PREFIX + previous + leaf)

    def node_hash(self, left: bytes, right: bytes) -> bytes:
        """An interior Merkle tree node over two subtrees."""
        return self.digest(NODE_PREFIX + left + right)

    def empty_root(self) -> bytes:
        """The root of the empty tree, MTH({}) = H("")."""
        return self.digest(b"")


def _sha256_genesis(log_id: str) -> bytes:
    return hashlib.sha256(GENESIS_DOMAIN + log_id.encode("utf-8")).digest()


def _blake3_genesis(log_id: str) -> bytes:
    return blake3.blake3(log_id.encode("utf-8"), derive_key_context=GENESIS_CONTEXT).digest()


SHA256 = ChainScheme("sha256", hashlib.sha256, _sha256_genesis)
"""Format v2's chain and tree: SHA-256 exactly as RFC 6962 writes it."""
BLAKE3 = ChainScheme("blake3", blake3.blake3, _blake3_genesis)
"""Format v1's chain and tree (logs written before format v2, read and verified only)."""
