"""RFC 6962 Merkle trees with factledger's hashing, against an independent reference.

The reference below is written straight from RFC 6962 section 2.1 (MTH, PATH, PROOF), with
blake3 called directly: it shares no code with `eventlog.merkle`. The committed vectors
(tests/data/merkle_vectors.json) are its output over the eight leaf inputs of the
certificate-transparency reference tests; `python -m tests.replay.test_merkle` rewrites them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from pathlib import Path

import blake3
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eventlog import InvalidInputError
from eventlog.chain import BLAKE3, SHA256
from eventlog.merkle import (
    CompactRange,
    Span,
    consistency_spans,
    fold,
    inclusion_spans,
    perfect_hash,
    pieces,
    root_from_inclusion,
    roots_from_consistency,
    split,
)

VECTORS_PATH = Path(__file__).parent.parent / "data" / "merkle_vectors.json"
LEAF_INPUTS = [
    "",
    "00",
    "10",
    "2021",
    "3031",
    "40414243",
    "5051525354555657",
    "606162636465666768696a6b6c6d6e6f",
]


# -- the reference: RFC 6962 2.1, recursively, with BLAKE3 ---------------------------------


def ref_leaf(data: bytes) -> bytes:
    return blake3.blake3(b"\x00" + data).digest()


def ref_node(left: bytes, right: bytes) -> bytes:
    return blake3.blake3(b"\x01" + left + right).digest()


def ref_k(n: int) -> int:
    k = 1
    while k * 2 < n:
        k *= 2
    return k


def ref_mth(data: Sequence[bytes]) -> bytes:
    if not data:
        return blake3.blake3(b"").digest()
    if len(data) == 1:
        return ref_leaf(data[0])
    k = ref_k(len(data))
    return ref_node(ref_mth(data[:k]), ref_mth(data[k:]))


def ref_path(m: int, data: Sequence[bytes]) -> list[bytes]:
    if len(data) == 1:
        return []
    k = ref_k(len(data))
    if m < k:
        return [*ref_path(m, data[:k]), ref_mth(data[k:])]
    return [*ref_path(m - k, data[k:]), ref_mth(data[:k])]


def ref_subproof(m: int, data: Sequence[bytes], complete: bool) -> list[bytes]:
    n = len(data)
    if m == n:
        return [] if complete else [ref_mth(data)]
    k = ref_k(n)
    if m <= k:
        return [*ref_subproof(m, data[:k], complete), ref_mth(data[k:])]
    return [*ref_subproof(m - k, data[k:], False), ref_mth(data[:k])]


def ref_proof(m: int, data: Sequence[bytes]) -> list[bytes]:
    return ref_subproof(m, data, True)


def reference_vectors() -> dict[str, object]:
    data = [bytes.fromhex(leaf) for leaf in LEAF_INPUTS]
    count = len(data)
    return {
        "description": "RFC 6962 trees over the certificate-transparency reference leaf inputs, "
        "hashed as factledger hashes them; see tests/replay/test_merkle.py",
        "hashing": "leaf = BLAKE3(0x00 || data); node = BLAKE3(0x01 || left || right); "
        "MTH({}) = BLAKE3('')",
        "leaves": LEAF_INPUTS,
        "leaf_hashes": [ref_leaf(d).hex() for d in data],
        "roots": [ref_mth(data[:size]).hex() for size in range(count + 1)],
        "inclusion": [
            {"index": i, "size": n, "path": [h.hex() for h in ref_path(i, data[:n])]}
            for n in range(1, count + 1)
            for i in range(n)
        ],
        "consistency": [
            {"old": m, "new": n, "path": [h.hex() for h in ref_proof(m, data[:n])]}
            for n in range(1, count + 1)
            for m in range(1, n + 1)
        ],
    }


VECTORS = json.loads(VECTORS_PATH.read_text())
LEAVES = [bytes.fromhex(h) for h in VECTORS["leaf_hashes"]]
ROOTS = [bytes.fromhex(h) for h in VECTORS["roots"]]
INCLUSION = [
    (v["index"], v["size"], [bytes.fromhex(h) for h in v["path"]]) for v in VECTORS["inclusion"]
]
CONSISTENCY = [
    (v["old"], v["new"], [bytes.fromhex(h) for h in v["path"]]) for v in VECTORS["consistency"]
]


def span_hash(leaves: Sequence[bytes], span: Span) -> bytes:
    """MTH over a span as the prover computes it: from its perfect, aligned pieces."""
    return fold(
        [perfect_hash(leaves[i << lv : (i + 1) << lv], BLAKE3) for lv, i in pieces(*span)], BLAKE3
    )


def tree_root(leaves: Sequence[bytes]) -> bytes:
    tree = CompactRange(BLAKE3)
    tree.add_leaves(leaves)
    return tree.root()


# -- the committed vectors -------------------------------------------------------------------


def test_vectors_file_is_the_reference_output() -> None:
    """The committed vectors are exactly what the RFC reference computes."""
    assert reference_vectors() == VECTORS


def test_empty_tree_root_is_hash_of_empty_string() -> None:
    """MTH({}) is BLAKE3 of the empty string, as RFC 6962 defines it."""
    assert blake3.blake3(b"").digest() == BLAKE3.empty_root() == ROOTS[0] == tree_root([])


@pytest.mark.parametrize("size", range(9))
def test_root_matches_vector(size: int) -> None:
    """A compact range fed leaf by leaf, and one fed all at once, give the vector root."""
    one_by_one = CompactRange(BLAKE3)
    for leaf in LEAVES[:size]:
        one_by_one.add_leaves([leaf])
    assert (ROOTS[size], ROOTS[size]) == (tree_root(LEAVES[:size]), one_by_one.root())


@pytest.mark.parametrize(("index", "size", "path"), INCLUSION)
def test_inclusion_path_matches_vector(index: int, size: int, path: list[bytes]) -> None:
    """The prover's spans hash to the RFC PATH, and the path leads back to the root."""
    spans = inclusion_spans(index, size)
    assert path == [span_hash(LEAVES, span) for span in spans]
    assert ROOTS[size] == root_from_inclusion(index, size, LEAVES[index], path, BLAKE3)


