"""A log's complete Merkle subtrees, kept beside its read model, so a proof reads a few
rows, not the log.

The index holds the hash of every perfect, aligned subtree of at least `TILE` leaves over the
first `size` leaves, and the chain value at `size`. Extending it reads only the rows past
`size`, from the chain value it recorded: a prover walks and verifies them
(`eventlog.ChainWalker`); the write path (`follow`, every `STEP` events, inside the append's
transaction) links each to the chain value stored with it, which is all the tree needs.
Subtrees smaller than a tile are hashed from the stored rows on demand, and every tile read
is checked against its indexed hash.

Where it is kept (`IndexTables`): in a log file, in tables beside the read model
(`fl_merkle_nodes`, `fl_merkle_state`); in a host's cache file for a log held elsewhere; or
only in memory. A handle that may not write them (a read-only ledger on a log file) reads
what is kept and extends it in memory. The tables are disposable: dropped or edited, they
are rebuilt from the log. They are not trusted either: an index found in the file is
believed only as far as the log's chain value at its size is the one it recorded, and what
is proven from it is checked against a checkpoint by the caller (`replay.proofs`), which
starts over on a mismatch.

Where the index would only be held in memory (4 bytes an event), a checkpoint takes its
root from a `MerkleTip` instead: the same walk, kept in O(log n) hashes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager

from eventlog import ChainBreak, ChainWalker, CorruptLogError, EventLog, StorageError, chain_at
from eventlog.backend import Link
from eventlog.chain import HASH_SIZE
from eventlog.logs import get_logger
from eventlog.merkle import CompactRange, Node, Span, fold, perfect_hash, pieces
from eventlog.stored import genesis_of
from projections import _sql_merkle as sql
from projections._database import CacheDatabase, Database
from projections._database import in_log_file as database_in_log_file
from projections._errors import MerkleIndexError

log = get_logger("factledger.projections")

TILE_LEVEL = 4
TILE = 1 << TILE_LEVEL
"""Subtrees below this many leaves are hashed from the stored rows on demand."""
BATCH = 1 << 16
"""Leaves walked, verified and indexed per step while extending (bounds memory; each step
commits on its own)."""
STEP = 1 << 8
"""The write path extends the index each time the log crosses a multiple of this many events
(a fixed cost per extension, spread thin; a fresh proof walks at most this many rows more)."""
FOLLOW_LIMIT = 1 << 12
"""The most rows an append extends the kept index by: one further behind (dropped, or kept
by an older version) is left to a proof or `rebuild --swap` rather than walked in a write."""
KEPT_LINKS = FOLLOW_LIMIT + STEP
"""The most links of appended rows an index keeps (`note`): past that the write path reads
the rows back, as for an index that far behind."""
VERSION = 1
"""Of the tables and what they hold; another version is rebuilt."""

Scope = Callable[[], AbstractContextManager[object]]
Progress = Callable[[int, int], object]
"""Called as `progress(done, total)` after each batch walked."""


class IndexTables:
    """Where an index is kept: a read-model database, how to read it consistently, and how
    to write it (None: it is read, never written)."""

    def __init__(self, db: Database, *, read: Scope, write: Scope | None) -> None:
        self.db = db
        self.read = read
        self.write = write


class MerkleIndex:
    """The subtree hashes of one open log, covering its first `size` leaves."""

    def __init__(self, event_log: EventLog, tables: IndexTables | None = None) -> None:
        self.log = event_log
        self._tables = tables
        self._genesis = genesis_of(event_log)
        self._scheme = event_log.log_format.chain
        self.size = 0
        self.chain_value = self._genesis
        self.walked = True
        """Whether every subtree held was hashed by this process from rows it verified (an
        index read from its tables may have been edited)."""
        self._loaded = tables is None
        self._base = 0
        """Subtrees held in memory are those completed after this leaf."""
        self._levels: list[bytearray] = []
        """The hashes at level `TILE_LEVEL + n` held in memory in `_levels[n]`, left to right."""
        self._pending: list[tuple[int, int, bytes]] = []
        self._frontier: CompactRange | None = CompactRange(self._scheme, on_merge=self._keep)
        self._handed: list[Link] = []
        """How the rows this handle appended past `size` link, as its appends handed them
        over (`note`): the write path extends from them instead of reading the rows back."""

    @property
    def persists(self) -> bool:
        """Whether the index writes what it adds to its tables (else it keeps it in memory)."""
        return self._tables is not None and self._tables.write is not None

    # -- keeping up with the log -----------------------------------------------------------

    def refresh(self) -> int:
        """The log's head now; the index adopts what its tables hold, and starts over if the
        log no longer has what it covers."""
        head = self.log.head().position
        if not self._loaded or self.persists:
            self._adopt(head)
        if self.size > head:
            self.start_over(f"the index covers {self.size} events, the log has {head}")
        elif self.size and self.stored_chain(self.size) != self.chain_value.hex():
            self.start_over(f"the chain hash at position {self.size} changed")
        return head

    def note(self, links: Sequence[Link]) -> None:
        """Keep how the rows just appended link into the chain. Rows noted before at the
        same positions (their write rolled back) are forgotten."""
        if not links:
            return
        handed = self._handed
        if handed and handed[-1].position >= links[0].position:
            first = links[0].position
            handed = self._handed = [link for link in handed if link.position < first]
        handed += links
        if len(handed) > 2 * KEPT_LINKS:
            del handed[:-KEPT_LINKS]

    def follow(self, head: int) -> None:
        """Extend the kept index to `head`, inside the write that appended up to it; leave
        an index that is missing or far behind to be rebuilt where no write waits. The
        chain value where the index ends is checked by the first row linked from it; an
        index whose next rows do not link starts over. A failure here never fails the
        write: the index is disposable."""
        try:
            try:
                if self._kept_state() != (self.size, self.chain_value):
                    self.refresh()
                if head - self.size <= FOLLOW_LIMIT:
                    self.extend(head, walk=False)
            except CorruptLogError as exc:
                self.start_over(str(exc))
        except StorageError as exc:
            log.warning("merkle_index_behind", reason=str(exc))

    def extend(self, target: int, *, walk: bool = True, progress: Progress | None = None) -> None:
        """Verify and index the whole tiles among the first `target` leaves: each row walked
        (`ChainWalker`), or, without `walk`, only its leaf linked to the chain value stored
        with it (what the tree needs, at half the cost: the write path's choice);
        `progress(done, target)` after each batch."""
        target -= target % TILE
        while self.size < target:
            start = self.size
            end = min(target, start - start % BATCH + BATCH)
            found = self._verified_leaves if walk else self._linked_leaves
            leaves, chain_value = found(start, end)
            frontier = self._frontier_now()
            try:
                for offset in range(0, len(leaves), TILE):
                    tile = perfect_hash(leaves[offset : offset + TILE], self._scheme)
                    self._keep(TILE_LEVEL, (start + offset) >> TILE_LEVEL, tile)
                    frontier.push(TILE_LEVEL, tile)
                self._flush(end, chain_value)
            except BaseException:
                self._pending.clear()
                self._frontier, self._loaded = None, False
                raise
            self.size, self.chain_value = end, chain_value
            if progress is not None:
                progress(end, target)
        self._handed = [link for link in self._handed if link.position > self.size]

    def start_over(self, reason: str) -> None:
        """Forget every subtree, saying why (`reset`)."""
        log.warning("merkle_index_rebuild", reason=reason)
        self.reset()

    def reset(self) -> None:
        """Forget every subtree (and empty the tables, where it writes them)."""
        self.size, self.chain_value, self.walked = 0, self._genesis, True
        self._base = 0
        self._levels.clear()
        self._pending.clear()
        self._frontier = CompactRange(self._scheme, on_merge=self._keep)
        tables = self._tables
        if tables is not None and tables.write is not None:
            with tables.write():
                self._create(tables.db)
                tables.db.execute(sql.NODES_CLEAR)
                tables.db.execute(sql.STATE_PUT, (VERSION, 0, self._genesis.hex()))
            self._loaded = True

    def _adopt(self, head: int) -> None:
        """Take up the index its tables hold, if the log still has what it covers."""
        found = self._kept_state()
        self._loaded = True
        if found == (self.size, self.chain_value):
            return
        if found is None or found[0] > head or self.stored_chain(found[0]) != found[1].hex():
            if self.persists and found is None and not self._has_tables():
                log.info("merkle_index_created")
                self.reset()
            elif self.persists:
                self.start_over("the kept index is incomplete, or does not match the log")
            return
        self.size, self.chain_value = found
        self.walked = self.size == 0
        self._base = self.size
        self._levels.clear()
        self._frontier = None

    def _kept_state(self) -> tuple[int, bytes] | None:
        """The size and chain value the tables record, if they hold a usable index."""
        tables = self._tables
        if tables is None:
            return None
        if len(self._has_tables()) != len(sql.TABLES):
            return None
        with tables.read():
            row = sql.STATE_GET.first(tables.db)
        if row is None or row.version != VERSION:
            return None
        size, chain_hash = row.size, row.chain_hash
        if type(size) is not int or size < 0 or size % TILE or not isinstance(chain_hash, str):
            return None
        try:
            value = bytes.fromhex(chain_hash)
        except ValueError:
            return None
        return (size, value) if len(value) == HASH_SIZE else None

    def _has_tables(self) -> list[sql.TableName]:
        """The index's tables that exist."""
        tables = self._tables
        if tables is None:
            return []
        with tables.read():
            return sql.INDEX_TABLES.rows(tables.db)

    def _flush(self, size: int, chain_value: bytes) -> None:
        """Write the subtrees added, and how far the index reaches, in one transaction."""
        tables = self._tables
        if tables is None or tables.write is None:
            return
        with tables.write():
            self._create(tables.db)
            tables.db.executemany(sql.NODE_PUT, self._pending)
            tables.db.execute(sql.STATE_PUT, (VERSION, size, chain_value.hex()))
        self._pending.clear()

    @staticmethod
    def _create(db: Database) -> None:
        db.execute(sql.NODES_DDL)
        db.execute(sql.STATE_DDL)

    def _frontier_now(self) -> CompactRange:
        """The subtrees covering the first `size` leaves, read from the index if need be."""
        if self._frontier is None:
            frontier = CompactRange(self._scheme, on_merge=self._keep)
            wanted = pieces(0, self.size)
            found = self._stored(wanted)
            for node in wanted:
                frontier.push(node[0], found[node])
            self._frontier = frontier
        return self._frontier

    def _keep(self, level: int, index: int, node: bytes) -> None:
        """Store the subtree `(level, index)`: always the next one at its level."""
        if self.persists:
            self._pending.append((level, index, node))
            return
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
        for level, node in self._frontier_now().nodes():
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
        """The indexed hashes of `nodes`: from memory, else from the tables."""
        found: dict[Node, bytes] = {}
        missing = []
        for level, index in nodes:
            row = level - TILE_LEVEL
            offset = (index - (self._base >> level)) * HASH_SIZE
            if offset >= 0 and row < len(self._levels) and offset < len(self._levels[row]):
                found[level, index] = bytes(self._levels[row][offset : offset + HASH_SIZE])
            else:
                missing.append((level, index))
        if missing:
            found.update(self._kept(missing))
        return found

    def _kept(self, nodes: Sequence[Node]) -> dict[Node, bytes]:
        tables = self._tables
        if tables is None:
            raise MerkleIndexError("the Merkle index holds no subtree kept in memory")
        found: dict[Node, bytes] = {}
        with tables.read():
            for node in nodes:
                row = sql.NODE_GET.first(tables.db, node)
                value = None if row is None else row.hash
                if not isinstance(value, bytes) or len(value) != HASH_SIZE:
                    raise MerkleIndexError(
                        f"the Merkle index kept beside the read model lacks the subtree {node} "
                        "or holds something else there; it is rebuilt from the log"
                    )
                found[node] = value
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

    def _linked_leaves(self, start: int, end: int) -> tuple[list[bytes], bytes]:
        """Leaf hashes of positions start+1..end, each linked from the one before to the
        chain value stored with it: as the appends handed them over when they link on from
        the index's chain value to the last row noted, else read back from the rows."""
        handed = self._handed_leaves(start, end)
        if handed is not None:
            return handed
        scheme = self._scheme
        leaves: list[bytes] = []
        chain_value = self.chain_value
        position = start
        for row in self.log.scan(after=start, until=end):
            leaf = row.leaf or scheme.leaf_hash(row.body)
            chain_value = scheme.link(chain_value, leaf)
            position += 1
            if row.position != position or chain_value != row.chain_hash:
                raise CorruptLogError(
                    f"cannot index the log: row {position} does not link; run verify",
                    position=position,
                )
            leaves.append(leaf)
        if position != end:
            raise CorruptLogError(
                f"cannot index the log: row {position + 1} is missing; run verify",
                position=position + 1,
            )
        return leaves, chain_value

    def _handed_leaves(self, start: int, end: int) -> tuple[list[bytes], bytes] | None:
        """Leaf hashes of positions start+1..end and the chain value at `end`, from the links
        noted, if they run unbroken from the index's chain value at `start` through the last
        one noted: the current append's, which links on from the head it read from the file.
        So a noted row its write rolled back, where another writer wrote since, breaks the
        run, and the rows are read back instead."""
        handed = self._handed
        skip = next((i for i, link in enumerate(handed) if link.position > start), len(handed))
        run = handed[skip:]
        if len(run) < end - start:
            return None
        chain_value = self.chain_value
        for position, link in enumerate(run, start + 1):
            if link.position != position or link.previous != chain_value:
                return None
            chain_value = link.chain
        used = run[: end - start]
        return [link.leaf for link in used], used[-1].chain

    def _verified_leaves(self, start: int, end: int) -> tuple[list[bytes], bytes]:
        """Leaf hashes of positions start+1..end, after walking their chain."""
        return verified_leaves(self.log, self.chain_value, start, end)


def verified_leaves(
    event_log: EventLog, chain_value: bytes, start: int, end: int
) -> tuple[list[bytes], bytes]:
    """Leaf hashes of positions start+1..end, after walking their chain from `chain_value`
    (`eventlog.ChainWalker`), and the chain value at `end`; `CorruptLogError` at a row that
    fails or is missing."""
    leaves: list[bytes] = []
    walker = ChainWalker(event_log.log_format, chain_value, position=start)
    try:
        walker.walk(event_log.scan(after=start, until=end), on_leaf=leaves.append)
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


class MerkleTip:
    """The Merkle root and chain value at the log's head, from rows walked and verified
    here, in O(log n) memory (a compact range): a checkpoint's answer where the index would
    hold every subtree in memory. Later calls walk only the rows appended since; a log
    whose history changed under it is walked again from the start."""

    def __init__(self, event_log: EventLog) -> None:
        self.log = event_log
        self._genesis = genesis_of(event_log)
        self.size = 0
        self.chain_value = self._genesis
        self._range = CompactRange(event_log.log_format.chain)

    def at(self, head: int, progress: Progress | None = None) -> tuple[bytes, bytes]:
        """(root, chain value) over the first `head` leaves; `progress(done, head)` after
        each batch walked."""
        if self.size > head or (
            self.size and chain_at(self.log, self.size) != self.chain_value.hex()
        ):
            log.warning("merkle_tip_rewalk", size=self.size, head=head)
            self.size, self.chain_value = 0, self._genesis
            self._range = CompactRange(self.log.log_format.chain)
        while self.size < head:
            end = min(head, self.size - self.size % BATCH + BATCH)
            leaves, chain_value = verified_leaves(self.log, self.chain_value, self.size, end)
            self._range.add_leaves(leaves)
            self.size, self.chain_value = end, chain_value
            if progress is not None:
                progress(end, head)
        return self._range.root(), self.chain_value


def in_log_file(event_log: EventLog, *, writable: bool) -> IndexTables:
    """The index's tables in a SQLite log's own file, beside its read model; written only
    by a handle that may write the log."""
    db = database_in_log_file(event_log)
    write = event_log.transaction if writable else None
    return IndexTables(db, read=event_log.snapshot, write=write)


def in_cache(db: Database) -> IndexTables:
    """The index's tables in a host's cache file (`projections._database.CacheDatabase`),
    written in either mode: the cache is a copy of the log, not evidence."""
    if not isinstance(db, CacheDatabase):
        raise StorageError(f"a Merkle index in a host's cache needs its cache, not {db!r}")
    return IndexTables(db, read=db.read, write=db.write)
