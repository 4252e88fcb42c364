"""`query`, `list` and `history` at a shell: an agent (an adapter in the environment) sees
what its trust policy trusts and is told how many rows were kept out; `--all`, and an
operator (no adapter), see every row; every row carries its trust."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from eventlog import RecallRecorded
from projections import SQLiteMemoryStore
from tests.cli.conftest import Result

Cli = Callable[..., Result]


@pytest.fixture
def mixed(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> Cli:
    """users: 1 by the operator, 2 by evil-cli (current); tips: 3 operator, 4 evil-cli,
    5 codex (the reader's own adapter)."""
    cli("share", "users", "{name: str}", "--tag", "api")
    monkeypatch.setenv("FACTLEDGER_ADAPTER", "evil-cli")
    cli("share", "users", "POISON", "--tag", "api")
    monkeypatch.delenv("FACTLEDGER_ADAPTER")
    cli("add", "run pytest -q", "--tag", "tips")
    monkeypatch.setenv("FACTLEDGER_ADAPTER", "evil-cli")
    cli("add", "POISON tip", "--tag", "tips")
    monkeypatch.setenv("FACTLEDGER_ADAPTER", "codex")
    cli("add", "codex's own note", "--tag", "tips")
    monkeypatch.delenv("FACTLEDGER_ADAPTER")
    return cli


def as_agent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FACTLEDGER_ADAPTER", "codex")
    monkeypatch.setenv("FACTLEDGER_TASK_ID", "frontend-7")


def test_an_agents_query_sees_the_newest_trusted_version_and_is_told_what_was_kept_out(
    mixed: Cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A foreign adapter's current version is passed over for the operator's earlier one;
    stderr says one row was kept out; the read is receipted under the agent's identity."""
    as_agent(monkeypatch)
    read = mixed("query", "--tag", "api", "--json")
    assert [("{name: str}", 1, "trusted")] == [
        (f["value"], f["position"], f["trust"]) for f in read.json()
    ]
    assert "kept out 1 row the trust policy does not trust for adapter codex" in read.err
    assert "--all shows every row" in read.err
    with SQLiteMemoryStore(tmp_path / "cli.db") as store:
        receipt = list(store.event_log.read())[-1]
    assert isinstance(receipt.payload, RecallRecorded)
    assert ("frontend-7", "codex") == (receipt.payload.task_id, receipt.payload.adapter)
    assert [(2, "untrusted_adapter")] == [(e.position, e.reason) for e in receipt.payload.excluded]


def test_all_shows_every_row_marked_with_its_trust(
    mixed: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--all: the current version whatever wrote it, marked untrusted_adapter; nothing is
    said about rows kept out, because none were."""
    as_agent(monkeypatch)
    read = mixed("query", "--tag", "api", "--all", "--json")
    assert [("POISON", "evil-cli", "untrusted_adapter")] == [
        (f["value"], f["source_adapter"], f["trust"]) for f in read.json()
    ]
    assert "" == read.err
    listed = mixed("list", "--tag", "tips", "--all", "--json").json()
    assert [(5, "trusted"), (4, "untrusted_adapter"), (3, "trusted")] == [
        (e["id"], e["trust"]) for e in listed
    ]


def test_an_operator_sees_every_row_marked(mixed: Cli) -> None:
    """No adapter in the environment: every row, each marked under the active policy."""
    listed = mixed("list", "--json").json()
    assert [
        (5, "untrusted_adapter"),
        (4, "untrusted_adapter"),
        (3, "trusted"),
        (2, "untrusted_adapter"),
    ] == [(e["id"], e["trust"]) for e in listed]
    assert "kept out" not in mixed("list").err
    text = mixed("query", "--tag", "api").out
    assert "POISON" in text and "untrusted_adapter" in text


def test_an_agents_list_and_history_keep_foreign_rows_out(
    mixed: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """list shows the agent its own and the operator's entries (the fact's current mirror is
    evil-cli's); history the trusted versions; each says on stderr how many it kept out."""
    as_agent(monkeypatch)
    listed = mixed("list", "--json")
    assert [5, 3] == [e["id"] for e in listed.json()]
    assert "kept out 2 rows" in listed.err
    assert "POISON" not in listed.out
    history = mixed("history", "--tag", "api", "--json")
    assert [(1, "trusted")] == [(v["position"], v["trust"]) for v in history.json()["versions"]]
    assert 1 == history.json()["kept_out"] and "kept out 1 row" in history.err
    everything = mixed("history", "--tag", "api", "--all", "--json").json()
    assert [(1, "trusted"), (2, "untrusted_adapter")] == [
        (v["position"], v["trust"]) for v in everything["versions"]
    ]


def test_trusting_the_adapter_lets_an_agent_see_it(
    mixed: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """FACTLEDGER_TRUST_ADAPTERS is the agent's policy too: trusted, nothing is kept out."""
    as_agent(monkeypatch)
    monkeypatch.setenv("FACTLEDGER_TRUST_ADAPTERS", "evil-cli")
    read = mixed("query", "--tag", "api", "--json")
    assert [("POISON", "trusted")] == [(f["value"], f["trust"]) for f in read.json()]
    assert "kept out 0 rows" in read.err


def test_a_shell_naming_another_task_under_its_own_adapter_taints_none_of_its_writes(
    mixed: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process setting FACTLEDGER_TASK_ID=backend-7 under evil-cli reads the poison tip;
    backend-7's later note under codex in that run still reaches a codex reader, has no
    ancestors, and blast-radius of evil-cli lists the read but derives nothing from it."""
    monkeypatch.setenv("FACTLEDGER_TASK_ID", "backend-7")
    monkeypatch.setenv("FACTLEDGER_RUN_ID", "r1")
    monkeypatch.setenv("FACTLEDGER_ADAPTER", "evil-cli")
    forged = mixed("list", "--tag", "tips", "--json")
    assert 4 in [e["position"] for e in forged.json()]
    monkeypatch.setenv("FACTLEDGER_ADAPTER", "codex")
    assert 0 == mixed("add", "pages of 50", "--tag", "tips").code
    as_agent(monkeypatch)
    seen = mixed("list", "--tag", "tips", "--json")
    up = mixed("lineage", "7", "--up", "--json")
    radius = mixed("blast-radius", "--adapter", "evil-cli", "--json").json()
    assert [7, 5, 3] == [e["position"] for e in seen.json()]
    assert [] == up.json()["ancestors"]
    assert ([], [(6, "backend-7", True)]) == (
        radius["descendants"],
        [(r["position"], r["task_id"], r["links"]) for r in radius["receipts"]],
    )
