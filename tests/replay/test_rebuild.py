"""rebuild: refold every projection into a shadow file, compare digests, swap on request."""

from __future__ import annotations

import importlib
import math
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from eventlog import (
    ConflictPolicySet,
    InvalidInputError,
    InvalidTypeError,
    MemoryAdded,
    NewEvent,
    QuarantineApplied,
    QuarantineReleased,
    StorageError,
    open_log,
)
from projections import (
    CrossTaskKB,
    SQLiteMemoryStore,
    load_persistent_memory,
    open_view,
)
from projections import _sql as sql
from projections._tables import table_digest, table_rows
from projections.internal import (
    ScratchDatabase,
)
from replay import Ledger, RebuildReport, rebuild
from replay.cli.output import to_json, to_text
from tests.histories import HISTORIES, play

rebuild_module = importlib.import_module("replay.rebuild")  # the package exports the function

StoreFactory = Callable[..., SQLiteMemoryStore]
TABLES = (
    "fl_memory",
    "fl_memory_tag",
    "fl_fact",
    "fl_fact_current",
    "fl_quarantine",
    "fl_quarantined",
    "fl_operator",
    "fl_unauthorized",
    "fl_import",
    "fl_unreadable",
    "fl_erasure",
    "fl_conflict_policy",
    "fl_fact_held",
    "fl_receipt",
    "fl_receipt_item",
    "fl_lineage_reader",
    "fl_lineage_source",
    "fl_lineage_write",
)


def populate(store: SQLiteMemoryStore) -> None:
    """A small history touching every projector table."""
    kb = CrossTaskKB(store, run_id="run-1", producer_task_id="task-a")
    store.add("learning", "first", ["api", "db"], source_adapter="codex")
    store.add_many([{"type": "decision", "content": "second", "tags": ["api"]}])
    kb.publish("api", "base_url", "v1", scope="project")
    kb.publish("api", "base_url", "v2", scope="project", source_adapter="codex")
    load_persistent_memory(store, ["api"], task_id="task-b")
    store.add("learning", "derived", ["db"], task_id="task-b", derived_from=[3])
    quarantine = store._append(
        [NewEvent(payload=QuarantineApplied(reason="r", match_source_adapter="codex"))]
    )[0]
    store._append(
        [NewEvent(payload=QuarantineReleased(quarantine_position=quarantine.position, reason="r"))]
    )
    store.decay_importance(0.5)
    store.remove(1)
    store._append([NewEvent(payload=ConflictPolicySet(tag="schema", on_conflict="hold"))])
    kb.publish("schema", "users", "v1", scope="project", source_adapter="codex")
    kb.publish("schema", "users", "v2", scope="project", source_adapter="gemini-cli")


def live_rows(db_path: Path) -> dict[str, list[tuple[Any, ...]]]:
    with open_view(db_path) as view, view.snapshot() as snap:
        return {table: list(table_rows(snap, table)) for table in TABLES}


def tamper(db_path: Path, statement: str) -> None:
    raw = sqlite3.connect(db_path)
    raw.execute(statement)
    raw.commit()
    raw.close()


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if ".rebuild-" in p.name)


def test_rebuild_matches_an_untouched_live_model(store: SQLiteMemoryStore, ledger: Ledger) -> None:
    """On an untouched database every table's live and rebuilt digests are equal."""
    populate(store)
    report = ledger.rebuild()
    head = store.event_log.head().position
    assert (True, head, head, False, None, []) == (
        report.matches,
        report.events,
        report.compared_at,
        report.swapped,
        report.swapped_at,
        report.stale_checkpoints,
    )
    assert list(TABLES) == [t.table for t in report.tables]
    assert all(t.live == t.rebuilt and t.matches for t in report.tables)
    assert report.seconds > 0 and report.events_per_second > 0


def test_rebuild_only_reads_when_not_swapping(
    db_path: Path, store: SQLiteMemoryStore, ledger: Ledger
) -> None:
    """Without swap, the live tables are left exactly as they were."""
    populate(store)
    before = live_rows(db_path)
    ledger.rebuild()
    assert before == live_rows(db_path)