@pytest.mark.parametrize(("old", "new", "path"), CONSISTENCY)
def test_consistency_path_matches_vector(old: int, new: int, path: list[bytes]) -> None:
    """The prover's spans hash to the RFC PROOF, and the proof leads to both roots."""
    spans = consistency_spans(old, new) if old < new else []
    assert path == [span_hash(LEAVES, span) for span in spans]
    if old < new:
        roots = roots_from_consistency(old, new, ROOTS[old], path, BLAKE3)
        assert (ROOTS[old], ROOTS[new]) == roots


# -- proofs that must fail -------------------------------------------------------------------


def _flip(node: bytes) -> bytes:
    return bytes([node[0] ^ 0x01]) + node[1:]


Tamper = Callable[[int, int, list[bytes]], tuple[int, int, list[bytes]]]

INCLUSION_TAMPERS: dict[str, Tamper] = {
    "wrong index": lambda i, n, p: (i + 1 if i + 1 < n else i - 1, n, p),
    "wrong size": lambda i, n, p: (i, n + 1, p),
    "smaller size": lambda i, n, p: (i, n - 1, p),
    "flipped bit": lambda i, n, p: (i, n, [_flip(p[0]), *p[1:]]),
    "truncated path": lambda i, n, p: (i, n, p[:-1]),
    "extended path": lambda i, n, p: (i, n, [*p, p[-1]]),
    "swapped siblings": lambda i, n, p: (i, n, [p[1], p[0], *p[2:]]),
}


@pytest.mark.parametrize("tamper", INCLUSION_TAMPERS)
def test_tampered_inclusion_proofs_fail(tamper: str) -> None:
    """Every inclusion vector, changed in one way, no longer leads to the root of the tree
    it claims (a changed size claims another tree)."""
    for index, size, path in INCLUSION:
        if len(path) < 2 or (tamper == "smaller size" and index >= size - 1):
            continue
        if tamper == "swapped siblings" and path[0] == path[1]:
            continue
        i, n, p = INCLUSION_TAMPERS[tamper](index, size, path)
        if n < len(ROOTS):
            assert ROOTS[n] != root_from_inclusion(i, n, LEAVES[index], p, BLAKE3)


def test_inclusion_proof_for_another_tree_fails() -> None:
    """A path valid in the tree of 7 leaves does not lead to the root of the tree of 8."""
    path = ref_path(2, [bytes.fromhex(d) for d in LEAF_INPUTS[:7]])
    assert ROOTS[7] == root_from_inclusion(2, 7, LEAVES[2], path, BLAKE3)
    assert ROOTS[8] != root_from_inclusion(2, 8, LEAVES[2], path, BLAKE3)


def test_inclusion_of_another_leaf_fails() -> None:
    """A path proves its own leaf only."""
    _, size, path = INCLUSION[-1]
    assert ROOTS[size] != root_from_inclusion(7, size, LEAVES[6], path, BLAKE3)


