"""Random histories of store operations, for properties that must hold after any of them."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from eventlog import NewEvent, QuarantineApplied, QuarantineReleased
from projections import CrossTaskKB, SQLiteMemoryStore, load_persistent_memory

Operation = tuple[Any, ...]

HISTORIES = st.lists(
    st.one_of(
        st.tuples(
            st.just("add"),
            st.sampled_from(["learning", "decision", "cross_task"]),
            st.lists(st.sampled_from(["a", "b", "%", "a_b", "api"]), max_size=3),
            st.sampled_from([None, "codex", "claude-code"]),
            st.floats(0, 1),
        ),
        st.tuples(st.just("add_many"), st.integers(1, 3), st.sampled_from([None, "codex"])),
        st.tuples(st.just("remove"), st.integers(1, 30)),
        st.tuples(
            st.just("publish"),
            st.sampled_from(["run", "project"]),
            st.sampled_from(["k1", "k2"]),
            st.text(min_size=1, max_size=5).filter(str.strip),
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
"""Adds, batches, removes, publishes, decays, prunes, recalls, quarantines and releases."""


def play(store: SQLiteMemoryStore, operations: list[Operation]) -> None:
    """Apply `operations` (drawn from HISTORIES) to `store`, in order."""
    kb = CrossTaskKB(store, run_id="run-1", producer_task_id="task")
    quarantines: list[int] = []
    for op in operations:
        if op[0] == "add":
            store.add(op[1], "content", op[2], op[4], source_adapter=op[3])
        elif op[0] == "add_many":
            rows = [
                {"type": "learning", "content": f"m{i}", "source_adapter": op[2]}
                for i in range(op[1])
            ]
            store.add_many(rows)
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
            with store.write_transaction() as tx:
                quarantines.append(tx.append([event])[0].position)
        elif quarantines:
            release = QuarantineReleased(quarantine_position=quarantines.pop(), reason="r")
            with store.write_transaction() as tx:
                tx.append([NewEvent(payload=release)])
