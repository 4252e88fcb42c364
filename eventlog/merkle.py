"""RFC 6962/9162 Merkle trees over the log's leaf hashes, hashed as the log's chain scheme
(`eventlog.chain`: SHA-256 in format v2, BLAKE3 in v1) hashes.

Leaf `i` (0-based) is the scheme's `leaf_hash` of the stored bytes at position `i + 1`;
interior nodes are its `node_hash`; the root of the empty tree is its hash of the empty
string (RFC 6962's MTH({}) = HASH()). A perfect, aligned subtree is named `(level, index)`
and covers leaves `[index * 2**level, (index + 1) * 2**level)`. Every subtree RFC 6962
builds is a short run of such pieces, which lets a prover read a few stored hashes instead
of every leaf.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from eventlog.chain import NODE_PREFIX, ChainScheme
from eventlog.errors import InvalidInputError

Node = tuple[int, int]
"""A perfect, aligned subtree: (level, index)."""

Span = tuple[int, int]
"""Leaves [begin, end)."""


def split(size: int) -> int:
    """The largest power of two smaller than `size` (at least 2): RFC 6962's k."""
    return 1 << ((size - 1).bit_length() - 1)


def pieces(begin: int, end: int) -> list[Node]:
    """The fewest perfect, aligned subtrees that cover leaves [begin, end), left to right."""
    found: list[Node] = []
    while begin < end:
        level = (end - begin).bit_length() - 1
        if begin:
            level = min(level, (begin & -begin).bit_length() - 1)
        found.append((level, begin >> level))
        begin += 1 << level
    return found


def fold(hashes: Sequence[bytes], scheme: ChainScheme) -> bytes:
    """The RFC 6962 hash of a subtree from the hashes of its pieces, left to right."""
    if not hashes:
        return scheme.empty_root()
    result = hashes[-1]
    for left in reversed(hashes[:-1]):
        result = scheme.node_hash(left, result)
    return result


def perfect_hash(leaves: Sequence[bytes], scheme: ChainScheme) -> bytes:
    """The root of a perfect subtree over `leaves` (a power-of-two count of leaf hashes)."""
    new = scheme.new
    level = list(leaves)
    while len(level) > 1:
        parents = []
        for i in range(0, len(level), 2):
            hasher = new()
            hasher.update(NODE_PREFIX + level[i] + level[i + 1])
            parents.append(hasher.digest())
        level = parents
    return level[0]


def inclusion_spans(index: int, size: int) -> list[Span]:
    """The subtrees whose hashes form PATH(index, D[size]), from the leaf up (RFC 6962 2.1.1)."""
    spans: list[Span] = []
    begin, end = 0, size
    while end - begin > 1:
        middle = begin + split(end - begin)
        if index < middle:
            spans.append((middle, end))
            end = middle
        else:
            spans.append((begin, middle))
            begin = middle
    spans.reverse()
    return spans


def consistency_spans(old: int, new: int) -> list[Span]:
    """The subtrees whose hashes form PROOF(old, D[new]) for 0 < old < new (RFC 6962 2.1.2)."""
    spans: list[Span] = []
    begin, end, known = 0, new, True
    while end != old:
        middle = begin + split(end - begin)
        if old <= middle:
            spans.append((middle, end))
            end = middle
        else:
            spans.append((begin, middle))
            begin, known = middle, False
    if not known:
        spans.append((begin, end))
    spans.reverse()
    return spans


def root_from_inclusion(
    index: int, size: int, leaf: bytes, path: Sequence[bytes], scheme: ChainScheme
) -> bytes | None:
    """The root an inclusion path leads to (RFC 9162 2.1.3.2), or None if it cannot be one."""
    if not 0 <= index < size:
        return None
    fn, sn, result = index, size - 1, leaf
    for sibling in path:
        if sn == 0:
            return None
        if fn & 1 or fn == sn:
            result = scheme.node_hash(sibling, result)
            while fn and not fn & 1:
                fn >>= 1
                sn >>= 1
        else:
            result = scheme.node_hash(result, sibling)
        fn >>= 1
        sn >>= 1
    return result if sn == 0 else None


def roots_from_consistency(
    old: int, new: int, old_root: bytes, path: Sequence[bytes], scheme: ChainScheme
) -> tuple[bytes, bytes] | None:
    """The old and new roots a consistency path leads to (RFC 9162 2.1.4.2), for 0 < old < new."""
    if not 0 < old < new or not path:
        return None
    nodes = [old_root, *path] if old & (old - 1) == 0 else list(path)
    fn, sn = old - 1, new - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    old_result = new_result = nodes[0]
    for sibling in nodes[1:]:
        if sn == 0:
            return None
        if fn & 1 or fn == sn:
            old_result = scheme.node_hash(sibling, old_result)
            new_result = scheme.node_hash(sibling, new_result)
            while fn and not fn & 1:
                fn >>= 1
                sn >>= 1
        else:
            new_result = scheme.node_hash(new_result, sibling)
        fn >>= 1
        sn >>= 1
    return (old_result, new_result) if sn == 0 else None


class CompactRange:
    """The perfect subtrees covering leaves [begin, end): a growing tree kept in O(log n) hashes.

    `on_merge(level, index, hash)` hears of every subtree completed by merging two halves.
    """

    def __init__(
        self,
        scheme: ChainScheme,
        begin: int = 0,
        *,
        on_merge: Callable[[int, int, bytes], object] | None = None,
    ) -> None:
        self.scheme = scheme
        self.begin = begin
        self.end = begin
        self._levels: list[int] = []
        self._hashes: list[bytes] = []
        self._on_merge = on_merge

    def nodes(self) -> list[tuple[int, bytes]]:
        """The covering subtrees as (level, hash), left to right."""
        return list(zip(self._levels, self._hashes, strict=True))

    def push(self, level: int, node: bytes) -> None:
        """Add the perfect subtree of `2**level` leaves that starts at `end`."""
        if self.end & ((1 << level) - 1):
            raise InvalidInputError(f"a level-{level} subtree cannot start at leaf {self.end}")
        levels, hashes = self._levels, self._hashes
        levels.append(level)
        hashes.append(node)
        self.end += 1 << level
        while len(levels) > 1 and levels[-2] == level and not self.end & ((2 << level) - 1):
            right = hashes.pop()
            levels.pop()
            level += 1
            hashes[-1] = self.scheme.node_hash(hashes[-1], right)
            levels[-1] = level
            if self._on_merge is not None:
                self._on_merge(level, (self.end >> level) - 1, hashes[-1])

    def add_leaves(self, leaves: Sequence[bytes]) -> None:
        """Append leaf hashes, hashing each aligned run of them as one perfect subtree."""
        start = self.end
        for level, index in pieces(start, start + len(leaves)):
            first = (index << level) - start
            self.push(level, perfect_hash(leaves[first : first + (1 << level)], self.scheme))

    def root(self) -> bytes:
        """MTH over leaves [0, end); only a range that begins at leaf 0 has one."""
        if self.begin:
            raise InvalidInputError("only a range starting at leaf 0 has a root")
        return fold(self._hashes, self.scheme)