def test_inclusion_index_out_of_range_gives_none() -> None:
    """An index outside the tree has no root."""
    assert (None, None) == (
        root_from_inclusion(8, 8, LEAVES[0], [], BLAKE3),
        root_from_inclusion(-1, 8, LEAVES[0], [], BLAKE3),
    )


CONSISTENCY_TAMPERS: dict[str, Tamper] = {
    "flipped bit": lambda m, n, p: (m, n, [_flip(p[0]), *p[1:]]),
    "truncated path": lambda m, n, p: (m, n, p[:-1]),
    "extended path": lambda m, n, p: (m, n, [*p, p[-1]]),
    "swapped nodes": lambda m, n, p: (m, n, [p[1], p[0], *p[2:]]),
    "wrong old size": lambda m, n, p: (m - 1, n, p),
    "wrong new size": lambda m, n, p: (m, n - 1, p),
}


@pytest.mark.parametrize("tamper", CONSISTENCY_TAMPERS)
def test_tampered_consistency_proofs_fail(tamper: str) -> None:
    """Every consistency vector with a proof, changed in one way, no longer leads to the
    roots of the two trees it claims."""
    for old, new, path in CONSISTENCY:
        if len(path) < 2 or old == new or (tamper == "wrong old size" and old == 1):
            continue
        if tamper == "swapped nodes" and path[0] == path[1]:
            continue
        m, n, p = CONSISTENCY_TAMPERS[tamper](old, new, path)
        if m < n:
            assert (ROOTS[m], ROOTS[n]) != roots_from_consistency(m, n, ROOTS[m], p, BLAKE3)


def test_consistency_proof_for_other_trees_fails() -> None:
    """A proof that 3 extends to 7 does not show that 3 extends to 8."""
    _, _, path = next(v for v in CONSISTENCY if v[:2] == (3, 7))
    assert (ROOTS[3], ROOTS[8]) != roots_from_consistency(3, 8, ROOTS[3], path, BLAKE3)


def test_consistency_needs_sizes_in_order_and_a_path() -> None:
    """Equal, reversed or zero sizes and an empty path give no roots."""
    _, _, path = next(v for v in CONSISTENCY if v[:2] == (3, 7))
    assert [None] * 4 == [
        roots_from_consistency(7, 7, ROOTS[7], path, BLAKE3),
        roots_from_consistency(7, 3, ROOTS[7], path, BLAKE3),
        roots_from_consistency(0, 3, ROOTS[0], path, BLAKE3),
        roots_from_consistency(3, 7, ROOTS[3], [], BLAKE3),
    ]


# -- beyond the eight leaves -----------------------------------------------------------------


def _leaves(count: int) -> list[bytes]:
    return [ref_leaf(i.to_bytes(4, "big")) for i in range(count)]


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 300), st.data())
def test_inclusion_paths_match_reference_at_any_size(size: int, data: st.DataObject) -> None:
    """For random sizes and indexes, spans hash to the RFC PATH and verify."""
    index = data.draw(st.integers(0, size - 1))
    leaves, inputs = _leaves(size), [i.to_bytes(4, "big") for i in range(size)]
    path = [span_hash(leaves, span) for span in inclusion_spans(index, size)]
    assert ref_path(index, inputs) == path
    assert ref_mth(inputs) == root_from_inclusion(index, size, leaves[index], path, BLAKE3)


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 300), st.data())
def test_consistency_paths_match_reference_at_any_size(new: int, data: st.DataObject) -> None:
    """For random size pairs, spans hash to the RFC PROOF and verify."""
    old = data.draw(st.integers(1, new - 1))
    leaves, inputs = _leaves(new), [i.to_bytes(4, "big") for i in range(new)]
    path = [span_hash(leaves, span) for span in consistency_spans(old, new)]
    assert ref_proof(old, inputs) == path
    expected = (ref_mth(inputs[:old]), ref_mth(inputs))
    assert expected == roots_from_consistency(old, new, expected[0], path, BLAKE3)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 40), max_size=8))
def test_compact_range_in_any_chunks_gives_the_root(chunks: list[int]) -> None:
    """Leaves added in chunks of any sizes, and ranges joined by pushing their subtrees,
    give the same root as the reference."""
    leaves = _leaves(sum(chunks))
    whole, start = CompactRange(BLAKE3), 0
    for size in chunks:
        part = CompactRange(BLAKE3, start)
        part.add_leaves(leaves[start : start + size])
        for level, node in part.nodes():
            whole.push(level, node)
        start += size
    assert ref_mth([i.to_bytes(4, "big") for i in range(len(leaves))]) == whole.root()


