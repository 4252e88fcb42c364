"""Agents reading a log in PostgreSQL through host caches, as a superuser naming an adapter
and as logins `pg add-agent` bound to one: every read works and is receipted under the
reader's adapter, which the database lets that login append."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import closing
from pathlib import Path

import pytest

from eventlog import RecallRecorded, RecordedEvent, open_log
from tests.cli.conftest import Result, log_with_codex_login
from tests.postgres import PgLog

Cli = Callable[..., Result]
READS = (
    ("query", "--tag", "api"),
    ("query", "--tag", "api", "--all"),
    ("list",),
    ("list", "--all"),
    ("history", "--tag", "api"),
    ("blame", "--tag", "api"),
    ("diff", "2", "3"),
    ("as-of", "--position", "3", "--tag", "api"),
    ("as-of", "--position", "4"),
)
"""Every read a shell gives an agent (position 3 is a foreign adapter's overwrite)."""


def events(dsn: str) -> list[RecordedEvent]:
    with closing(open_log(dsn, read_only=True)) as log:
        return list(log.read())


@pytest.fixture
def seeded(cli: Cli, pg: PgLog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A log in PostgreSQL made with its operator key (1), with an agent login `<prefix>_codex`
    bound to codex: the operator's fact (2), evil-cli's overwrite of it (3), the operator's
    entry (4). Returns the login."""
    login = log_with_codex_login(cli, pg, tmp_path)
    operator = str(tmp_path / "operator" / "cache.db")
    assert (
        0
        == cli(
            "share", "users", "{name: str}", "--tag", "api", "--dsn", pg.dsn, db_path=operator
        ).code
    )
    monkeypatch.setenv("FACTLEDGER_ADAPTER", "evil-cli")
    assert (
        0 == cli("share", "users", "POISON", "--tag", "api", "--dsn", pg.dsn, db_path=operator).code
    )
    monkeypatch.delenv("FACTLEDGER_ADAPTER")
    assert 0 == cli("add", "use httpx", "--tag", "api", "--dsn", pg.dsn, db_path=operator).code
    monkeypatch.setenv("FACTLEDGER_TASK_ID", "review-2")
    return pg.as_role(login)


def test_an_agent_reads_through_a_new_host_cache(
    cli: Cli, pg: PgLog, seeded: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`FACTLEDGER_ADAPTER=codex factledger query --tag api --json --dsn DSN --db NEW.db`
    answers (it failed with 'cannot start a transaction within a transaction'): the trusted
    version, and a receipt under codex."""
    monkeypatch.setenv("FACTLEDGER_ADAPTER", "codex")
    read = cli("query", "--tag", "api", "--json", "--dsn", pg.dsn, db_path=str(tmp_path / "NEW.db"))
    assert (0, ["{name: str}"]) == (read.code, [f["value"] for f in read.rows()]), read.err
    receipt = events(pg.dsn)[-1]
    assert isinstance(receipt.payload, RecallRecorded)
    assert ("review-2", "codex", (2,)) == (
        receipt.producer_task_id,
        receipt.source_adapter,
        receipt.payload.included,
    )


@pytest.mark.parametrize("named", [True, False], ids=["adapter-named", "adapter-from-login"])
def test_a_bound_login_reads_and_each_read_is_receipted_under_its_adapter(
    cli: Cli, seeded: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, named: bool
) -> None:
    """Through its own host cache, a login bound to codex runs every read, whether
    FACTLEDGER_ADAPTER names codex or nothing (the login's binding is the reader's adapter):
    no poison unless --all, and one receipt each, the event and payload both under codex."""
    if named:
        monkeypatch.setenv("FACTLEDGER_ADAPTER", "codex")
    cache = str(tmp_path / "agent" / "cache.db")
    for command in READS:
        before = len(events(seeded))
        read = cli(*command, "--json", "--dsn", seeded, db_path=cache)
        assert 0 == read.code, f"{command}: {read.err}"
        assert ("POISON" in read.out) == ("--all" in command), command
        appended = events(seeded)[before:]
        assert 1 == len(appended), command
        [receipt] = appended
        assert isinstance(receipt.payload, RecallRecorded), command
        assert ("review-2", "codex", "codex") == (
            receipt.producer_task_id,
            receipt.source_adapter,
            receipt.payload.adapter,
        ), command


def test_a_bound_login_writes_as_its_adapter_and_refuses_another_in_one_line(
    cli: Cli, seeded: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """share without FACTLEDGER_ADAPTER writes under the login's adapter; naming another
    adapter is refused before anything is written, in one line naming both."""
    cache = str(tmp_path / "agent" / "cache.db")
    shared = cli("share", "k", "v", "--tag", "t", "--json", "--dsn", seeded, db_path=cache)
    assert (0, "codex") == (shared.code, shared.json()["source_adapter"]), shared.err
    before = len(events(seeded))
    monkeypatch.setenv("FACTLEDGER_ADAPTER", "claude-code")
    for command in (("share", "k", "v2", "--tag", "t"), ("query", "--tag", "t")):
        refused = cli(*command, "--dsn", seeded, db_path=cache)
        assert 1 == refused.code
        assert "bound to adapter 'codex'" in refused.err and "'claude-code'" in refused.err
        assert 1 == len(refused.err.strip().splitlines())
    assert before == len(events(seeded))
