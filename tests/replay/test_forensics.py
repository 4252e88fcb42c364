"""blast_radius on a scripted incident with several adapters, overwrites and receipts."""

from __future__ import annotations

from pathlib import Path

import pytest

from eventlog import InvalidInputError
from projections import (
    CrossTaskKB,
    MemoryTrustPolicy,
    SQLiteMemoryStore,
    load_persistent_memory,
    recall_memory,
)
from replay import Actor, Ledger


@pytest.fixture
def incident(db_path: Path) -> Path:
    """A researcher, a poisoner under 'evil', and a fixer; prompts built before and after."""
    with SQLiteMemoryStore(db_path) as store:
        researcher = CrossTaskKB(
            store, producer_task_id="researcher-1", source_adapter="claude-code"
        )
        evil = CrossTaskKB(store, producer_task_id="intruder-7", source_adapter="evil")
        fixer = CrossTaskKB(store, producer_task_id="fixer-2", source_adapter="claude-code")
        researcher.publish("api", "users", "{name: str}", scope="project")  # 1
        researcher.publish("api", "orders", "{id: int}", scope="project")  # 2
        evil.publish("api", "users", "POISON users", scope="project")  # 3 overwrites 1
        evil.publish("api", "orders", "POISON orders", scope="project")  # 4 overwrites 2
        store.add("learning", "POISON entry", ["api"], source_adapter="evil")  # 5
        fixer.publish("api", "orders", "{id: int, total: float}", scope="project")  # 6 supersedes 4
        trusting = MemoryTrustPolicy(trusted_adapters=frozenset({"evil", "claude-code"}))
        load_persistent_memory(  # 7: exposed to 3 and 5
            store, ["api"], trust_policy=trusting, task_id="backend-1", run_id="r", adapter="codex"
        )
        load_persistent_memory(  # 8: the default policy shields 3, 5 and 6
            store, ["api"], task_id="frontend-1", run_id="r", adapter="gemini-cli"
        )
    return db_path


def test_blast_radius_of_a_poisoning_adapter(incident: Path, ledger: Ledger) -> None:
    """Every section names the right positions for the suspect adapter."""
    report = ledger.blast_radius(source_adapter="evil")
    assert [3, 4, 5] == [e.position for e in report.events]
    assert ["fact project/api/users", "fact project/api/orders"] == [
        e.subject for e in report.events[:2]
    ]
    assert [(3, "users")] == [(f.position, f.key) for f in report.live_facts]
    assert [5] == [e.id for e in report.live_entries]
    assert [(3, 1, "researcher-1"), (4, 2, "researcher-1")] == [
        (r.position, r.other_position, r.other_producer) for r in report.overwritten
    ]
    assert [(4, 6, "fixer-2")] == [
        (r.position, r.other_position, r.other_producer) for r in report.superseded
    ]
    assert [(7, "backend-1", "codex", 3), (7, "backend-1", "codex", 5)] == [
        (x.receipt_position, x.task_id, x.adapter, x.event_position) for x in report.exposed
    ]
    assert {(8, 3, "untrusted_adapter"), (8, 5, "untrusted_adapter")} == {
        (x.receipt_position, x.event_position, x.reason) for x in report.shielded
    }


def test_selectors_and_since_narrow_the_suspect(incident: Path, ledger: Ledger) -> None:
    """Producer, positions and since_position each narrow which events count."""
    assert [3, 4] == [e.position for e in ledger.blast_radius(producer_task_id="intruder-7").events]
    assert [4] == [e.position for e in ledger.blast_radius(positions=[4]).events]
    assert [4, 5] == [
        e.position for e in ledger.blast_radius(source_adapter="evil", since_position=3).events
    ]


def test_after_quarantine_nothing_is_live_and_new_prompts_are_shielded(
    incident: Path, ledger: Ledger
) -> None:
    """Quarantine empties the live sections; prompts built afterwards record the shield."""
    ledger.quarantine(source_adapter="evil", reason="poisoned")
    with SQLiteMemoryStore(incident) as store:
        load_persistent_memory(
            store, ["api"], trust_policy=MemoryTrustPolicy(enabled=False), task_id="late-1"
        )
    report = ledger.blast_radius(source_adapter="evil")
    assert ([], []) == (report.live_facts, report.live_entries)
    assert {(3, "quarantined"), (5, "quarantined")} == {
        (x.event_position, x.reason) for x in report.shielded if x.task_id == "late-1"
    }
    assert [7, 7] == [x.receipt_position for x in report.exposed]


def test_a_selector_is_required(incident: Path, ledger: Ledger) -> None:
    """Without a selector there is no suspect: a clear error."""
    with pytest.raises(InvalidInputError, match="needs a selector"):
        ledger.blast_radius()
    with pytest.raises(InvalidInputError, match="needs a selector"):
        ledger.blast_radius(since_position=3)


def test_blast_radius_of_an_adapter_lists_the_receipts_it_wrote(
    incident: Path, ledger: Ledger
) -> None:
    """An adapter's reads are listed in `receipts` (not `events`), each with the reader it
    named, what it included, and whether later writes can be derived through it."""
    with SQLiteMemoryStore(incident) as store:
        forged = recall_memory(
            store, ["api"], task_id="backend-1", run_id="r", adapter="evil"
        ).receipt_position
    codex = ledger.blast_radius(source_adapter="codex")
    evil = ledger.blast_radius(source_adapter="evil")
    assert ([], [(7, "backend-1", "r", "codex", (6, 5, 3), True)]) == (
        codex.events,
        [(r.position, r.task_id, r.run_id, r.adapter, r.included, r.links) for r in codex.receipts],
    )
    assert [(forged, "evil", "backend-1")] == [
        (r.position, r.source_adapter, r.task_id) for r in evil.receipts
    ]
    assert [3, 4, 5] == [e.position for e in evil.events]
    assert [8] == [r.position for r in ledger.blast_radius(producer_task_id="frontend-1").receipts]


def test_blast_radius_by_producer_lists_policies_approvals_and_rejections(
    db_path: Path, ledger: Ledger
) -> None:
    """Every kind an actor can write is listed as what it did, with a subject: a conflict
    policy, and the approval and rejection of held versions among them."""
    ops = Actor(producer_task_id="ops-1", run_id="shift-2")
    policy = ledger.set_conflict_policy("api", "hold", scope="project", actor=ops)
    with SQLiteMemoryStore(db_path) as store:
        researcher = CrossTaskKB(store, producer_task_id="r-1", source_adapter="claude-code")
        other = CrossTaskKB(store, producer_task_id="c-1", source_adapter="codex")
        researcher.publish("api", "users", "v1", scope="project")
        held = [other.publish("api", "users", v, scope="project").position for v in ("a", "b")]
    approved = ledger.approve(held[0], actor=ops)
    rejected = ledger.reject(held[1], reason="wrong", actor=ops)
    radius = ledger.blast_radius(producer_task_id="ops-1")
    assert [
        (policy, "conflict_policy_set", "conflict policy hold for tag api in project"),
        (approved, "fact_approved", f"approval of the held version at {held[0]}"),
        (rejected, "fact_rejected", f"rejection of the held version at {held[1]}"),
    ] == [(e.position, e.kind, e.subject) for e in radius.events]
