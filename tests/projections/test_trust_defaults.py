"""Trust defaults a newcomer understands: one rule for an agent's own adapter on every path,
a prompt that kept out everything says so, and trusted adapters set in code."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from eventlog import InvalidInputError, InvalidTypeError, RecallRecorded
from projections import (
    AgentIdentity,
    MemoryTrustPolicy,
    SQLiteMemoryStore,
    load_persistent_memory,
    read_entries,
    recall,
    recall_memory,
)
from projections._prompt import KEPT_OUT_EVERYTHING, TRUST_HINT

pytestmark = pytest.mark.read_models

SECRET = "codex-note: the deploy token lives in vault path ops/deploy"


@pytest.fixture
def mixed(store: SQLiteMemoryStore) -> SQLiteMemoryStore:
    store.add("learning", SECRET, ["api"], source_adapter="codex")  # 1
    store.add("learning", "claude says hi", ["api"], source_adapter="claude-code")  # 2
    return store


def receipt_at(store: SQLiteMemoryStore, position: int) -> RecallRecorded:
    payload = store.event_log.event_at(position).payload
    assert isinstance(payload, RecallRecorded)
    return payload


def test_an_agents_own_adapter_is_trusted_on_the_prompt_path(mixed: SQLiteMemoryStore) -> None:
    """`load_persistent_memory(adapter="codex")` shows codex's own entries, and only those:
    another adapter's stay out; the receipt's policy names codex as trusted."""
    made = recall_memory(mixed, ["api"], task_id="t1", adapter="codex")
    assert SECRET in made.text
    assert "claude says hi" not in made.text
    assert (1,) == made.included
    assert ("codex",) == receipt_at(mixed, made.receipt_position).policy.trusted_adapters


def test_the_prompt_mcp_recall_and_agent_reads_follow_one_rule(mixed: SQLiteMemoryStore) -> None:
    """The library's prompt, the agent read MCP's `recall` calls, and an agent's entry read
    show an agent the same entries: its own adapter's, and no other."""
    identity = AgentIdentity(task_id="t1", adapter="codex")
    prompt = recall_memory(mixed, ["api"], task_id="t1", adapter="codex").included
    agent = recall(mixed, identity, ["api"]).included
    entries = read_entries(mixed, identity, tags=["api"])
    assert (1,) == prompt == agent == tuple(entry.id for entry in entries.entries)


def test_a_store_writing_as_an_adapter_reads_its_own_adapter(
    make_store: Callable[..., SQLiteMemoryStore],
) -> None:
    """With no adapter named, the reader is the store's own adapter, and it is trusted."""
    store = make_store(source_adapter="codex")
    store.add("learning", SECRET, ["api"])
    assert SECRET in load_persistent_memory(store, ["api"], task_id="t1")


def test_an_operator_reader_trusts_no_adapter_it_was_not_told_to(
    mixed: SQLiteMemoryStore,
) -> None:
    """An orchestrator building a prompt as itself (no adapter) gets no adapter's writes."""
    made = recall_memory(mixed, ["api"], task_id="t1")
    assert ("", ()) == (made.text, made.included)


def test_a_prompt_that_kept_out_everything_says_so_and_warns(
    mixed: SQLiteMemoryStore, caplog: pytest.LogCaptureFixture
) -> None:
    """Every candidate kept out: the receipt names each with its reason, `Recall` says so,
    and one warning names the reasons and the setting to change, never what they hold."""
    caplog.set_level(logging.DEBUG)
    made = recall_memory(mixed, ["api"], task_id="t1")
    assert made.kept_out_everything
    receipt = receipt_at(mixed, made.receipt_position)
    assert ((), {1, 2}) == (receipt.included, {e.position for e in receipt.excluded})
    [warning] = warnings(caplog)
    assert logging.WARNING == warning.levelno
    assert {"untrusted_adapter": 2} == warning.reasons
    assert TRUST_HINT == warning.hint
    assert "FACTLEDGER_TRUST_ADAPTERS" in TRUST_HINT
    assert (made.receipt_position, 2) == (warning.receipt_position, warning.kept_out)
    assert not any("vault" in str(vars(record)) for record in caplog.records)
    assert not any("claude says" in str(vars(record)) for record in caplog.records)


def test_an_empty_store_or_a_full_prompt_does_not_warn(
    mixed: SQLiteMemoryStore, caplog: pytest.LogCaptureFixture
) -> None:
    """Nothing to keep out (no candidate) or something shown: no warning."""
    caplog.set_level(logging.DEBUG)
    nothing = recall_memory(mixed, ["unused-tag"], task_id="t1")
    some = recall_memory(mixed, ["api"], task_id="t1", adapter="codex")
    assert (False, False) == (nothing.kept_out_everything, some.kept_out_everything)
    assert [] == warnings(caplog)


def warnings(caplog: pytest.LogCaptureFixture) -> list[Any]:
    return [record for record in caplog.records if record.msg == KEPT_OUT_EVERYTHING]


def test_trusted_adapters_set_on_the_store_replace_the_environments(
    make_store: Callable[..., SQLiteMemoryStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`SQLiteMemoryStore(trusted_adapters=...)` trusts those adapters on every read through
    it that is given no policy; an injected agent that sets FACTLEDGER_TRUST_ADAPTERS in the
    orchestrator's environment widens nothing; a policy given to a read still wins."""
    store = make_store(trusted_adapters=["claude-code"])
    store.add("learning", SECRET, ["api"], source_adapter="codex")
    store.add("learning", "claude says hi", ["api"], source_adapter="claude-code")
    monkeypatch.setenv("FACTLEDGER_TRUST_ADAPTERS", "codex")
    text = load_persistent_memory(store, ["api"], task_id="t1")
    assert "claude says hi" in text and SECRET not in text
    assert frozenset({"claude-code"}) == store.trust_policy().trusted_adapters
    given = MemoryTrustPolicy(trusted_adapters=frozenset({"codex"}))
    assert SECRET in load_persistent_memory(store, ["api"], task_id="t1", trust_policy=given)
    identity = AgentIdentity(task_id="t2", adapter="gemini-cli")
    assert [2] == [e.id for e in read_entries(store, identity, tags=["api"]).entries]


def test_the_environments_other_trust_settings_still_apply_to_a_store(
    make_store: Callable[..., SQLiteMemoryStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Trusted adapters set in code replace only the adapters: the policy switched off in the
    environment is off."""
    monkeypatch.setenv("FACTLEDGER_TRUST_POLICY", "off")
    store = make_store(trusted_adapters=[])
    assert not store.trust_policy().enabled


@pytest.mark.parametrize(
    ("adapters", "error"),
    [
        ("codex", InvalidTypeError),
        (["codex", 3], InvalidTypeError),
        (["codex\n"], InvalidInputError),
        (["x" * 10_000], InvalidInputError),
    ],
    ids=["a-bare-string", "not-a-name", "a-control-character", "huge"],
)
def test_bad_trusted_adapters_are_refused_before_anything_is_created(
    tmp_path: Path, adapters: object, error: type[Exception]
) -> None:
    """A bare string (which would trust each of its letters), a non-name, a control character
    or a huge name: refused, and no file is made."""
    path = tmp_path / "memory.db"
    with pytest.raises(error, match="trusted_adapters"):
        SQLiteMemoryStore(path, trusted_adapters=adapters)  # type: ignore[arg-type]
    assert not path.exists()
