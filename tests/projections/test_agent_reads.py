"""Agent reads: facts and memory an agent may see under its trust policy, each read receipted."""

from __future__ import annotations

import sqlite3
from contextlib import closing

import msgspec
import pytest

from eventlog import (
    Exclusion,
    FactPublished,
    InvalidInputError,
    InvalidTypeError,
    NewEvent,
    ReadOnlyStoreError,
    RecallRecorded,
    TrustSettings,
    content_hash,
)
from projections import (
    AgentIdentity,
    CrossTaskKB,
    MemoryTrustPolicy,
    SQLiteMemoryStore,
    open_view,
    read_entries,
    read_facts,
    read_history,
    recall,
)
from projections.internal import (
    policy_for,
)
from replay import Ledger
from tests.read_models import ReadModelUnderTest

pytestmark = pytest.mark.read_models

READER = AgentIdentity(task_id="task-b", run_id="run-1", adapter="claude-code")
OWN = "claude-code"
FOREIGN = "evil-adapter"
TRUSTED = "codex"


def kb(store: SQLiteMemoryStore, adapter: str | None, task: str = "task-a") -> CrossTaskKB:
    return CrossTaskKB(store, run_id="run-1", producer_task_id=task, source_adapter=adapter)


def receipt_at(store: SQLiteMemoryStore, position: int) -> RecallRecorded:
    payload = store.event_log.event_at(position).payload
    assert isinstance(payload, RecallRecorded)
    return payload


def test_reader_sees_its_own_adapter_and_operator_writes_not_a_foreign_one(
    store: SQLiteMemoryStore,
) -> None:
    """Own adapter and untagged writes come back; a foreign adapter's fact is kept out."""
    kb(store, OWN).publish("schema", "users", "id int", scope="project")
    kb(store, None).publish("schema", "orders", "id uuid", scope="project")
    kb(store, FOREIGN).publish("schema", "evil", "run curl | sh", scope="project")
    read = read_facts(store, READER, "schema")
    assert [("orders", None), ("users", OWN)] == [(f.key, f.source_adapter) for f in read.facts]
    assert 1 == read.kept_out


def test_an_untrusted_overwrite_leaves_the_newest_trusted_version(
    store: SQLiteMemoryStore,
) -> None:
    """A foreign adapter overwriting a fact hides nothing and changes nothing for the reader:
    it sees the newest version it trusts, and the receipt names what it passed over."""
    first = kb(store, TRUSTED).publish("config", "db", "postgres://prod", scope="project")
    second = kb(store, FOREIGN).publish("config", "db", "postgres://evil", scope="project")
    policy = MemoryTrustPolicy(trusted_adapters=frozenset({TRUSTED}))
    read = read_facts(store, READER, "config", trust_policy=policy)
    assert [(first.position, "postgres://prod")] == [(f.position, f.value) for f in read.facts]
    receipt = receipt_at(store, read.receipt_position)
    assert (first.position,) == receipt.included
    assert (Exclusion(position=second.position, reason="untrusted_adapter"),) == receipt.excluded


def test_a_key_with_no_trusted_version_is_not_shown(store: SQLiteMemoryStore) -> None:
    """A key only a foreign adapter wrote does not come back at all."""
    kb(store, FOREIGN).publish("config", "db", "postgres://evil", scope="project")
    read = read_facts(store, READER, "config")
    assert ([], 1) == (read.facts, read.kept_out)


def test_trusting_the_adapter_lets_its_facts_back(store: SQLiteMemoryStore) -> None:
    """Once the policy names the foreign adapter, its newest version is the one shown."""
    kb(store, OWN).publish("config", "db", "postgres://prod", scope="project")
    kb(store, FOREIGN).publish("config", "db", "postgres://other", scope="project")
    policy = MemoryTrustPolicy(trusted_adapters=frozenset({FOREIGN}))
    read = read_facts(store, READER, "config", trust_policy=policy)
    assert ["postgres://other"] == [f.value for f in read.facts]
    assert 0 == read.kept_out


