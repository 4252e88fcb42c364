"""Stored hashes of a log's complete Merkle subtrees, so a proof reads a few rows, not the log.

The index holds every perfect, aligned subtree of at least `TILE` leaves over rows it has
verified, and its own checkpoint: the size it covers and the log's chain hash there. It is
caught up lazily from `log.scan()` (the stored bytes) when a proof or a checkpoint asks for
it, never on the write path. When the log's chain hash at the index's size no longer matches
(a rewritten history), the index is dropped and rebuilt. A file this process cannot write
gets a scratch index in memory instead, built for the one request.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import Any, Protocol

from eventlog import (
    ChainBreak,
    CorruptLogError,
    EventLog,
    InvalidInputError,
    ReadSnapshot,
    StorageError,
    open_log,
)
from eventlog.chain import genesis, leaf_hash
from eventlog.logs import get_logger
from eventlog.verify import ChainWalker
from projections import TableWriter
from projections.scratch import ScratchDatabase
from replay.merkle import CompactRange, Node, Span, fold, perfect_hash, pieces
from replay.readers import release, shared_reader

log = get_logger("factledger.replay")

TILE_LEVEL = 4
TILE = 1 << TILE_LEVEL
"""Subtrees below this many leaves are hashed from the stored rows on demand."""
BATCH = 1 << 16
"""Leaves verified and indexed per write transaction while catching up."""

_DDL = (
    """CREATE TABLE IF NOT EXISTS fl_merkle_node (
        level INTEGER NOT NULL,
        idx INTEGER NOT NULL,
        hash BLOB NOT NULL,
        PRIMARY KEY (level, idx)
    ) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS fl_merkle_index (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        tile_level INTEGER NOT NULL,
        size INTEGER NOT NULL,
        chain_hash BLOB NOT NULL
    )""",
)
_SQL_TABLES = (
    "SELECT count(*) FROM sqlite_master WHERE type = 'table' "
    "AND name IN ('fl_merkle_node', 'fl_merkle_index')"
)
_SQL_STATE_GET = "SELECT tile_level, size, chain_hash FROM fl_merkle_index WHERE id = 1"
_SQL_STATE_PUT = (
    "INSERT OR REPLACE INTO fl_merkle_index (id, tile_level, size, chain_hash) VALUES (1, ?, ?, ?)"
)
_SQL_NODE_PUT = "INSERT OR REPLACE INTO fl_merkle_node (level, idx, hash) VALUES (?, ?, ?)"
_SQL_NODES_CLEAR = "DELETE FROM fl_merkle_node"
_SQL_NODE_GET = "SELECT level, idx, hash FROM fl_merkle_node WHERE level = ? AND idx = ?"
_UNION_LIMIT = 400
"""Point lookups per compound SELECT (SQLite allows 500)."""

Row = tuple[Any, ...]


class _Tables(Protocol):
    """Where the index lives: beside the log, or in a scratch database."""

    def query(self, sql: str, params: Sequence[object] = ()) -> list[Row]: ...

    def writing(self) -> AbstractContextManager[TableWriter]: ...

    def held(self) -> AbstractContextManager[object]: ...


class _LogTables:
    """Index tables in the log's own file, written in the log's transactions."""

    def __init__(self, event_log: EventLog) -> None:
        self._log = event_log
        self._snapshot: ReadSnapshot | None = None

    def query(self, sql: str, params: Sequence[object] = ()) -> list[Row]:
        if self._snapshot is not None:
            return self._snapshot.execute(sql, params)
        with self._log.snapshot() as snap:
            return snap.execute(sql, params)

    def writing(self) -> AbstractContextManager[TableWriter]:
        return self._log.transaction()

    @contextmanager
    def held(self) -> Iterator[ReadSnapshot]:
        """One read snapshot for every query until the block ends."""
        with self._log.snapshot() as snap:
            self._snapshot = snap
            try:
                yield snap
            finally:
                self._snapshot = None


class _ScratchTables:
    """Index tables in memory, for a file this process may not write."""

    def __init__(self, db: ScratchDatabase) -> None:
        self._db = db
        for statement in _DDL:
            db.execute(statement)

    def query(self, sql: str, params: Sequence[object] = ()) -> list[Row]:
        return self._db.execute(sql, params)

    @contextmanager
    def writing(self) -> Iterator[TableWriter]:
        yield self._db

    def held(self) -> AbstractContextManager[object]:
        return nullcontext()


class MerkleIndex:
    """The subtree hashes of one log, covering its first `size` leaves."""

    def __init__(self, event_log: EventLog, tables: _Tables, head: int) -> None:
        self.log = event_log
        self.head = head
        """The log's last position when the index was opened."""
        self._tables = tables
        self._genesis = genesis(event_log.log_id)
        self.size = 0
        self.chain_value = self._genesis

    # -- reading -----------------------------------------------------------------------

    def span_hashes(self, spans: Sequence[Span], size: int) -> list[bytes]:
        """MTH over each span of leaves (subtrees RFC 6962 builds) in the tree of `size`."""
        wanted = [pieces(begin, end) for begin, end in spans]
        found = self._hashes({node for parts in wanted for node in parts}, size)
        return [fold([found[node] for node in parts]) for parts in wanted]

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
                    found[level, index] = perfect_hash(leaves[first : first + (1 << level)])
        return found

    def _tile_leaves(self, tile: int, size: int, indexed: bytes | None) -> list[bytes]:
        """Leaf hashes of one tile, read from the stored rows and checked against the index."""
        begin = tile * TILE
        end = begin + TILE if indexed is not None else min(begin + TILE, size)
        leaves = [leaf_hash(row.body) for row in self.log.scan(begin, end)]
        if len(leaves) != end - begin or (indexed is not None and perfect_hash(leaves) != indexed):
            raise CorruptLogError(
                f"rows {begin + 1} to {end} are missing or changed since they were verified; "
                "run verify",
                position=begin + 1,
            )
        return leaves

    def _stored(self, nodes: Iterable[Node]) -> dict[Node, bytes]:
        keys = sorted(nodes)
        found: dict[Node, bytes] = {}
        for first in range(0, len(keys), _UNION_LIMIT):
            batch = keys[first : first + _UNION_LIMIT]
            sql = " UNION ALL ".join([_SQL_NODE_GET] * len(batch))
            for level, index, value in self._tables.query(sql, [v for key in batch for v in key]):
                found[int(level), int(index)] = bytes(value)
        missing = [key for key in keys if key not in found]
        if missing:
            raise StorageError(
                f"the Merkle index lacks subtree {missing[0]}; drop the fl_merkle_index table "
                "to have it rebuilt"
            )
        return found

    def tip(self) -> tuple[bytes, bytes]:
        """The Merkle root and chain value at the head, walking the rows past the index."""
        leaves, chain_value = self._verified_leaves(self.size, self.head)
        frontier = self._frontier(self.size)
        frontier.add_leaves(leaves)
        return frontier.root(), chain_value

    # -- catching up -------------------------------------------------------------------

    def reading(self) -> AbstractContextManager[object]:
        """Serve every read from one snapshot until the block ends."""
        return self._tables.held()

    def covers(self, target: int) -> bool:
        """Whether the stored index already covers `target` leaves of this very log."""
        if self._tables.query(_SQL_TABLES)[0][0] != len(_DDL):
            return False
        rows = self._tables.query(_SQL_STATE_GET)
        if not rows or rows[0][0] != TILE_LEVEL or rows[0][1] < target:
            return False
        size, chain_value = int(rows[0][1]), bytes(rows[0][2])
        if self._mismatch(size, chain_value) is not None:
            return False
        self.size, self.chain_value = size, chain_value
        return True

    def catch_up(self, target: int) -> None:
        """Verify and index whole tiles up to leaf `target` (a multiple of `TILE`)."""
        while True:
            self._load()
            if self.size >= target:
                return
            start, chain_value = self.size, self.chain_value
            end = min(target, start - start % BATCH + BATCH)
            leaves, end_chain = self._verified_leaves(start, end)
            nodes = self._new_nodes(start, leaves)
            with self._tables.writing() as writer:
                if self._state(writer) != (start, chain_value):
                    continue
                writer.executemany(_SQL_NODE_PUT, nodes)
                writer.execute(_SQL_STATE_PUT, (TILE_LEVEL, end, end_chain))

    def _load(self) -> None:
        """Read the index's checkpoint, resetting the index if the log no longer matches it."""
        with self._tables.writing() as writer:
            for statement in _DDL:
                writer.execute(statement)
            state = self._state(writer)
            problem = self._mismatch(*state) if state is not None else None
            if state is None or problem is not None:
                if problem is not None:
                    log.warning("merkle_index_rebuild", reason=problem)
                writer.execute(_SQL_NODES_CLEAR)
                writer.execute(_SQL_STATE_PUT, (TILE_LEVEL, 0, self._genesis))
                state = (0, self._genesis)
        self.size, self.chain_value = state

    def _state(self, reader: TableWriter) -> tuple[int, bytes] | None:
        rows = reader.execute(_SQL_STATE_GET)
        if not rows or rows[0][0] != TILE_LEVEL:
            return None
        return int(rows[0][1]), bytes(rows[0][2])

    def _mismatch(self, size: int, chain_value: bytes) -> str | None:
        """Why the stored index no longer describes this log, or None."""
        if size > self.head:
            return f"the index covers {size} events, the log has {self.head}"
        if self.chain_at(size) != chain_value:
            return f"the chain hash at position {size} changed"
        return None

    def chain_at(self, position: int) -> bytes | None:
        """The stored chain value at `position` (the genesis at 0), or None if it is gone."""
        if position == 0:
            return self._genesis
        row = next(iter(self.log.scan(position - 1, position)), None)
        return None if row is None else row.chain_hash

    def _verified_leaves(self, start: int, end: int) -> tuple[list[bytes], bytes]:
        """Leaf hashes of positions start+1..end, after walking their chain."""
        leaves: list[bytes] = []
        walker = ChainWalker(self.chain_value, position=start)
        try:
            walker.walk(self.log.scan(start, end), on_leaf=leaves.append)
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

    def _frontier(
        self, size: int, on_merge: Callable[[int, int, bytes], object] | None = None
    ) -> CompactRange:
        """The stored subtrees that cover the first `size` leaves (a multiple of `TILE`)."""
        frontier = CompactRange(on_merge=on_merge)
        present = self._stored(pieces(0, size))
        for node in pieces(0, size):
            frontier.push(node[0], present[node])
        return frontier

    def _new_nodes(self, start: int, leaves: list[bytes]) -> list[tuple[int, int, bytes]]:
        """The tiles and larger subtrees that the leaves after `start` complete."""
        nodes: list[tuple[int, int, bytes]] = []
        frontier = self._frontier(start, lambda *node: nodes.append(node))
        for offset in range(0, len(leaves), TILE):
            tile = perfect_hash(leaves[offset : offset + TILE])
            nodes.append((TILE_LEVEL, (start + offset) >> TILE_LEVEL, tile))
            frontier.push(TILE_LEVEL, tile)
        return nodes


