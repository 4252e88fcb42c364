"""Known-answer vectors: the encoding and chain construction of both formats are frozen by
committed data (tests/data/chain_vectors.json: `v2`, written today; `v1`, read only)."""

from __future__ import annotations

import hashlib
import hmac
import json
from pathlib import Path

import blake3
import msgspec
import pytest

from eventlog import chain
from eventlog.codec import encode_envelope
from eventlog.events import Envelope
from eventlog.formats import V1, V2, LogFormat

ALL = json.loads((Path(__file__).parent.parent / "data" / "chain_vectors.json").read_text())
V1_VECTORS, V2_VECTORS = ALL["v1"], ALL["v2"]
SCHEMES = {"v1": (chain.BLAKE3, V1_VECTORS), "v2": (chain.SHA256, V2_VECTORS)}
TEXT_FIELDS = {"memory_added": "content", "fact_published": "value"}


def test_genesis_matches_vectors() -> None:
    """v2: SHA-256 over the documented domain and the log id; v1: BLAKE3 derive_key over the
    log id with the documented context."""
    assert V2_VECTORS["genesis_domain"].encode() == chain.GENESIS_DOMAIN
    assert V2_VECTORS["genesis"] == chain.SHA256.genesis(V2_VECTORS["log_id"]).hex()
    assert V1_VECTORS["genesis_context"] == chain.GENESIS_CONTEXT
    assert V1_VECTORS["genesis"] == chain.BLAKE3.genesis(V1_VECTORS["log_id"]).hex()


@pytest.mark.parametrize("version", sorted(SCHEMES))
def test_encoding_is_canonical(version: str) -> None:
    """Decoding each stored body and encoding it again yields the very same bytes."""
    for event in SCHEMES[version][1]["events"]:
        body = event["body"].encode()
        assert body == encode_envelope(msgspec.json.decode(body, type=Envelope))


@pytest.mark.parametrize("version", sorted(SCHEMES))
def test_leaf_and_chain_values_match_vectors(version: str) -> None:
    """eventlog.chain reproduces every committed leaf hash and chain value."""
    scheme, vectors = SCHEMES[version]
    previous = scheme.genesis(vectors["log_id"])
    for event in vectors["events"]:
        leaf = scheme.leaf_hash(event["body"].encode())
        previous = scheme.link(previous, leaf)
        assert (event["leaf_hash"], event["chain_hash"]) == (leaf.hex(), previous.hex())


def test_v2_content_hashes_match_vectors() -> None:
    """eventlog.formats keys each text's hash with its salt, and holds it to the body."""
    for event in V2_VECTORS["events"]:
        text, salt = event["text"].encode(), bytes.fromhex(event["salt"])
        assert event["content_hash"] == V2.content_hash(text, salt)
        assert V2.text_matches(text, salt, event["content_hash"])
        assert not V2.text_matches(text + b"!", salt, event["content_hash"])


def test_v2_spec_reproduces_vectors_independently_with_hashlib() -> None:
    """The construction in docs/spec/chain.md and format-v2.md, coded from scratch with
    hashlib and blake3 alone, gives the v2 vectors: the body holds no text, the text's keyed
    hash is the body's `content_hash`."""
    log_id = V2_VECTORS["log_id"].encode()
    previous = hashlib.sha256(b"factledger/v2 genesis\x00" + log_id).digest()
    assert V2_VECTORS["genesis"] == previous.hex()
    leaves = []
    for event in V2_VECTORS["events"]:
        body = event["body"].encode()
        stored = json.loads(body)
        field = TEXT_FIELDS.get(stored["payload"]["kind"])
        assert "" == (stored["payload"][field] if field else "")
        keyed = blake3.blake3(event["text"].encode(), key=bytes.fromhex(event["salt"]))
        assert stored["content_hash"] == event["content_hash"]
        assert hmac.compare_digest(event["content_hash"], "blake3-keyed:" + keyed.hexdigest())
        leaf = hashlib.sha256(b"\x00" + body).digest()
        previous = hashlib.sha256(b"\x02" + previous + leaf).digest()
        assert (event["leaf_hash"], event["chain_hash"]) == (leaf.hex(), previous.hex())
        leaves.append(leaf)
    node = hashlib.sha256(b"\x01" + leaves[0] + leaves[1]).digest()
    assert V2_VECTORS["node_hash_1_2"] == node.hex()


def test_v1_spec_reproduces_vectors_independently() -> None:
    """Format v1's construction (docs/spec/chain.md, "Format v1"), coded from scratch with
    blake3, gives the v1 vectors."""
    previous = blake3.blake3(
        V1_VECTORS["log_id"].encode(), derive_key_context=V1_VECTORS["genesis_context"]
    ).digest()
    for event in V1_VECTORS["events"]:
        body = event["body"].encode()
        content = msgspec.json.decode(body)["payload"]
        text = content.get("content", content.get("value", ""))
        assert event["content_hash"] == "blake3:" + blake3.blake3(text.encode()).hexdigest()
        leaf = blake3.blake3(b"\x00" + body).digest()
        previous = blake3.blake3(b"\x02" + previous + leaf).digest()
        assert event["chain_hash"] == previous.hex()


@pytest.mark.parametrize("version", sorted(SCHEMES))
def test_node_hash_matches_vector(version: str) -> None:
    """An RFC 6962 interior node is H(0x01 || left || right)."""
    scheme, vectors = SCHEMES[version]
    left, right = (bytes.fromhex(e["leaf_hash"]) for e in vectors["events"][:2])
    assert vectors["node_hash_1_2"] == scheme.node_hash(left, right).hex()


@pytest.mark.parametrize("log_format", [V1, V2], ids=["v1", "v2"])
def test_text_matches_holds_a_text_to_content_hash_exactly(log_format: LogFormat) -> None:
    """`text_matches` (which inlines the hash for the walk) agrees with `content_hash`: the
    text and salt that made a hash match it; another text, another salt, a salt of the wrong
    size, no salt in v2, or a stored hash that is not ASCII do not."""
    text, salt = "ünïcode text".encode(), bytes(range(32))
    stored = log_format.content_hash(text, salt)
    other_salt = bytes(32)
    assert [True, False, log_format is V1, log_format is V1, log_format is V1, False] == [
        log_format.text_matches(text, salt, stored),
        log_format.text_matches(text + b"!", salt, stored),
        log_format.text_matches(text, other_salt, stored),
        log_format.text_matches(text, salt[:31], stored),
        log_format.text_matches(text, None, stored),
        log_format.text_matches(text, salt, stored[:-1] + "é"),
    ]
