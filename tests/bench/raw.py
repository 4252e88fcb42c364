"""The baselines: plain sqlite3 on the same disk, with the pragmas our own connection uses."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path

from eventlog import EventLog, SQLiteEventLog
from tests.bench.corpus import Memory

PRAGMAS = ("journal_mode", "synchronous", "cache_size", "temp_store", "wal_autocheckpoint")

LEGACY_DDL = """CREATE TABLE IF NOT EXISTS memory (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    type TEXT NOT NULL,
    content TEXT NOT NULL,
    tags TEXT,
    importance REAL DEFAULT 1.0,
    task_id TEXT,
    created_at REAL NOT NULL,
    source_agent TEXT DEFAULT '',
    source_model TEXT DEFAULT '',
    source_adapter TEXT
)"""
"""The row of the system factledger replaces: comma-joined tags, one row per entry."""

LEGACY_INSERT = (
    "INSERT INTO memory (type, content, tags, importance, task_id, created_at, source_adapter) "
    "VALUES (?, ?, ?, ?, ?, ?, ?)"
)
LEGACY_RELEVANT = (
    "SELECT id, type, content, tags, importance, task_id, created_at, source_adapter, "
    "(',' || tags || ',' LIKE ?) + (',' || tags || ',' LIKE ?) + (',' || tags || ',' LIKE ?) "
    "AS shared FROM memory WHERE shared > 0 "
    "ORDER BY shared DESC, importance DESC, id DESC LIMIT ?"
)
"""The replaced store's way to rank by tags: a scan matching comma-joined tags (3 tags)."""

LegacyRow = tuple[str, str, str, float, str | None, float, str | None]


def pragmas_of(log: EventLog) -> dict[str, str]:
    """The pragmas our own connection runs with, read back from it."""
    assert isinstance(log, SQLiteEventLog)
    with log.snapshot():
        return {
            name: str(log.connection.execute(f"PRAGMA {name}").fetchone()[0]) for name in PRAGMAS
        }


def connect(path: Path, pragmas: dict[str, str], *, read_only: bool = False) -> sqlite3.Connection:
    """A plain sqlite3 connection configured exactly as `pragmas` say."""
    if read_only:
        conn = sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True, isolation_level=None)
    else:
        conn = sqlite3.connect(path, isolation_level=None)
    for name in PRAGMAS:
        if name == "journal_mode" and read_only:
            continue
        conn.execute(f"PRAGMA {name}={pragmas[name]}")
    actual = {name: str(conn.execute(f"PRAGMA {name}").fetchone()[0]) for name in PRAGMAS}
    if actual != pragmas:
        raise RuntimeError(f"baseline pragmas differ from ours: {actual} != {pragmas}")
    return conn


def legacy_table(path: Path, pragmas: dict[str, str]) -> sqlite3.Connection:
    """A fresh database holding the legacy `memory` table."""
    conn = connect(path, pragmas)
    conn.execute(LEGACY_DDL)
    return conn


def legacy_row(memory: Memory) -> LegacyRow:
    """A memory as the legacy table stores it."""
    return (
        memory.type,
        memory.content,
        ",".join(memory.tags),
        memory.importance,
        memory.task_id,
        time.time(),
        memory.source_adapter,
    )


def insert_each(conn: sqlite3.Connection, memories: Sequence[Memory]) -> None:
    """One row per transaction, taken with BEGIN IMMEDIATE as our log takes it."""
    for memory in memories:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(LEGACY_INSERT, legacy_row(memory))
        conn.execute("COMMIT")


def insert_batch(conn: sqlite3.Connection, memories: Sequence[Memory]) -> None:
    """All rows in one transaction, with executemany."""
    conn.execute("BEGIN IMMEDIATE")
    conn.executemany(LEGACY_INSERT, [legacy_row(memory) for memory in memories])
    conn.execute("COMMIT")


def scan(conn: sqlite3.Connection, statement: str) -> int:
    """Read every row a query returns, in chunks; return how many there were."""
    cursor = conn.execute(statement)
    count = 0
    while chunk := cursor.fetchmany(1024):
        count += len(chunk)
    return count


def relevant(conn: sqlite3.Connection, tags: Sequence[str], limit: int) -> list[tuple[object, ...]]:
    """The legacy ranked tag query for exactly three tags."""
    patterns = [f"%,{tag},%" for tag in tags]
    return conn.execute(LEGACY_RELEVANT, (*patterns, limit)).fetchall()


def row_work_seconds(source: Path, scratch: Path, tables: Sequence[str]) -> float:
    """Seconds plain sqlite3 takes for the row work any refold-and-compare must do, with no
    decoding and no fold logic: read each table of `source` once, insert its rows into a copy
    of the table in a fresh `scratch` file (no journal, no fsync, as our shadow), and read
    them back from there. Chunked, so memory stays flat."""
    live = sqlite3.connect(source.resolve().as_uri() + "?mode=ro", uri=True, isolation_level=None)
    shadow = sqlite3.connect(scratch, isolation_level=None)
    try:
        shadow.execute("PRAGMA journal_mode=OFF")
        shadow.execute("PRAGMA synchronous=OFF")
        start = time.perf_counter()
        for table in tables:
            for (ddl,) in live.execute(
                "SELECT sql FROM sqlite_master WHERE tbl_name = ? AND sql IS NOT NULL "
                "ORDER BY type = 'index'",
                (table,),
            ):
                shadow.execute(ddl)
            columns = len(live.execute(f"SELECT * FROM {table} LIMIT 0").description)
            insert = f"INSERT INTO {table} VALUES ({', '.join('?' * columns)})"
            shadow.execute("BEGIN")
            cursor = live.execute(f"SELECT * FROM {table}")
            while chunk := cursor.fetchmany(4096):
                shadow.executemany(insert, chunk)
            shadow.execute("COMMIT")
            scan(shadow, f"SELECT * FROM {table}")
        return time.perf_counter() - start
    finally:
        live.close()
        shadow.close()
        scratch.unlink(missing_ok=True)
