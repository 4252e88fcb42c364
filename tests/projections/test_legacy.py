"""Opening a database of the replaced store imports its rows once, as events."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from eventlog import MemoryAdded, NewEvent, open_log
from projections import LegacyImportError, SQLiteMemoryStore, recall_memory

LEGACY_SCHEMA = """CREATE TABLE memory (
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


def legacy_file(path: Path, rows: list[tuple[object, ...]], schema: str = LEGACY_SCHEMA) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path)
    conn.execute(schema)
    conn.executemany(
        "INSERT INTO memory (id, type, content, tags, importance, task_id, created_at, "
        "source_agent, source_model, source_adapter) VALUES (?,?,?,?,?,?,?,?,?,?)",
        rows,
    )
    conn.commit()
    conn.close()


ROWS = [
    (7, "convention", "use ruff", "python,lint", 0.9, "task-a", 1700000100.5, "agent", "m", None),
    (3, "learning", "old", "", 1.0, None, 1700000000.0, "", "", ""),
    (9, "decision", "from codex", "api", 0.4, "task-b", 1700000200.0, "", "", "codex"),
]


def test_legacy_rows_become_events_in_created_order(db_path: Path) -> None:
    """Each legacy row becomes one event, oldest first, keeping its content, type, tags and
    importance, and its provenance as claims."""
    legacy_file(db_path, ROWS)
    with SQLiteMemoryStore(db_path) as store:
        entries = store.list()
        events = list(store.event_log.read())
    assert [3, 7, 9] == [e.payload.claims.id for e in events]  # type: ignore[union-attr]
    assert [3, 2, 1] == [e.id for e in entries]
    newest, middle, oldest = entries
    assert ("decision", ["api"], 0.4) == (newest.type, newest.tags, newest.importance)
    assert newest.claims is not None and middle.claims is not None
    assert ("task-b", 1700000200.0, "codex") == (
        newest.claims.task_id,
        newest.claims.created_at,
        newest.claims.source_adapter,
    )
    assert (["python", "lint"], "agent", "m", None) == (
        middle.tags,
        middle.claims.source_agent,
        middle.claims.source_model,
        middle.claims.source_adapter,
    )
    assert ([], None) == (oldest.tags, oldest.claims and oldest.claims.task_id)


def test_legacy_import_happens_once(db_path: Path) -> None:
    """Reopening never imports again, and the legacy table is left untouched."""
    legacy_file(db_path, ROWS)
    SQLiteMemoryStore(db_path).close()
    with SQLiteMemoryStore(db_path) as store:
        store.add("learning", "new")
    with SQLiteMemoryStore(db_path) as store:
        assert 4 == store.event_log.head().position
    raw = sqlite3.connect(db_path)
    assert sorted(r[:10] for r in ROWS) == sorted(raw.execute("SELECT * FROM memory").fetchall())


def test_legacy_table_without_the_columns_is_ignored(db_path: Path) -> None:
    """A table named memory of some other shape is not imported."""
    db_path.parent.mkdir(parents=True)
    sqlite3.connect(db_path).execute("CREATE TABLE memory (note TEXT)")
    with SQLiteMemoryStore(db_path) as store:
        assert 0 == store.event_log.head().position


def test_legacy_schema_without_provenance_columns_imports(db_path: Path) -> None:
    """The oldest legacy shape (no source_* columns) imports with untagged rows."""
    db_path.parent.mkdir(parents=True)
    conn = sqlite3.connect(db_path)
    conn.execute(
        "CREATE TABLE memory (id INTEGER PRIMARY KEY, type TEXT, content TEXT, tags TEXT, "
        "importance REAL, task_id TEXT, created_at REAL)"
    )
    conn.execute("INSERT INTO memory VALUES (1, 'learning', 'x', 'a, b', 1.0, NULL, 5.0)")
    conn.commit()
    with SQLiteMemoryStore(db_path) as store:
        [entry] = store.list()
    assert (["a", "b"], None) == (entry.tags, entry.source_adapter)