def test_corrupted_live_table_is_reported(
    db_path: Path, store: SQLiteMemoryStore, ledger: Ledger
) -> None:
    """A live row changed behind the projector's back makes that table, and only it, differ."""
    populate(store)
    tamper(db_path, "UPDATE fl_memory SET content = 'poisoned' WHERE id = 2")
    report = ledger.rebuild()
    assert not report.matches
    assert ["fl_memory"] == [t.table for t in report.tables if not t.matches]


def test_swap_repairs_a_corrupted_table(
    db_path: Path, store: SQLiteMemoryStore, ledger: Ledger
) -> None:
    """swap=True replaces the live rows with the refold: changed, added and deleted rows."""
    populate(store)
    expected = live_rows(db_path)
    tamper(db_path, "UPDATE fl_memory SET content = 'poisoned' WHERE id = 2")
    tamper(db_path, "INSERT INTO fl_memory_tag (tag, entry_id) VALUES ('injected', 2)")
    tamper(db_path, "DELETE FROM fl_fact_current")
    report = ledger.rebuild(swap=True)
    assert (False, True) == (report.matches, report.swapped)
    assert expected == live_rows(db_path)
    assert ledger.rebuild().matches
    assert ["second"] == [e.content for e in store.list(type="decision")]


def test_swap_leaves_no_bytes_of_the_rows_it_replaced(
    db_path: Path, store: SQLiteMemoryStore, ledger: Ledger
) -> None:
    """The tables a swap replaces are emptied before they are dropped (memory stays bounded)
    and what they held is still overwritten: a planted row's text is nowhere in the file."""
    populate(store)
    marker = "planted-text-0123456789abcdef"
    tamper(db_path, f"UPDATE fl_memory SET content = '{marker}' WHERE id = 2")
    ledger.rebuild(swap=True)
    assert ledger.event_log.fold_wal()
    store.close()
    ledger.close()
    assert marker.encode() not in db_path.read_bytes()


def test_swap_recreates_a_dropped_table(
    db_path: Path, store: SQLiteMemoryStore, ledger: Ledger
) -> None:
    """A missing live table has no live digest; swap creates it again, indexes included."""
    populate(store)
    expected = live_rows(db_path)
    tamper(db_path, "DROP TABLE fl_fact")
    report = ledger.rebuild()
    assert [None] == [t.live for t in report.tables if t.table == "fl_fact"]
    ledger.rebuild(swap=True)
    assert expected == live_rows(db_path)
    raw = sqlite3.connect(db_path)
    indexes = raw.execute("SELECT name FROM sqlite_master WHERE tbl_name = 'fl_fact'").fetchall()
    raw.close()
    assert {("fl_fact_by_identity",)} <= set(indexes)


def test_lagging_checkpoints_are_reported_and_reset_by_swap(
    db_path: Path, store: SQLiteMemoryStore, ledger: Ledger
) -> None:
    """Events appended without projection leave checkpoints behind; swap folds them in."""
    store.add("learning", "projected")
    bare = open_log(db_path)
    bare.append(NewEvent(payload=MemoryAdded(type="learning", content="bare")))
    bare.close()
    report = ledger.rebuild()
    assert (False, ["knowledge", "receipts", "lineage"]) == (
        report.matches,
        report.stale_checkpoints,
    )
    swapped = ledger.rebuild(swap=True)
    assert 2 == swapped.swapped_at
    assert ledger.rebuild().matches
    raw = sqlite3.connect(db_path)
    checkpoints = raw.execute("SELECT name, position FROM fl_projector_checkpoint").fetchall()
    raw.close()
    assert {("knowledge", 2), ("receipts", 2), ("lineage", 2)} == set(checkpoints)