def test_compact_range_reports_every_merged_subtree() -> None:
    """`on_merge` hears of each completed subtree with its level, index and hash."""
    merged: list[tuple[int, int, bytes]] = []
    tree = CompactRange(BLAKE3, on_merge=lambda *node: merged.append(node))
    leaves = _leaves(6)
    tree.add_leaves(leaves[:1])
    for leaf in leaves[1:]:
        tree.add_leaves([leaf])
    expected = [
        (1, 0, span_hash(leaves, (0, 2))),
        (1, 1, span_hash(leaves, (2, 4))),
        (2, 0, span_hash(leaves, (0, 4))),
        (1, 2, span_hash(leaves, (4, 6))),
    ]
    assert expected == merged


def test_pieces_are_aligned_perfect_subtrees() -> None:
    """A span splits into the fewest aligned powers of two, left to right."""
    assert [(2, 1), (1, 4), (0, 10)] == pieces(4, 11)
    assert [(0, 3), (2, 1), (0, 8)] == pieces(3, 9)
    assert [] == pieces(5, 5)


def test_split_is_the_largest_power_of_two_below() -> None:
    """RFC 6962's k: the largest power of two smaller than n."""
    assert [1, 2, 2, 4, 4, 4, 4, 8] == [split(n) for n in range(2, 10)]


def test_misaligned_subtree_is_refused() -> None:
    """A level-1 subtree cannot start at an odd leaf."""
    tree = CompactRange(BLAKE3, 1)
    with pytest.raises(InvalidInputError):
        tree.push(1, BLAKE3.empty_root())


def test_range_not_starting_at_zero_has_no_root() -> None:
    """Only a range over leaves from 0 has a root."""
    tree = CompactRange(BLAKE3, 4)
    tree.add_leaves(_leaves(4))
    with pytest.raises(InvalidInputError):
        tree.root()


if __name__ == "__main__":
    VECTORS_PATH.write_text(json.dumps(reference_vectors(), indent=2) + "\n")


# -- format v2: SHA-256, against certificate-transparency's published roots -----------------

CT_SHA256_ROOTS = [
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
]
"""RFC 6962 tree heads over the first n leaf inputs, as certificate-transparency's reference
tests publish them (SHA-256)."""


def sha256_mth(leaves: Sequence[bytes]) -> bytes:
    """RFC 6962 2.1 MTH with hashlib, recursively: shares no code with `eventlog.merkle`."""
    if not leaves:
        return hashlib.sha256(b"").digest()
    if len(leaves) == 1:
        return hashlib.sha256(b"\x00" + leaves[0]).digest()
    k = ref_k(len(leaves))
    return hashlib.sha256(b"\x01" + sha256_mth(leaves[:k]) + sha256_mth(leaves[k:])).digest()


def sha256_path(m: int, data: Sequence[bytes]) -> list[bytes]:
    """RFC 6962 2.1.1 PATH(m, D[n]) with hashlib."""
    if len(data) == 1:
        return []
    k = ref_k(len(data))
    if m < k:
        return [*sha256_path(m, data[:k]), sha256_mth(data[k:])]
    return [*sha256_path(m - k, data[k:]), sha256_mth(data[:k])]


@pytest.mark.parametrize("size", range(9))
def test_v2_tree_heads_are_rfc_6962_sha256(size: int) -> None:
    """Format v2's tree (`SHA256`), fed the CT reference leaves, gives CT's published roots,
    and so does a from-scratch hashlib MTH."""
    data = [bytes.fromhex(leaf) for leaf in LEAF_INPUTS[:size]]
    tree = CompactRange(SHA256)
    tree.add_leaves([SHA256.leaf_hash(d) for d in data])
    assert CT_SHA256_ROOTS[size] == tree.root().hex() == sha256_mth(data).hex()


@pytest.mark.parametrize("size", [5, 7, 8])
def test_v2_inclusion_proofs_reach_the_ct_root(size: int) -> None:
    """Every leaf's inclusion path leads to CT's published root for its tree size."""
    leaves = [SHA256.leaf_hash(bytes.fromhex(leaf)) for leaf in LEAF_INPUTS[:size]]
    for index in range(size):
        path = [
            fold(
                [perfect_hash(leaves[i << lv : (i + 1) << lv], SHA256) for lv, i in pieces(*span)],
                SHA256,
            )
            for span in inclusion_spans(index, size)
        ]
        root = root_from_inclusion(index, size, leaves[index], path, SHA256)
        assert root is not None and CT_SHA256_ROOTS[size] == root.hex()
