"""The Merkle index's SQL (`projections._merkle_index`): the hashes of a log's complete
subtrees, and how far they reach, kept beside the read model."""

from __future__ import annotations

from projections._sql import Columns, Query

NODES_TABLE = "fl_merkle_nodes"
STATE_TABLE = "fl_merkle_state"
TABLES = (NODES_TABLE, STATE_TABLE)

NODES_DDL = """CREATE TABLE IF NOT EXISTS fl_merkle_nodes (
    level INTEGER NOT NULL,
    idx INTEGER NOT NULL,
    hash BLOB NOT NULL,
    PRIMARY KEY (level, idx)
) WITHOUT ROWID"""
STATE_DDL = """CREATE TABLE IF NOT EXISTS fl_merkle_state (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    version INTEGER NOT NULL,
    size INTEGER NOT NULL,
    chain_hash TEXT NOT NULL
)"""


class NodeHash(Columns, frozen=True):
    """A subtree's hash as stored: anything but 32 bytes is a damaged index, not an error."""

    hash: object


class State(Columns, frozen=True):
    """How far the index reaches, as stored (checked before it is believed)."""

    version: object
    size: object
    chain_hash: object


class TableName(Columns, frozen=True):
    name: str


INDEX_TABLES = Query(
    "SELECT name FROM sqlite_master WHERE type = 'table' "
    "AND name IN ('fl_merkle_nodes', 'fl_merkle_state')",
    TableName,
)
NODE_GET = Query("SELECT hash FROM fl_merkle_nodes WHERE level = ? AND idx = ?", NodeHash)
NODE_PUT = "INSERT OR REPLACE INTO fl_merkle_nodes (level, idx, hash) VALUES (?, ?, ?)"
NODES_CLEAR = "DELETE FROM fl_merkle_nodes"
STATE_GET = Query("SELECT version, size, chain_hash FROM fl_merkle_state WHERE id = 1", State)
STATE_PUT = (
    "INSERT OR REPLACE INTO fl_merkle_state (id, version, size, chain_hash) VALUES (1, ?, ?, ?)"
)
