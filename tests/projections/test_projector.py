"""Projectors: inline folding, checkpoints, catch-up and rebuild; replay equals inline."""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from eventlog import MemoryAdded, NewEvent, open_log
from projections import (
    CrossTaskKB,
    SQLiteMemoryStore,
)
from projections._knowledge import KnowledgeProjector
from projections._projector import fold
from projections._tables import table_rows
from projections.internal import (
    ScratchDatabase,
    default_projectors,
)
from tests.histories import HISTORIES, Operation, play

StoreFactory = Callable[..., SQLiteMemoryStore]
KNOWLEDGE = KnowledgeProjector.version


def live_tables(store: SQLiteMemoryStore) -> dict[str, list[tuple[object, ...]]]:
    with store.snapshot() as snap:
        return {
            table: list(table_rows(snap, table))
            for projector in default_projectors(store.event_log.log_id)
            for table in projector.tables
        }


def refolded_tables(store: SQLiteMemoryStore) -> dict[str, list[tuple[object, ...]]]:
    scratch = ScratchDatabase()
    projectors = default_projectors(store.event_log.log_id)
    fold(scratch, projectors, store.event_log.read())
    return {table: list(table_rows(scratch, table)) for p in projectors for table in p.tables}


def checkpoints(db_path: Path) -> dict[str, tuple[int, int]]:
    raw = sqlite3.connect(db_path)
    rows = raw.execute("SELECT name, version, position FROM fl_projector_checkpoint").fetchall()
    return {name: (version, position) for name, version, position in rows}


def test_checkpoints_advance_with_each_append(db_path: Path, store: SQLiteMemoryStore) -> None:
    """Each projector's checkpoint records the position it applied, in the same commit."""
    store.add("learning", "a")
    store.add_many([{"type": "learning", "content": "b"}, {"type": "learning", "content": "c"}])
    assert {"knowledge": (KNOWLEDGE, 3), "receipts": (1, 3), "lineage": (2, 3)} == checkpoints(
        db_path
    )


def test_reads_see_writes_immediately(store: SQLiteMemoryStore) -> None:
    """A write is visible to the next read through the same handle (read-your-writes)."""
    for i in range(3):
        store.add("learning", f"n{i}")
        assert f"n{i}" == store.list(limit=1)[0].content


def test_store_catches_up_on_events_appended_without_projectors(
    db_path: Path, make_store: StoreFactory
) -> None:
    """Events appended through a bare log handle are folded in on the next open or write."""
    store = make_store()
    store.add("learning", "projected")
    bare = open_log(db_path)
    bare.append(NewEvent(payload=MemoryAdded(type="learning", content="raw-1")))
    bare.append(NewEvent(payload=MemoryAdded(type="learning", content="raw-2")))
    store.add("learning", "after")
    assert ["after", "raw-2", "raw-1", "projected"] == [e.content for e in store.list()]
    bare.append(NewEvent(payload=MemoryAdded(type="learning", content="raw-3")))
    assert "raw-3" == make_store().list(limit=1)[0].content
    assert {"knowledge": (KNOWLEDGE, 5), "receipts": (1, 5), "lineage": (2, 5)} == checkpoints(
        db_path
    )


def test_version_change_rebuilds_the_projector(
    db_path: Path,
    make_store: StoreFactory,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A projector whose version changed is dropped and refolded from the log on open."""
    store = make_store()
    store.add("learning", "a", ["x"])
    store.add("learning", "b", ["x"])
    store.remove(1)
    before = store.list()
    store.close()
    monkeypatch.setattr(KnowledgeProjector, "version", KNOWLEDGE + 1)
    caplog.clear()
    again = make_store()
    assert before == again.list()
    assert {"knowledge": (KNOWLEDGE + 1, 3), "receipts": (1, 3), "lineage": (2, 3)} == checkpoints(
        db_path
    )
    assert [(logging.WARNING, "knowledge", f"version {KNOWLEDGE} -> {KNOWLEDGE + 1}")] == [
        (r.levelno, r.projector, r.reason) for r in caplog.records if r.msg == "projector_rebuild"
    ]


def test_checkpoint_not_matching_the_log_rebuilds(
    db_path: Path, make_store: StoreFactory, caplog: pytest.LogCaptureFixture
) -> None:
    """A checkpoint whose chain hash differs from the log's is rebuilt, not trusted."""
    store = make_store()
    store.add("learning", "a")
    store.close()
    raw = sqlite3.connect(db_path)
    raw.execute("UPDATE fl_projector_checkpoint SET chain_hash = 'ff' WHERE name = 'knowledge'")
    raw.execute("DELETE FROM fl_memory")
    raw.commit()
    caplog.clear()
    again = make_store()
    assert ["a"] == [e.content for e in again.list()]
    assert any(r.msg == "projector_rebuild" for r in caplog.records)


def test_dropped_read_model_is_rebuilt_from_the_log(
    db_path: Path, make_store: StoreFactory
) -> None:
    """Projections are disposable: with every read-model table gone, reopening rebuilds them."""
    store = make_store()
    kb = CrossTaskKB(store, run_id="r", producer_task_id="t")
    store.add("learning", "a", ["x"])
    kb.publish("api", "users", "v1", scope="project")
    kb.publish("api", "users", "v2", scope="project")
    before = live_tables(store)
    store.close()
    raw = sqlite3.connect(db_path)
    for table in [*before, "fl_projector_checkpoint"]:
        raw.execute(f"DROP TABLE {table}")
    raw.commit()
    assert before == live_tables(make_store())


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(operations=HISTORIES)
def test_rebuild_from_empty_equals_inline_projection(
    tmp_path: Path, operations: list[Operation]
) -> None:
    """Folding the whole log into empty tables yields exactly what inline projection wrote."""
    with SQLiteMemoryStore(tmp_path / f"{len(list(tmp_path.iterdir()))}.db") as store:
        play(store, operations)
        assert refolded_tables(store) == live_tables(store)
