"""Projectors: inline folding, checkpoints, catch-up and rebuild; replay equals inline."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
import structlog
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eventlog import MemoryAdded, NewEvent, QuarantineApplied, QuarantineReleased, open_log
from projections import CrossTaskKB, SQLiteMemoryStore, default_projectors, fold
from projections.knowledge import KnowledgeProjector
from projections.scratch import ScratchDatabase
from projections.tables import table_rows

StoreFactory = Callable[..., SQLiteMemoryStore]


def live_tables(store: SQLiteMemoryStore) -> dict[str, list[tuple[object, ...]]]:
    with store.event_log.snapshot() as snap:
        return {
            table: list(table_rows(snap, table))
            for projector in default_projectors()
            for table in projector.tables
        }


def refolded_tables(store: SQLiteMemoryStore) -> dict[str, list[tuple[object, ...]]]:
    scratch = ScratchDatabase()
    projectors = default_projectors()
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
    assert {"knowledge": (2, 3), "receipts": (1, 3)} == checkpoints(db_path)


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
    assert {"knowledge": (2, 5), "receipts": (1, 5)} == checkpoints(db_path)


def test_version_change_rebuilds_the_projector(
    db_path: Path, make_store: StoreFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A projector whose version changed is dropped and refolded from the log on open."""
    store = make_store()
    store.add("learning", "a", ["x"])
    store.add("learning", "b", ["x"])
    store.remove(1)
    before = store.list()
    store.close()
    monkeypatch.setattr(KnowledgeProjector, "version", 3)
    with structlog.testing.capture_logs() as logs:
        again = make_store()
    assert before == again.list()
    assert {"knowledge": (3, 3), "receipts": (1, 3)} == checkpoints(db_path)
    assert [("knowledge", "version 2 -> 3")] == [
        (e["projector"], e["reason"]) for e in logs if e["event"] == "projector_rebuild"
    ]


def test_checkpoint_not_matching_the_log_rebuilds(db_path: Path, make_store: StoreFactory) -> None:
    """A checkpoint whose chain hash differs from the log's is rebuilt, not trusted."""
    store = make_store()
    store.add("learning", "a")
    store.close()
    raw = sqlite3.connect(db_path)
    raw.execute("UPDATE fl_projector_checkpoint SET chain_hash = 'ff' WHERE name = 'knowledge'")
    raw.execute("DELETE FROM fl_memory")
    raw.commit()
    with structlog.testing.capture_logs() as logs:
        again = make_store()
    assert ["a"] == [e.content for e in again.list()]
    assert any(e["event"] == "projector_rebuild" for e in logs)


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


OPERATIONS = st.lists(
    st.one_of(
        st.tuples(
            st.just("add"),
            st.sampled_from(["learning", "decision", "cross_task"]),
            st.lists(st.sampled_from(["a", "b", "%", "a_b"]), max_size=3),
            st.sampled_from([None, "codex", "claude-code"]),
            st.floats(0, 1),
        ),
        st.tuples(st.just("remove"), st.integers(1, 30)),
        st.tuples(
            st.just("publish"),
            st.sampled_from(["run", "project"]),
            st.sampled_from(["k1", "k2"]),
            st.text(max_size=5),
            st.sampled_from([None, "codex"]),
        ),
        st.tuples(st.just("decay"), st.sampled_from([0.5, 0.9, 1.0])),
        st.tuples(st.just("prune"), st.integers(0, 5)),
        st.tuples(st.just("recall"), st.lists(st.sampled_from(["a", "b", "api"]), max_size=2)),
        st.tuples(st.just("quarantine"), st.sampled_from(["codex", "claude-code"])),
        st.tuples(st.just("release")),
    ),
    max_size=25,
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(operations=OPERATIONS)
def test_rebuild_from_empty_equals_inline_projection(
    tmp_path: Path, operations: list[tuple]
) -> None:  # type: ignore[type-arg]
    """Folding the whole log into empty tables yields exactly what inline projection wrote."""
    from projections import load_persistent_memory

    with SQLiteMemoryStore(tmp_path / f"{len(list(tmp_path.iterdir()))}.db") as store:
        kb = CrossTaskKB(store, run_id="run-1", producer_task_id="task")
        quarantines: list[int] = []
        for op in operations:
            if op[0] == "add":
                store.add(op[1], "content", op[2], op[4], source_adapter=op[3])
            elif op[0] == "remove":
                store.remove(op[1])
            elif op[0] == "publish":
                kb.publish("api", op[2], op[3], scope=op[1], source_adapter=op[4])
            elif op[0] == "decay":
                store.decay_importance(op[1])
            elif op[0] == "prune":
                store.prune(max_entries=op[1], max_age_days=365)
            elif op[0] == "recall":
                load_persistent_memory(store, op[1], task_id="t")
            elif op[0] == "quarantine":
                event = NewEvent(payload=QuarantineApplied(reason="r", match_source_adapter=op[1]))
                quarantines.append(store._append([event])[0].position)
            elif quarantines:
                event = NewEvent(
                    payload=QuarantineReleased(quarantine_position=quarantines.pop(), reason="r")
                )
                store._append([event])
        assert refolded_tables(store) == live_tables(store)