@contextmanager
def open_index(
    db_path: str | os.PathLike[str], *, size: int | None = None, log_id: str | None = None
) -> Iterator[MerkleIndex]:
    """The index of the log at `db_path`, caught up to cover a tree of `size` (default: head).

    Refuses a log whose id is not `log_id` (when given) or that has fewer than `size` events.
    Proofs read through a kept handle (`replay.readers`); catching the index up in the file
    writes through a handle of its own, opened after the kept one is released, so the writer
    is the last to close (and folds the WAL back in) as it would be without the kept handle.
    """
    with shared_reader(db_path) as reader:
        tables = _LogTables(reader)
        with tables.held() as snap:
            head = snap.head().position
            wanted = _wanted(db_path, reader.log_id, head, size, log_id)
            index = MerkleIndex(reader, tables, head)
            if index.covers(wanted - wanted % TILE):
                yield index
                return
        if not _writable(Path(db_path)):
            with ScratchDatabase() as scratch:
                index = MerkleIndex(reader, _ScratchTables(scratch), head)
                index.catch_up(wanted - wanted % TILE)
                with index.reading():
                    yield index
            return
    release(db_path)
    writer = open_log(db_path)
    try:
        index = MerkleIndex(writer, _LogTables(writer), head)
        index.catch_up(head - head % TILE)
        with index.reading():
            yield index
    finally:
        writer.close()


def _wanted(
    db_path: str | os.PathLike[str], found_id: str, head: int, size: int | None, log_id: str | None
) -> int:
    """The tree size asked for, after refusing another log or a size past the head."""
    if log_id is not None and found_id != log_id:
        raise InvalidInputError(
            f"the checkpoint is for log {log_id}, but {db_path} holds log {found_id}"
        )
    wanted = head if size is None else size
    if wanted > head:
        raise InvalidInputError(
            f"the log holds {head} events, fewer than the {wanted} the checkpoint "
            "covers; run verify with that checkpoint"
        )
    return wanted


def _writable(path: Path) -> bool:
    """Whether this process may write the database file (and its journal beside it)."""
    return os.access(path, os.W_OK) and os.access(path.resolve().parent, os.W_OK)