def test_appends_while_folding_are_compared(
    make_store: StoreFactory, monkeypatch: pytest.MonkeyPatch, ledger: Ledger
) -> None:
    """Events appended while the shadow is folded are caught up before the comparison: to
    the head of the snapshot the live side is read in."""
    store = make_store()
    store.add_many([{"type": "learning", "content": f"n{i}"} for i in range(5)])
    writer = make_store()
    monkeypatch.setattr(sql, "BATCH", 2)

    def append_once(position: int, head: int) -> None:
        if position == 2:
            writer.add("learning", "during the fold")

    report = ledger.rebuild(progress=append_once)
    assert (True, report.compared_at) == (report.matches, report.events)
    assert 6 == report.compared_at


def test_appends_before_the_swap_are_not_lost(
    make_store: StoreFactory, monkeypatch: pytest.MonkeyPatch, ledger: Ledger
) -> None:
    """Events appended after the comparison are folded inside the swap transaction."""
    store = make_store()
    populate(store)
    writer = make_store()
    kb = CrossTaskKB(writer, run_id="run-2", producer_task_id="late")
    compare = rebuild_module.compare_tables

    def compare_then_append(*args: Any) -> Any:
        result = compare(*args)
        writer.add("learning", "appended meanwhile", ["late"])
        kb.publish("api", "base_url", "v3", scope="project")
        return result

    monkeypatch.setattr(rebuild_module, "compare_tables", compare_then_append)
    report = ledger.rebuild(swap=True)
    head = store.event_log.head().position
    assert (head - 2, head, head) == (report.compared_at, report.swapped_at, report.events)
    monkeypatch.undo()
    assert ledger.rebuild().matches
    assert ["appended meanwhile"] == [e.content for e in store.list(tags=["late"])]
    fresh = CrossTaskKB(make_store(), run_id="run-3")
    assert ["v3"] == [f.value for f in fresh.subscribe("api", scope="project")]


def test_swapped_store_keeps_writing_consistently(make_store: StoreFactory, ledger: Ledger) -> None:
    """A store open across a swap keeps projecting inline into the swapped tables."""
    store = make_store()
    populate(store)
    ledger.rebuild(swap=True)
    store.add("learning", "after swap", ["api"])
    assert ledger.rebuild().matches
    assert "after swap" == store.list(limit=1)[0].content


def test_empty_log_rebuilds_to_empty_tables(store: SQLiteMemoryStore, ledger: Ledger) -> None:
    """A log with no events refolds into empty tables that match."""
    report = ledger.rebuild(swap=True)
    assert (0, True, 0) == (report.events, report.matches, report.swapped_at)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(operations=HISTORIES)
def test_rebuild_equals_live_after_random_histories(
    tmp_path: Path, operations: list[tuple[Any, ...]]
) -> None:
    """Whatever the history, the refold's digests equal the live model's, table by table."""
    path = tmp_path / f"{len(list(tmp_path.iterdir()))}.db"
    with SQLiteMemoryStore(path) as store:
        play(store, operations)
        report = rebuild(path)
        assert [] == [t.table for t in report.tables if not t.matches]
        assert report.matches
    assert [] == leftovers(tmp_path)


def test_shadow_file_is_removed_even_when_the_rebuild_fails(
    db_path: Path, store: SQLiteMemoryStore, monkeypatch: pytest.MonkeyPatch, ledger: Ledger
) -> None:
    """The temporary shadow beside the database is deleted on success and on failure."""
    populate(store)
    ledger.rebuild(swap=True)
    assert [] == leftovers(db_path.parent)

    def fail(*args: Any) -> Any:
        raise RuntimeError("boom")

    monkeypatch.setattr(rebuild_module, "compare_tables", fail)
    with pytest.raises(RuntimeError):
        ledger.rebuild(swap=True)
    assert [] == leftovers(db_path.parent)


def test_failed_swap_leaves_the_live_model_untouched(
    db_path: Path, store: SQLiteMemoryStore, monkeypatch: pytest.MonkeyPatch, ledger: Ledger
) -> None:
    """A swap that fails midway rolls back: live tables and checkpoints are as before."""
    populate(store)
    tamper(db_path, "UPDATE fl_memory SET content = 'poisoned' WHERE id = 2")
    before = live_rows(db_path)
    monkeypatch.setattr(sql, "TABLE_INSERT", "INSERT INTO {table} SELECT * FROM nowhere")
    with pytest.raises(StorageError):
        ledger.rebuild(swap=True)
    assert before == live_rows(db_path)