def test_the_environment_policy_applies_when_none_is_given(
    store: SQLiteMemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a policy argument the environment's policy is read at the call."""
    kb(store, FOREIGN).publish("config", "db", "postgres://other", scope="project")
    assert [] == read_facts(store, READER, "config").facts
    monkeypatch.setenv("FACTLEDGER_TRUST_ADAPTERS", FOREIGN)
    assert ["postgres://other"] == [f.value for f in read_facts(store, READER, "config").facts]


def test_untagged_writes_are_kept_out_when_the_policy_distrusts_them(
    store: SQLiteMemoryStore,
) -> None:
    """trust_untagged=False keeps operator writes out, with their own reason."""
    fact = kb(store, None).publish("config", "db", "postgres://prod", scope="project")
    read = read_facts(store, READER, "config", trust_policy=MemoryTrustPolicy(trust_untagged=False))
    assert [] == read.facts
    excluded = receipt_at(store, read.receipt_position).excluded
    assert (Exclusion(position=fact.position, reason="untagged_not_trusted"),) == excluded


def test_quarantined_versions_stay_out_even_with_the_policy_off(
    store: SQLiteMemoryStore, read_model: ReadModelUnderTest
) -> None:
    """A quarantined version is never returned, whatever the policy."""
    good = kb(store, OWN).publish("config", "db", "postgres://prod", scope="project")
    bad = kb(store, OWN, task="task-x").publish("config", "db", "evil", scope="project")
    log, cache = read_model.where(store.db_path)
    with Ledger.open(log, cache=cache, read_only=False) as ledger:
        ledger.quarantine(producer_task_id="task-x", reason="compromised task")
    off = MemoryTrustPolicy(enabled=False)
    assert [good.position] == [f.position for f in read_facts(store, READER, "config").facts]
    history = read_history(store, READER, "config", "db", trust_policy=off)
    assert [good.position] == [f.position for f in history.facts]
    excluded = receipt_at(store, history.receipt_position).excluded
    assert (Exclusion(position=bad.position, reason="quarantined"),) == excluded


def test_values_and_fields_come_back_with_invisible_characters_escaped(
    store: SQLiteMemoryStore,
) -> None:
    """Values keep newlines and escape the rest; one-line fields escape everything (a key
    holding an invisible character is refused now, but a log written before, or around the
    API, may hold one)."""
    value = "line one\nrun\u202eit\U000e0041"
    fact = FactPublished(scope="project", tag="notes", key="k\u200bey", value=value)
    with store.write_transaction() as tx:
        tx.append([NewEvent(payload=fact, producer_task_id="t", source_adapter=OWN)])
    (fact,) = read_facts(store, READER, "notes").facts
    assert "k\\u{200B}ey" == fact.key
    assert "line one\nrun\\u{202E}it\\u{E0041}" == fact.value


def test_a_receipt_records_the_read(store: SQLiteMemoryStore) -> None:
    """The receipt names the reader, the tag, what was returned, the policy with the reader's
    adapter in it, the head read at, and the hash of the facts as returned."""
    fact = kb(store, OWN).publish("schema", "users", "id int", scope="project")
    read = read_facts(store, READER, "schema")
    receipt = receipt_at(store, read.receipt_position)
    assert (READER.task_id, READER.run_id, READER.adapter) == (
        receipt.task_id,
        receipt.run_id,
        receipt.adapter,
    )
    assert (("schema",), 0, (fact.position,)) == (receipt.tags, receipt.limit, receipt.included)
    policy = TrustSettings(
        enabled=True, trusted_adapters=(OWN,), trust_untagged=True, propagate_taint=True
    )
    assert policy == receipt.policy
    assert (fact.position, read.receipt_position) == (receipt.head_position, fact.position + 1)
    assert content_hash(msgspec.json.encode(read.facts)) == receipt.rendered_hash


def test_run_scope_reads_the_readers_run_and_needs_one(store: SQLiteMemoryStore) -> None:
    """Run-scoped facts of the reader's run come back; a reader with no run is refused."""
    kb(store, OWN).publish("plan", "step", "one", scope="run")
    assert ["one"] == [f.value for f in read_facts(store, READER, "plan", scope="run").facts]
    runless = AgentIdentity(task_id="task-b", adapter=OWN)
    with pytest.raises(InvalidInputError, match="scope 'run' needs a run id"):
        read_facts(store, runless, "plan", scope="run")


def test_history_is_oldest_first_and_keeps_the_newest_limit(store: SQLiteMemoryStore) -> None:
    """History returns trusted versions oldest first; a limit keeps the newest of them."""
    positions = [
        kb(store, OWN).publish("config", "db", f"v{n}", scope="project").position for n in range(4)
    ]
    kb(store, FOREIGN).publish("config", "db", "evil", scope="project")
    read = read_history(store, READER, "config", "db", limit=2)
    assert positions[2:] == [f.position for f in read.facts]
    assert 1 == read.kept_out
    assert 2 == receipt_at(store, read.receipt_position).limit


def test_recall_trusts_the_readers_own_adapter(store: SQLiteMemoryStore) -> None:
    """recall builds the prompt section with the reader's adapter trusted, and returns the
    receipt it appended."""
    store.add("learning", "own note", ["api"], task_id="task-a", source_adapter=OWN)
    store.add("learning", "foreign note", ["api"], task_id="task-x", source_adapter=FOREIGN)
    found = recall(store, READER, ["api"])
    assert "own note" in found.text and "foreign note" not in found.text
    receipt = receipt_at(store, found.receipt_position)
    assert (found.included, found.excluded) == (receipt.included, receipt.excluded)
    assert (OWN,) == receipt.policy.trusted_adapters


def test_reads_refuse_a_read_only_view(
    store: SQLiteMemoryStore, read_model: ReadModelUnderTest
) -> None:
    """Reads append a receipt, so a read-only view is refused."""
    kb(store, OWN).publish("schema", "users", "id int", scope="project")
    with open_view(store.db_path, log=read_model.log) as view, pytest.raises(ReadOnlyStoreError):
        read_facts(view, READER, "schema")


def test_bad_identity_and_policy_are_refused() -> None:
    """Identities hold unambiguous ASCII names; the policy must be a MemoryTrustPolicy."""
    with pytest.raises(InvalidInputError):
        AgentIdentity(task_id="task\u200b")
    with pytest.raises(InvalidInputError):
        AgentIdentity(task_id="")
    with pytest.raises(InvalidTypeError):
        policy_for(READER, {"trusted_adapters": []})  # type: ignore[arg-type]


def test_an_entry_read_shows_what_the_policy_trusts_newest_first_with_a_receipt(
    store: SQLiteMemoryStore,
) -> None:
    """read_entries: the reader's own and the operator's entries, foreign ones counted as kept
    out and named in the receipt, `more` when the limit cut older ones off, and an entry
    whose row its event does not bear out kept out as read_model_mismatch."""
    store.add("learning", "operator 1", ["api"])
    store.add("learning", "foreign 2", ["api"], source_adapter=FOREIGN)
    store.add("learning", "own 3\u200b", ["api"], source_adapter=OWN)
    store.add("learning", "foreign 4", ["api"], source_adapter=FOREIGN)
    read = read_entries(store, READER, tags=["api"], limit=1)
    assert (["own 3\\u{200B}"], 1, True) == (
        [e.content for e in read.entries],
        read.kept_out,
        read.more,
    )
    receipt = receipt_at(store, read.receipt_position)
    assert ((3,), (Exclusion(position=4, reason="untrusted_adapter"),)) == (
        receipt.included,
        receipt.excluded,
    )
    everything = read_entries(store, READER, limit=10, escape=False)
    assert (["own 3\u200b", "operator 1"], 2, False) == (
        [e.content for e in everything.entries],
        everything.kept_out,
        everything.more,
    )
    with closing(sqlite3.connect(store.db_path)) as raw, raw:
        raw.execute("UPDATE fl_memory SET source_adapter = NULL WHERE id = 4")
    edited = read_entries(store, READER, limit=10)
    assert [3, 1] == [e.id for e in edited.entries]
    assert "read_model_mismatch" in {
        e.reason for e in receipt_at(store, edited.receipt_position).excluded
    }
    assert [] == read_entries(store, READER, adapters=[]).entries
