"""`factledger receipts`: the receipts of reads, filtered by task and run, from the log."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.cli.conftest import Result

Cli = Callable[..., Result]


@pytest.fixture
def receipted(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> Cli:
    """1: an entry; 2 and 3: list and query receipts for frontend-7 (run r1) and backend-2."""
    cli("add", "run pytest -q", "--tag", "tips")
    monkeypatch.setenv("FACTLEDGER_ADAPTER", "codex")
    monkeypatch.setenv("FACTLEDGER_TASK_ID", "frontend-7")
    monkeypatch.setenv("FACTLEDGER_RUN_ID", "r1")
    cli("list", "--tag", "tips")
    monkeypatch.setenv("FACTLEDGER_TASK_ID", "backend-2")
    monkeypatch.delenv("FACTLEDGER_RUN_ID")
    cli("query", "--tag", "tips")
    for name in ("FACTLEDGER_ADAPTER", "FACTLEDGER_TASK_ID"):
        monkeypatch.delenv(name)
    return cli


def rows(result: Result) -> list[dict[str, Any]]:
    """The rows of a --json list (a bare list, or an object holding them under "rows")."""
    found = result.json()
    return list(found["rows"] if isinstance(found, dict) else found)


def test_receipts_lists_every_read_with_counts(receipted: Cli) -> None:
    """Each reader is named, with how many positions it was shown and kept out."""
    result = receipted("receipts")
    assert (0, "") == (result.code, result.err)
    assert "frontend-7" in result.out and "backend-2" in result.out
    found = rows(receipted("receipts", "--json"))
    assert [(2, "frontend-7", "r1", "codex", 1, 0), (3, "backend-2", None, "codex", 0, 0)] == [
        (r["position"], r["task_id"], r["run_id"], r["adapter"], r["shown"], r["kept_out"])
        for r in found
    ]


def test_receipts_json_filters_by_task_and_run(receipted: Cli) -> None:
    """--task and --run narrow; --json gives each receipt whole."""
    [only] = rows(receipted("receipts", "--task", "frontend-7", "--run", "r1", "--json"))
    assert (2, [1], [], ["codex"]) == (
        only["position"],
        only["included"],
        only["excluded"],
        only["policy"]["trusted_adapters"],
    )
    assert [3] == [
        r["position"] for r in rows(receipted("receipts", "--task", "backend-2", "--json"))
    ]
    assert [] == rows(receipted("receipts", "--run", "nope", "--json"))


def test_receipts_says_when_the_limit_cut_the_list(receipted: Cli) -> None:
    result = receipted("receipts", "--limit", "1")
    assert "more follow (--after 2)" in result.err
    assert [3] == [r["position"] for r in rows(receipted("receipts", "--after", "2", "--json"))]


@pytest.mark.parametrize(
    "arguments",
    [("--task", "t\x1b[2J"), ("--run", "x" * 5000), ("--after", "-1"), ("--limit", "0")],
    ids=["control", "huge", "negative", "zero"],
)
def test_receipts_refuses_bad_input_in_one_line(receipted: Cli, arguments: tuple[str, ...]) -> None:
    result = receipted("receipts", *arguments)
    assert (1, "") == (result.code, result.out)
    assert 1 == len(result.err.splitlines()) and "\x1b" not in result.err


def test_receipts_of_a_missing_log_creates_nothing(cli: Cli, tmp_path: Path) -> None:
    result = cli("receipts", db_path="nowhere.db")
    assert 1 == result.code and "no database at nowhere.db" in result.err
    assert not (tmp_path / "nowhere.db").exists()