def test_missing_database_is_a_storage_error(tmp_path: Path) -> None:
    """A path with no database is refused without creating anything."""
    with pytest.raises(StorageError):
        rebuild(tmp_path / "missing.db")
    assert [] == list(tmp_path.iterdir())


def test_swap_must_be_a_bool(store: SQLiteMemoryStore, ledger: Ledger) -> None:
    """A truthy non-bool for swap is a type error, not a silent swap."""
    with pytest.raises(InvalidTypeError):
        ledger.rebuild(swap="yes")  # type: ignore[arg-type]


def test_report_renders_as_json_and_text(store: SQLiteMemoryStore, ledger: Ledger) -> None:
    """The report is a msgspec Struct the shared renderers print."""
    populate(store)
    report = ledger.rebuild()
    assert isinstance(report, RebuildReport)
    assert '"matches": true' in to_json(report)
    assert "fl_receipt_item" in to_text(report)


def test_table_digest_ignores_insertion_order_and_chunking(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Equal tables digest equally however their rows were written or chunked."""
    rows = [(i, f"v{i % 7}", i * 0.5) for i in range(40)]
    digests = set()
    for order, chunk in ((rows, 4096), (rows[::-1], 3), (rows[7:] + rows[:7], 16)):
        monkeypatch.setattr(sql, "BATCH", chunk)
        scratch = ScratchDatabase()
        scratch.execute("CREATE TABLE t (a INTEGER PRIMARY KEY, b TEXT, c REAL)")
        scratch.executemany("INSERT INTO t VALUES (?, ?, ?)", order)
        digests.add(table_digest(scratch, "t"))
        assert rows == list(table_rows(scratch, "t"))
        scratch.close()
    assert 1 == len(digests)


@pytest.mark.parametrize(
    "change",
    [("a", "x "), ("b", 3), ("c", math.nextafter(0.1, 1.0)), ("c", None)],
)
def test_table_digest_sees_every_value(change: tuple[str, object]) -> None:
    """Changing any one value of a row, even by one ulp, changes the digest."""
    scratch = ScratchDatabase()
    scratch.execute("CREATE TABLE t (a TEXT, b INTEGER, c REAL, PRIMARY KEY (a, b)) WITHOUT ROWID")
    scratch.executemany("INSERT INTO t VALUES (?, ?, ?)", [("x", 1, 0.1), ("y", 2, 0.2)])
    original = table_digest(scratch, "t")
    scratch.execute("UPDATE t SET c = ? WHERE a = 'x'", (0.1,))
    assert original == table_digest(scratch, "t")
    column, value = change
    scratch.execute(f"UPDATE t SET {column} = ? WHERE a = 'x'", (value,))
    assert original != table_digest(scratch, "t")


def test_tables_without_a_primary_key_are_refused() -> None:
    """Rows need a canonical order; a table without a primary key has none."""
    scratch = ScratchDatabase()
    scratch.execute("CREATE TABLE loose (a TEXT)")
    with pytest.raises(InvalidInputError, match="no primary key"):
        table_digest(scratch, "loose")
    with pytest.raises(InvalidInputError, match="missing"):
        table_digest(scratch, "absent")


def test_live_digests_see_drift_and_stale_checkpoints(
    db_path: Path, store: SQLiteMemoryStore, ledger: Ledger
) -> None:
    """The live digests are the live model's: equal when untouched, not after an edit."""
    populate(store)
    report = ledger.rebuild()
    head = store.event_log.head().position
    assert (True, head, []) == (report.matches, report.compared_at, report.stale_checkpoints)
    tamper(db_path, "UPDATE fl_fact SET value = 'poisoned' WHERE position = 4")
    tamper(db_path, "UPDATE fl_projector_checkpoint SET position = 1 WHERE name = 'receipts'")
    report = ledger.rebuild()
    assert ["fl_fact"] == [t.table for t in report.tables if not t.matches]
    assert ["receipts"] == report.stale_checkpoints
