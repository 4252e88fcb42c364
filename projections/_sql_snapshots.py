"""The SQL of a read-model snapshot's own table (`projections._snapshots`): where it was
taken, for which log, by which projectors' code."""

from __future__ import annotations

from projections._sql import Columns, Query

META_TABLE = "fl_snapshot"
META_DDL = """CREATE TABLE IF NOT EXISTS fl_snapshot (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    format INTEGER NOT NULL,
    log_id TEXT NOT NULL,
    position INTEGER NOT NULL,
    chain_hash TEXT NOT NULL,
    written_head INTEGER NOT NULL,
    projectors TEXT NOT NULL
)"""
META_PUT = (
    "INSERT OR REPLACE INTO fl_snapshot "
    "(id, format, log_id, position, chain_hash, written_head, projectors) "
    "VALUES (1, ?, ?, ?, ?, ?, ?)"
)


class Meta(Columns, frozen=True):
    """A snapshot's meta row as stored: every field is checked before it is believed."""

    format: object
    log_id: object
    position: object
    chain_hash: object
    written_head: object
    projectors: object


META_GET = Query(
    "SELECT format, log_id, position, chain_hash, written_head, projectors "
    "FROM fl_snapshot WHERE id = 1",
    Meta,
)


class SchemaEntry(Columns, frozen=True):
    """One object of a database's schema (table, index, trigger, view), as SQLite keeps it."""

    type: object
    name: object
    tbl_name: object
    sql: object


SCHEMA = Query(
    "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name", SchemaEntry
)
