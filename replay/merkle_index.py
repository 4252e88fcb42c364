"""A log's complete Merkle subtrees, kept in memory, so a proof reads a few rows, not the log.

The index holds the hash of every perfect, aligned subtree of at least `TILE` leaves over the
first `size` leaves, and the chain value at `size`. Every row is walked and verified
(`eventlog.ChainWalker`) before its tile is indexed. The index only reads the log: it is
extended from `log.scan()` as the log grows, and starts over when the chain hash stored at
`size` is no longer the one it walked (a rewritten history). Subtrees smaller than a tile are
hashed from the stored rows on demand, and every tile read is checked against its indexed hash.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from eventlog import ChainBreak, ChainWalker, CorruptLogError, EventLog, chain_at
from eventlog.chain import HASH_SIZE
from eventlog.logs import get_logger
from eventlog.stored import genesis_of
from replay.merkle import CompactRange, Node, Span, fold, perfect_hash, pieces

log = get_logger("factledger.replay")

TILE_LEVEL = 4
TILE = 1 << TILE_LEVEL
"""Subtrees below this many leaves are hashed from the stored rows on demand."""
BATCH = 1 << 16
"""Leaves walked, verified and indexed per step while extending (bounds memory)."""


class MerkleIndex:
    """The subtree hashes of one open log, covering its first `size` leaves."""

    def __init__(self, event_log: EventLog) -> None:
        self.log = event_log
        self._genesis = genesis_of(event_log)
        self._scheme = event_log.log_format.chain
        self.size = 0
        self.chain_value = self._genesis
        self._levels: list[bytearray] = []
        """The hashes at level `TILE_LEVEL + n` in `_levels[n]`, left to right."""
        self._frontier = CompactRange(self._scheme, on_merge=self._keep)

    # -- keeping up with the log -----------------------------------------------------------

    def refresh(self) -> int:
        """The log's head now; the index starts over if the log no longer has what it walked."""
        head = self.log.head().position
        if self.size > head:
            self._start_over(f"the index covers {self.size} events, the log has {head}")
        elif self.size and self.stored_chain(self.size) != self.chain_value.hex():
            self._start_over(f"the chain hash at position {self.size} changed")
        return head

    def extend(self, target: int) -> None:
        """Verify and index the whole tiles among the first `target` leaves."""
        target -= target % TILE
        while self.size < target:
            start = self.size
            end = min(target, start - start % BATCH + BATCH)
            leaves, chain_value = self._verified_leaves(start, end)
            for offset in range(0, len(leaves), TILE):
                tile = perfect_hash(leaves[offset : offset + TILE], self._scheme)
                self._keep(TILE_LEVEL, (start + offset) >> TILE_LEVEL, tile)
                self._frontier.push(TILE_LEVEL, tile)
            self.size, self.chain_value = end, chain_value

    def _start_over(self, reason: str) -> None:
        log.warning("merkle_index_rebuild", reason=reason)
        self.size, self.chain_value = 0, self._genesis
        self._levels.clear()
        self._frontier = CompactRange(self._scheme, on_merge=self._keep)

    def _keep(self, level: int, index: int, node: bytes) -> None:
        """Store the subtree `(level, index)`: always the next one at its level."""
        if level - TILE_LEVEL == len(self._levels):
            self._levels.append(bytearray())
        self._levels[level - TILE_LEVEL] += node

    # -- reading ---------------------------------------------------------------------------

    def stored_chain(self, position: int) -> str | None:
        """The hex chain value the log stores at `position` (the genesis at 0), or None."""
        return self._genesis.hex() if position == 0 else chain_at(self.log, position)

    def span_hashes(self, spans: Sequence[Span], size: int) -> list[bytes]:
        """MTH over each span of leaves (subtrees RFC 6962 builds) in the tree of `size`,
        which the index must cover up to its last whole tile."""
        wanted = [pieces(begin, end) for begin, end in spans]
        found = self._hashes({node for parts in wanted for node in parts}, size)
        return [fold([found[node] for node in parts], self._scheme) for parts in wanted]

    def tip(self, head: int) -> tuple[bytes, bytes]:
        """The Merkle root and chain value at `head`, walking the rows past the index."""
        leaves, chain_value = self._verified_leaves(self.size, head)
        tree = CompactRange(self._scheme)
        for level, node in self._frontier.nodes():
            tree.push(level, node)
        tree.add_leaves(leaves)
        return tree.root(), chain_value

    def _hashes(self, nodes: set[Node], size: int) -> dict[Node, bytes]:
        small = {node for node in nodes if node[0] < TILE_LEVEL}
        tiles = {(index << level) >> TILE_LEVEL for level, index in small}
        checked = {(TILE_LEVEL, tile) for tile in tiles if (tile + 1) * TILE <= self.size}
        found = self._stored((nodes - small) | checked)
        for tile in tiles:
            leaves = self._tile_leaves(tile, size, found.get((TILE_LEVEL, tile)))
            for level, index in small:
                first = (index << level) - tile * TILE
                if 0 <= first < TILE:
                    found[level, index] = perfect_hash(
                        leaves[first : first + (1 << level)], self._scheme
                    )
        return found

    def _stored(self, nodes: Iterable[Node]) -> dict[Node, bytes]:
        found = {}
        for level, index in nodes:
            start = index * HASH_SIZE
            found[level, index] = bytes(self._levels[level - TILE_LEVEL][start : start + HASH_SIZE])
        return found

    def _tile_leaves(self, tile: int, size: int, indexed: bytes | None) -> list[bytes]:
        """Leaf hashes of one tile, read from the stored rows and checked against the index."""
        begin = tile * TILE
        end = begin + TILE if indexed is not None else min(begin + TILE, size)
        leaves = [
            row.leaf or self._scheme.leaf_hash(row.body)
            for row in self.log.scan(after=begin, until=end)
        ]
        if len(leaves) != end - begin or (
            indexed is not None and perfect_hash(leaves, self._scheme) != indexed
        ):
            raise CorruptLogError(
                f"rows {begin + 1} to {end} are missing or changed since they were verified; "
                "run verify",
                position=begin + 1,
            )
        return leaves

    def _verified_leaves(self, start: int, end: int) -> tuple[list[bytes], bytes]:
        """Leaf hashes of positions start+1..end, after walking their chain."""
        leaves: list[bytes] = []
        walker = ChainWalker(self.log.log_format, self.chain_value, position=start)
        try:
            walker.walk(self.log.scan(after=start, until=end), on_leaf=leaves.append)
        except ChainBreak as brk:
            raise CorruptLogError(
                f"cannot index the log: {brk.reason}; run verify", position=brk.position
            ) from None
        if walker.position != end:
            raise CorruptLogError(
                f"cannot index the log: row {walker.position + 1} is missing; run verify",
                position=walker.position + 1,
            )
        return leaves, walker.chain_value
