"""The hash constructions that seal the log. README ("The chain") states them for auditors.

All hashes are BLAKE3 with 32-byte output, domain-separated by a one-byte prefix:

    genesis   = BLAKE3.derive_key(context=GENESIS_CONTEXT, key_material=UTF-8(log_id))
    leaf[n]   = BLAKE3(0x00 || body[n])             (RFC 6962 leaf hash; body = stored bytes)
    chain[n]  = BLAKE3(0x02 || chain[n-1] || leaf[n]),  chain[0] = genesis
    node(l,r) = BLAKE3(0x01 || l || r)               (RFC 6962 interior node, for checkpoints)
"""

from __future__ import annotations

import blake3

GENESIS_CONTEXT = "factledger 2026-11-29 event log genesis v1"
LEAF_PREFIX = b"\x00"
NODE_PREFIX = b"\x01"
LINK_PREFIX = b"\x02"
HASH_SIZE = 32


def genesis(log_id: str) -> bytes:
    """The chain value before the first event of the log named `log_id`."""
    return blake3.blake3(log_id.encode("utf-8"), derive_key_context=GENESIS_CONTEXT).digest()


def leaf_hash(body: bytes) -> bytes:
    """The hash of one event's stored bytes (an RFC 6962 leaf)."""
    return blake3.blake3(LEAF_PREFIX + body).digest()


def link(previous: bytes, leaf: bytes) -> bytes:
    """The chain value after an event whose leaf hash is `leaf`."""
    return blake3.blake3(LINK_PREFIX + previous + leaf).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """An interior Merkle tree node over two subtrees."""
    return blake3.blake3(NODE_PREFIX + left + right).digest()
