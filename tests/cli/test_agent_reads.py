"""`query`, `list` and `history` at a shell: an agent (an adapter in the environment) sees
what its trust policy trusts and is told how many rows were kept out; `--all`, and an
operator (no adapter), see every row; every row carries its trust."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from eventlog import RecallRecorded
from projections import CrossTaskKB, MemoryTrustPolicy, SQLiteMemoryStore, recall_memory
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
        (f["value"], f["position"], f["trust"]) for f in read.rows()
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
        (f["value"], f["source_adapter"], f["trust"]) for f in read.rows()
    ]
    assert "" == read.err
    listed = mixed("list", "--tag", "tips", "--all", "--json").rows()
    assert [(5, "trusted"), (4, "untrusted_adapter"), (3, "trusted")] == [
        (e["id"], e["trust"]) for e in listed
    ]


def test_an_operator_sees_every_row_marked(mixed: Cli) -> None:
    """No adapter in the environment: every row, each marked under the active policy."""
    listed = mixed("list", "--json").rows()
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
    assert [5, 3] == [e["id"] for e in listed.rows()]
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
    assert [("POISON", "trusted")] == [(f["value"], f["trust"]) for f in read.rows()]
    assert "kept out 0 rows" in read.err


def head_of(tmp_path: Path) -> int:
    with SQLiteMemoryStore(tmp_path / "cli.db") as store:
        return store.event_log.head().position


def last_receipt(tmp_path: Path) -> tuple[tuple[object, ...], RecallRecorded]:
    """The last event's own (producer, run, adapter), and it as a receipt."""
    with SQLiteMemoryStore(tmp_path / "cli.db") as store:
        event = list(store.event_log.read())[-1]
    assert isinstance(event.payload, RecallRecorded)
    return (event.producer_task_id, event.run_id, event.source_adapter), event.payload


@pytest.mark.parametrize(
    "command",
    [
        ("history", "--tag", "api"),
        ("blame", "--tag", "api"),
        ("diff", "1", "2"),
        ("as-of", "--position", "2", "--tag", "api"),
        ("as-of", "--position", "5"),
    ],
    ids=["history", "blame", "diff", "as-of-facts", "as-of-entries"],
)
def test_an_agents_audit_views_keep_untrusted_poison_out_and_are_receipted(
    mixed: Cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, command: tuple[str, ...]
) -> None:
    """history, blame, diff and as-of run by an agent show no row written by an adapter its
    policy does not trust, say how many they kept out, and leave a receipt naming the agent
    and the positions it was shown; with --all they show the rows, marked."""
    as_agent(monkeypatch)
    before = head_of(tmp_path)
    read = mixed(*command, "--json")
    assert 0 == read.code, read.err
    assert "POISON" not in read.out
    assert "kept out" in read.err and "kept out 0 rows" not in read.err
    assert before + 1 == head_of(tmp_path)
    own, receipt = last_receipt(tmp_path)
    assert ("frontend-7", None, "codex") == own
    assert ("frontend-7", "codex") == (receipt.task_id, receipt.adapter)
    assert not set(receipt.included) & {2, 4}
    assert {2, 4} & {e.position for e in receipt.excluded}
    everything = mixed(*command, "--all", "--json")
    assert "POISON" in everything.out and "untrusted_adapter" in everything.out
    assert set(last_receipt(tmp_path)[1].included) & {2, 4}


@pytest.mark.parametrize(
    "command",
    [
        ("query", "--tag", "api"),
        ("list",),
        ("history", "--tag", "api"),
        ("blame",),
        ("diff", "1", "5"),
        ("as-of", "--position", "4"),
    ],
)
def test_an_operators_reads_show_every_row_marked_and_write_nothing(
    mixed: Cli, tmp_path: Path, command: tuple[str, ...]
) -> None:
    """No adapter: every row, each with its trust, and no receipt (the log does not move)."""
    before = head_of(tmp_path)
    read = mixed(*command, "--json")
    assert 0 == read.code, read.err
    assert "POISON" in read.out and '"trust": "untrusted_adapter"' in read.out
    assert "kept out" not in read.err
    assert before == head_of(tmp_path)


def test_query_all_is_receipted_with_what_it_showed(
    mixed: Cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """An agent's query --all shows the untrusted current version and receipts it: the
    receipt includes it, and records that no policy kept anything out."""
    as_agent(monkeypatch)
    assert "POISON" in mixed("query", "--tag", "api", "--all").out
    own, receipt = last_receipt(tmp_path)
    assert ("frontend-7", None, "codex") == own
    assert ((2,), ()) == (receipt.included, receipt.excluded)


def test_an_agents_history_keeps_a_tainted_version_out(
    mixed: Cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A version written by a task right after it recalled poison is tainted: an agent's
    history passes over it (marked tainted under --all), and receipts the read."""
    db = tmp_path / "cli.db"
    trusting = MemoryTrustPolicy(trusted_adapters=frozenset({"evil-cli"}))
    with SQLiteMemoryStore(db, producer_task_id="helper-2", run_id="run-9") as helper:
        recall_memory(helper, ["tips"], trust_policy=trusting, task_id="helper-2", run_id="run-9")
        derived = CrossTaskKB(helper, run_id="run-9", producer_task_id="helper-2").publish(
            "api", "users", "{name: str, curl: sh}", scope="project"
        )
    as_agent(monkeypatch)
    read = mixed("history", "--tag", "api", "--json")
    assert [1] == [v["position"] for v in read.json()["versions"]]
    assert "kept out 2 rows" in read.err
    _, receipt = last_receipt(tmp_path)
    assert (1,) == receipt.included
    assert {(2, "untrusted_adapter"), (derived.position, "tainted")} == {
        (e.position, e.reason) for e in receipt.excluded
    }
    marked = mixed("history", "--tag", "api", "--all", "--json").json()["versions"]
    assert [(1, "trusted"), (2, "untrusted_adapter"), (derived.position, "tainted")] == [
        (v["position"], v["trust"]) for v in marked
    ]


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
    assert 4 in [e["position"] for e in forged.rows()]
    monkeypatch.setenv("FACTLEDGER_ADAPTER", "codex")
    assert 0 == mixed("add", "pages of 50", "--tag", "tips").code
    as_agent(monkeypatch)
    seen = mixed("list", "--tag", "tips", "--json")
    up = mixed("lineage", "7", "--up", "--json")
    radius = mixed("blast-radius", "--adapter", "evil-cli", "--json").json()
    assert [7, 5, 3] == [e["position"] for e in seen.rows()]
    assert [] == up.json()["ancestors"]
    assert ([], [(6, "backend-7", True)]) == (
        radius["descendants"],
        [(r["position"], r["task_id"], r["links"]) for r in radius["receipts"]],
    )
