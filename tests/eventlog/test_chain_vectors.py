"""Known-answer vectors: the encoding and chain construction are frozen by committed data."""

from __future__ import annotations

import json
from pathlib import Path

import blake3
import msgspec

from eventlog import chain
from eventlog.codec import encode_envelope
from eventlog.events import Envelope

VECTORS = json.loads((Path(__file__).parent.parent / "data" / "chain_vectors.json").read_text())


def test_genesis_matches_vector() -> None:
    """The genesis is BLAKE3 derive_key over the log id with the documented context."""
    assert VECTORS["genesis_context"] == chain.GENESIS_CONTEXT
    assert VECTORS["genesis"] == chain.genesis(VECTORS["log_id"]).hex()


def test_encoding_is_canonical() -> None:
    """Decoding each stored body and encoding it again yields the very same bytes."""
    for event in VECTORS["events"]:
        body = event["body"].encode()
        assert body == encode_envelope(msgspec.json.decode(body, type=Envelope))


def test_leaf_and_chain_values_match_vectors() -> None:
    """eventlog.chain reproduces every committed leaf hash and chain value."""
    previous = chain.genesis(VECTORS["log_id"])
    for event in VECTORS["events"]:
        leaf = chain.leaf_hash(event["body"].encode())
        previous = chain.link(previous, leaf)
        assert (event["leaf_hash"], event["chain_hash"]) == (leaf.hex(), previous.hex())


def test_spec_in_readme_reproduces_vectors_independently() -> None:
    """The construction written in README, coded from scratch with blake3, gives the vectors."""
    previous = blake3.blake3(
        VECTORS["log_id"].encode(), derive_key_context=VECTORS["genesis_context"]
    ).digest()
    for event in VECTORS["events"]:
        body = event["body"].encode()
        content = msgspec.json.decode(body)["payload"]
        text = content.get("content", content.get("value", ""))
        assert event["content_hash"] == "blake3:" + blake3.blake3(text.encode()).hexdigest()
        leaf = blake3.blake3(b"\x00" + body).digest()
        previous = blake3.blake3(b"\x02" + previous + leaf).digest()
        assert event["chain_hash"] == previous.hex()


def test_node_hash_matches_vector() -> None:
    """An RFC 6962 interior node is BLAKE3(0x01 || left || right)."""
    left, right = (bytes.fromhex(e["leaf_hash"]) for e in VECTORS["events"][:2])
    assert VECTORS["node_hash_1_2"] == chain.node_hash(left, right).hex()
