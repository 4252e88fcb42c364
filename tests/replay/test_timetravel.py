"""as_of: a read-only store showing the state right after a past position or time."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from eventlog import (
    InvalidInputError,
    InvalidTypeError,
    NewEvent,
    QuarantineApplied,
    QuarantineReleased,
    ReadOnlyStoreError,
    StorageError,
)
from projections import CrossTaskKB, SQLiteMemoryStore, load_persistent_memory
from replay import Ledger, as_of
from tests.conftest import Clock

Observation = dict[str, Any]


def observe(store: SQLiteMemoryStore) -> Observation:
    """What every reader returned at one moment: subscribe, history, list, query, relevant."""
    run = CrossTaskKB(store, run_id="run-1")
    other = CrossTaskKB(store, run_id="run-2")
    return {
        "project": list(run.subscribe("api", scope="project")),
        "run-1": list(run.subscribe("api", scope="run")),
        "run-2": list(other.subscribe("api", scope="run")),
        "codex only": list(
            run.subscribe("api", scope="project", read_only_from_adapters=["codex"])
        ),
        "history": run.history("api", "base_url", scope="project"),
        "list": store.list(limit=50),
        "decisions": store.query(type="decision", tags=["db"]),
        "relevant": store.get_relevant(["api", "db"], limit=5),
    }


def test_as_of_agrees_with_what_readers_saw_then(store: SQLiteMemoryStore, ledger: Ledger) -> None:
    """At every recorded position, the view answers exactly what the live store answered."""
    run1 = CrossTaskKB(store, run_id="run-1", producer_task_id="task-a", source_adapter="codex")
    run2 = CrossTaskKB(store, run_id="run-2", producer_task_id="task-b")
    steps: list[Callable[[], object]] = [
        lambda: store.add("decision", "use postgres", ["db"], 0.9),
        lambda: run1.publish("api", "base_url", "v1", scope="project"),
        lambda: run2.publish("api", "base_url", "v2", scope="project"),
        lambda: run1.publish("api", "timeout", "30", scope="run"),
        lambda: store.add_many([{"type": "decision", "content": "shard", "tags": ["db", "api"]}]),
        lambda: run2.publish("api", "timeout", "60", scope="run"),
        lambda: store.decay_importance(0.5),
        lambda: load_persistent_memory(store, ["api"], task_id="task-c"),
        lambda: store._append(
            [NewEvent(payload=QuarantineApplied(reason="r", match_producer_task_id="task-b"))]
        ),
        lambda: run1.publish("api", "base_url", "v3", scope="project"),
        lambda: store.remove(1),
        lambda: store._append(
            [NewEvent(payload=QuarantineReleased(quarantine_position=9, reason="r"))]
        ),
        lambda: store.prune(max_entries=2, max_age_days=365),
    ]
    seen: dict[int, Observation] = {0: observe(store)}
    for step in steps:
        step()
        seen[store.event_log.head().position] = observe(store)
    assert 13 == len(seen) - 1
    for position, expected in seen.items():
        assert expected == observe(ledger.as_of(position=position)), f"at {position}"


def test_as_of_ts_ns_picks_the_highest_position_at_or_before(
    make_store: Callable[..., SQLiteMemoryStore], clock: Clock, ledger: Ledger
) -> None:
    """A time selects the highest position stamped at or before it, not a timestamp order."""
    store = make_store(clock_ns=clock)
    start = clock.now_ns
    store.add("learning", "at t0")
    clock.advance(10)
    store.add("learning", "at t10")
    clock.advance(-5)
    store.add("learning", "at t5, after t10 in the log")
    contents = {
        ts: [e.content for e in ledger.as_of(ts_ns=start + ts * 10**9).list()]
        for ts in (0, 4, 5, 9, 10, 11)
    }
    assert {
        0: ["at t0"],
        4: ["at t0"],
        5: ["at t5, after t10 in the log", "at t10", "at t0"],
        9: ["at t5, after t10 in the log", "at t10", "at t0"],
        10: ["at t5, after t10 in the log", "at t10", "at t0"],
        11: ["at t5, after t10 in the log", "at t10", "at t0"],
    } == contents


def test_as_of_a_time_before_every_event_is_empty(
    make_store: Callable[..., SQLiteMemoryStore], clock: Clock, ledger: Ledger
) -> None:
    """Before the first event's time, the view shows the empty knowledge base."""
    store = make_store(clock_ns=clock)
    store.add("learning", "later")
    assert [] == ledger.as_of(ts_ns=clock.now_ns - 1).list()
    assert [] == ledger.as_of(position=0).list()


def test_view_does_not_move_with_later_writes(store: SQLiteMemoryStore, ledger: Ledger) -> None:
    """A view keeps showing its point in the past while the live store moves on."""
    store.add("learning", "old")
    view = ledger.as_of(position=1)
    store.add("learning", "new")
    assert ["old"] == [e.content for e in view.list()]
    assert view.read_only and not store.read_only


WRITES: dict[str, Callable[[SQLiteMemoryStore], object]] = {
    "add": lambda v: v.add("learning", "x"),
    "add_episodic": lambda v: v.add_episodic("x", "task"),
    "add_many": lambda v: v.add_many([{"type": "learning", "content": "x"}]),
    "remove": lambda v: v.remove(1),
    "prune": lambda v: v.prune(max_entries=0),
    "decay_importance": lambda v: v.decay_importance(0.5),
    "publish": lambda v: CrossTaskKB(v, run_id="r").publish("api", "k", "v", scope="run"),
    "publish_many": lambda v: CrossTaskKB(v).publish_many([("api", "k", "v")], scope="project"),
    "load_persistent_memory": lambda v: load_persistent_memory(v, ["api"]),
    "write_transaction": lambda v: v.write_transaction(),
    "event_log": lambda v: v.event_log,
}


@pytest.mark.parametrize("write", WRITES.values(), ids=WRITES.keys())
def test_view_refuses_every_write(
    store: SQLiteMemoryStore, write: Callable[[SQLiteMemoryStore], object], ledger: Ledger
) -> None:
    """Every write through a view raises ReadOnlyStoreError, never an AttributeError."""
    store.add("learning", "x", ["api"])
    head = store.event_log.head()
    view = ledger.as_of(position=1)
    with pytest.raises(ReadOnlyStoreError, match=r"read-only|view of the past"):
        write(view)
    assert head == store.event_log.head()
    view.close()


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({}, InvalidInputError, "exactly one"),
        ({"position": 1, "ts_ns": 1}, InvalidInputError, "exactly one"),
        ({"position": 3}, InvalidInputError, "past the log head 2"),
        ({"position": -1}, InvalidInputError, "at least 0"),
        ({"ts_ns": -1}, InvalidInputError, "at least 0"),
        ({"position": True}, InvalidTypeError, "int"),
        ({"position": "1"}, InvalidTypeError, "int"),
        ({"ts_ns": 1.5}, InvalidTypeError, "int"),
    ],
)
def test_bad_points_are_refused(
    store: SQLiteMemoryStore,
    options: dict[str, Any],
    error: type[Exception],
    message: str,
    ledger: Ledger,
) -> None:
    """Neither or both points, a position past the head, negatives and non-ints are refused."""
    store.add_many([{"type": "learning", "content": "a"}, {"type": "learning", "content": "b"}])
    with pytest.raises(error, match=message):
        ledger.as_of(**options)


def test_missing_database_is_a_storage_error(tmp_path: Path) -> None:
    """Time travel never creates a database."""
    with pytest.raises(StorageError):
        as_of(tmp_path / "missing.db", position=0)
    assert [] == list(tmp_path.iterdir())
