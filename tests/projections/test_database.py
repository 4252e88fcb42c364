"""The read model's connections: a sealed scratch database and a legacy file are read-only
by SQLite's own rule (`PRAGMA query_only`), however a statement is written."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from eventlog import ReadOnlyStoreError, StorageError
from projections import (
    SQLiteMemoryStore,
)
from projections._database import open_read_only
from projections.internal import (
    ScratchDatabase,
)
from replay import as_of

WRITES = {
    "delete-behind-with": "WITH q AS (SELECT 1) DELETE FROM t",
    "update-behind-with": "WITH q AS (SELECT 1) UPDATE t SET v = 'edited'",
    "insert-behind-with": "WITH q AS (SELECT 1) INSERT INTO t VALUES (9, 'new')",
    "leading-comment": "/* SELECT */ DELETE FROM t",
    "replace-select": "REPLACE INTO t SELECT 1, 'edited'",
    "drop": "DROP TABLE t",
    "create": "CREATE TABLE u (x)",
    "turn-query-only-off": "PRAGMA query_only = OFF",
    "turn-query-only-off-quoted": 'PRAGMA main."query_only" = 0',
    "turn-query-only-off-empty": "PRAGMA query_only = ''",
    "turn-query-only-off-call": "PRAGMA query_only(false)",
}
ROWS = [(1, "one"), (2, "two")]


@pytest.fixture
def sealed() -> Iterator[ScratchDatabase]:
    scratch = ScratchDatabase()
    scratch.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT)")
    scratch.executemany("INSERT INTO t VALUES (?, ?)", ROWS)
    scratch.seal()
    yield scratch
    scratch.close()


@pytest.mark.parametrize("statement", WRITES.values(), ids=WRITES.keys())
def test_a_sealed_scratch_database_refuses_every_write(
    sealed: ScratchDatabase, statement: str
) -> None:
    """However a write begins (`WITH ... DELETE`, a comment, a pragma turning the rule off),
    it raises ReadOnlyStoreError and the rows stay as they were."""
    with pytest.raises(ReadOnlyStoreError, match="read-only"):
        sealed.execute(statement)
    assert ROWS == sealed.execute("SELECT k, v FROM t ORDER BY k")


def test_a_sealed_scratch_database_writes_no_other_file(
    sealed: ScratchDatabase, tmp_path: Path
) -> None:
    """`VACUUM INTO` and `ATTACH` would create a file beside whatever `query_only` guards:
    both are refused, and no file appears."""
    copy, attached = tmp_path / "copy.db", tmp_path / "attached.db"
    for statement in (f"VACUUM INTO '{copy}'", f"ATTACH DATABASE '{attached}' AS other"):
        with pytest.raises(ReadOnlyStoreError):
            sealed.execute(statement)
    assert [] == list(tmp_path.iterdir())


def test_a_sealed_scratch_database_refuses_executemany_and_still_reads(
    sealed: ScratchDatabase,
) -> None:
    """`executemany` is refused too; reads, `WITH` queries included, still work."""
    with pytest.raises(ReadOnlyStoreError):
        sealed.executemany("INSERT INTO t VALUES (?, ?)", [(5, "five")])
    assert [(2,)] == sealed.execute("WITH q AS (SELECT count(*) FROM t) SELECT * FROM q")
    assert [(1,)] == sealed.execute("PRAGMA query_only")


def test_an_unsealed_scratch_database_writes() -> None:
    """Only sealing makes a scratch database read-only: a fresh one folds as before."""
    with ScratchDatabase() as scratch:
        scratch.execute("CREATE TABLE t (k)")
        scratch.execute("WITH q AS (SELECT 1) INSERT INTO t SELECT * FROM q")
        assert [(1,)] == scratch.execute("SELECT k FROM t")


def test_a_view_of_the_past_refuses_a_write_through_its_snapshot(db_path: Path) -> None:
    """`as_of`'s view folds into a sealed scratch database: a statement run on its snapshot
    that deletes behind a `WITH` is refused, and the entry is still there."""
    with SQLiteMemoryStore(db_path) as store:
        store.add("learning", "kept", ["api"])
    view = as_of(db_path, position=1)
    try:
        with view.snapshot() as snap, pytest.raises(ReadOnlyStoreError):
            snap.execute("WITH q AS (SELECT 1) DELETE FROM fl_memory")
        assert ["kept"] == [entry.content for entry in view.list()]
    finally:
        view.close()


def test_a_legacy_file_is_opened_read_only(tmp_path: Path) -> None:
    """A legacy file is opened with `query_only` as well as `mode=ro`: a write behind a
    `WITH` is refused as a StorageError and the file is unchanged."""
    path = tmp_path / "legacy.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT)")
        conn.executemany("INSERT INTO t VALUES (?, ?)", ROWS)
    conn.close()
    db = open_read_only(path)
    try:
        with pytest.raises(StorageError):
            db.execute("WITH q AS (SELECT 1) DELETE FROM t")
        with pytest.raises(StorageError):
            db.execute("PRAGMA query_only = OFF")
        assert ROWS == db.execute("SELECT k, v FROM t ORDER BY k")
    finally:
        db.close()