def test_unimportable_legacy_row_names_its_id_and_imports_nothing(db_path: Path) -> None:
    """A legacy row that cannot be represented stops the import with a clear error."""
    legacy_file(db_path, [*ROWS, (12, "gossip", "x", "", 1.0, None, 1700000300.0, "", "", None)])
    with pytest.raises(LegacyImportError, match=r"id=12.*unknown memory type .gossip."):
        SQLiteMemoryStore(db_path)
    raw = sqlite3.connect(db_path)
    assert [] == raw.execute("SELECT * FROM fl_events").fetchall()


def test_legacy_rows_are_written_now_by_the_opening_handle(db_path: Path) -> None:
    """The import's events carry the handle's actor and the log's clock; the rows' own fields
    are claims. No operator signed the import (the drop-in case, a handle with no adapter),
    so the entries read as written by the handle now, never as operator writes, flagged
    `unsigned_import`, and the default prompt keeps them out for that reason."""
    legacy_file(db_path, ROWS)
    with SQLiteMemoryStore(db_path, producer_task_id="migrate-1") as store:
        events = list(store.event_log.read())
        entries = {e.claims.id: e for e in store.list() if e.claims is not None}
        recall = recall_memory(store, ["api", "python"], task_id="reader-1")
    assert {"migrate-1"} == {e.producer_task_id for e in events}
    assert all(e.ts_ns > 1.7e18 for e in events)
    assert {(None, "migrate-1", True)} == {
        (e.source_adapter, e.task_id, e.unsigned_import) for e in entries.values()
    }
    assert all(e.created_at > 1.7e9 + 1000 for e in entries.values())
    assert ("", ()) == (recall.text, recall.included)
    assert {(2, "unsigned_import"), (3, "unsigned_import")} == {
        (x.position, x.reason) for x in recall.excluded
    }


def test_legacy_rows_opened_under_an_adapter_count_as_that_adapters(db_path: Path) -> None:
    """A handle with an adapter importing on open gets entries under its own adapter and
    producer, at import time; the claims are shown, not honoured."""
    legacy_file(db_path, ROWS)
    with SQLiteMemoryStore(db_path, source_adapter="gemini-cli", producer_task_id="t9") as store:
        entries = store.list()
    assert {("gemini-cli", "t9")} == {(e.source_adapter, e.task_id) for e in entries}
    assert all(e.created_at > 1.7e9 + 1000 for e in entries)
    assert {None, "codex"} == {e.claims.source_adapter for e in entries if e.claims}


def test_imports_written_before_claims_fold_as_they_did(db_path: Path) -> None:
    """An import event of an earlier version (its row's fields as the event's own provenance,
    `legacy_id` and `created_at` in the payload) still decodes and reads as before."""
    log = open_log(db_path)
    log.append(
        NewEvent(
            payload=MemoryAdded(
                type="learning", content="old", task_id="task-a", created_at=5.0, legacy_id=7
            ),
            producer_task_id="task-a",
            source_adapter="codex",
            event_id="legacy:7:abc",
            ts_ns=5_000_000_000,
        )
    )
    log.close()
    with SQLiteMemoryStore(db_path) as store:
        [entry] = store.list()
    assert ("codex", "task-a", 5.0, None) == (
        entry.source_adapter,
        entry.task_id,
        entry.created_at,
        entry.claims,
    )


@pytest.mark.parametrize(
    ("column", "value"),
    [(5, "task\u200ba"), (9, "claude code"), (9, "\u0441odex")],
    ids=["task-zero-width", "adapter-space", "adapter-cyrillic"],
)
def test_a_lookalike_claimed_name_stops_the_import_naming_the_row(
    db_path: Path, column: int, value: str
) -> None:
    """A claimed task id or adapter that only looks like a plain name is refused by row id."""
    row = list(ROWS[0])
    row[column] = value
    legacy_file(db_path, [tuple(row)])
    with pytest.raises(LegacyImportError, match=r"id=7"):
        SQLiteMemoryStore(db_path)
