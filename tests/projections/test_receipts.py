"""Receipts are first-class: `store.receipts(...)` returns each read's receipt, typed, as its
event records it; filters by task and run; pages by position; refuses bad input."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from eventlog import Exclusion, InvalidInputError, InvalidTypeError, TrustSettings
from projections import (
    AgentIdentity,
    Receipt,
    SQLiteMemoryStore,
    read_entries,
    recall_memory,
)
from replay import Ledger

pytestmark = pytest.mark.read_models


@pytest.fixture
def read(store: SQLiteMemoryStore) -> SQLiteMemoryStore:
    """1: an operator entry, 2: codex's; then receipts 3 (t1/r1, codex), 4 (t1/r2, no
    adapter: kept codex out), 5 (t2/r1, an agent read by gemini-cli)."""
    store.add("convention", "run pytest -q", ["api"])
    store.add("learning", "codex note", ["api"], source_adapter="codex")
    recall_memory(store, ["api"], task_id="t1", run_id="r1", adapter="codex")
    recall_memory(store, ["api"], task_id="t1", run_id="r2")
    read_entries(store, AgentIdentity(task_id="t2", run_id="r1", adapter="gemini-cli"))
    return store


def test_receipts_are_typed_and_whole(read: SQLiteMemoryStore) -> None:
    """Each receipt carries who read, what was asked, shown and kept out, the policy, the head
    and the rendered hash, as its event records them."""
    first = read.receipts()[0]
    assert isinstance(first, Receipt)
    event = read.event_log.event_at(3)
    assert (3, event.ts_ns, "t1", "r1", "codex") == (
        first.position,
        first.ts_ns,
        first.task_id,
        first.run_id,
        first.adapter,
    )
    assert (("api",), 10, (2, 1), ()) == (first.tags, first.limit, first.included, first.excluded)
    assert (
        TrustSettings(
            enabled=True, trusted_adapters=("codex",), trust_untagged=True, propagate_taint=True
        )
        == first.policy
    )
    assert (2, event.payload.rendered_hash) == (first.head_position, first.rendered_hash)  # type: ignore[union-attr]


def test_receipts_filter_by_task_and_run_and_page_by_position(read: SQLiteMemoryStore) -> None:
    """task_id and run_id narrow; after and limit page, oldest first."""
    assert [3, 4, 5] == [r.position for r in read.receipts()]
    assert [3, 4] == [r.position for r in read.receipts(task_id="t1")]
    assert [3, 5] == [r.position for r in read.receipts(run_id="r1")]
    assert [4] == [r.position for r in read.receipts(task_id="t1", run_id="r2")]
    assert [4, 5] == [r.position for r in read.receipts(after=3)]
    assert [3] == [r.position for r in read.receipts(limit=1)]
    assert [] == read.receipts(task_id="nobody")


def test_a_receipt_says_when_it_kept_out_everything(read: SQLiteMemoryStore) -> None:
    """The orchestrator's read with no adapter kept codex's entry out and showed the operator
    one; a read of codex's tag alone by it kept out everything, and its receipt says so."""
    made = recall_memory(read, ["api"], task_id="t3", trust_policy=None, limit=1)
    assert not read.receipts(after=made.receipt_position - 1)[0].kept_out_everything
    read.add("learning", "codex only", ["codex-tag"], source_adapter="codex")
    empty = recall_memory(read, ["codex-tag"], task_id="t3")
    [receipt] = read.receipts(after=empty.receipt_position - 1)
    assert receipt.kept_out_everything
    assert (Exclusion(position=receipt.position - 1, reason="untrusted_adapter"),) == (
        receipt.excluded
    )


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ({"task_id": "t\n1"}, InvalidInputError),
        ({"run_id": "x" * 10_000}, InvalidInputError),
        ({"after": -1}, InvalidInputError),
        ({"after": "3"}, InvalidTypeError),
        ({"limit": 0}, InvalidInputError),
        ({"limit": 10**9}, InvalidInputError),
        ({"limit": True}, InvalidTypeError),
    ],
    ids=["control-char", "huge", "negative", "text", "zero", "too-many", "bool"],
)
def test_bad_arguments_are_refused_and_write_nothing(
    read: SQLiteMemoryStore, arguments: dict[str, object], error: type[Exception]
) -> None:
    head = read.event_log.head()
    with pytest.raises(error):
        read.receipts(**arguments)  # type: ignore[arg-type]
    assert head == read.event_log.head()


def test_the_ledger_reads_the_same_receipts_without_writing(
    read: SQLiteMemoryStore, ledger: Ledger
) -> None:
    """`Ledger.receipts` returns what the store does; reading receipts appends none."""
    head = read.event_log.head()
    assert read.receipts(task_id="t1") == ledger.receipts(task_id="t1")
    assert head == read.event_log.head()


def test_an_edited_index_cannot_make_another_event_a_receipt(tmp_path: Path) -> None:
    """A receipt row pointed at an event that is no receipt, or at another task's receipt,
    is passed over: what a receipt holds comes from the log."""
    path = tmp_path / "m.db"
    with SQLiteMemoryStore(path) as store:
        store.add("learning", "note", ["api"])
        recall_memory(store, ["api"], task_id="t1")
        recall_memory(store, ["api"], task_id="t2")
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE fl_receipt SET position = 1 WHERE position = 2")
        conn.execute("UPDATE fl_receipt SET task_id = 't2' WHERE position = 1")
    conn.close()
    with SQLiteMemoryStore(path) as store:
        assert [3] == [r.position for r in store.receipts(task_id="t2")]
