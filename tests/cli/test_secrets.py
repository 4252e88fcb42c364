"""Secrets at the door of the command line: `add`, `share` and `import-legacy` refuse a
secret by default (naming the detector and offset on stderr, never the secret), store it
redacted under FACTLEDGER_SECRETS=redact, and refuse an unknown mode."""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

import pytest

from eventlog import open_log
from tests.cli.conftest import Result
from tests.projections.test_legacy import legacy_file
from tests.projections.test_secrets import GITHUB, SECRETS

Cli = Callable[..., Result]
SLACK = SECRETS["slack-token"]


def rows_in(cli: Cli) -> int:
    return len(cli("list", "--json").rows())


def test_add_and_share_refuse_a_secret_and_write_nothing(
    cli: Cli, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`add` and `share` exit 1 naming the detector and the offset; neither stdout, stderr
    nor the debug logs hold the secret, and the log holds nothing."""
    monkeypatch.setenv("FACTLEDGER_DEBUG", "1")
    caplog.set_level(logging.DEBUG)
    assert 0 == cli("add", "first, so the log exists").code
    added = cli("add", f"the token is {GITHUB}")
    shared = cli("share", "slack", SLACK, "--tag", "ops")
    assert (1, 1) == (added.code, shared.code)
    assert "content holds a secret (github-token) at character 13" in added.err
    assert "error: value holds a secret (slack-token) at character 0" in shared.err
    for result in (added, shared):
        assert GITHUB not in result.out + result.err
        assert SLACK not in result.out + result.err
    assert GITHUB not in caplog.text and SLACK not in caplog.text
    assert 1 == rows_in(cli)


def test_redact_mode_stores_the_marker(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    """Under FACTLEDGER_SECRETS=redact the stored text holds `[REDACTED:<type>]`."""
    monkeypatch.setenv("FACTLEDGER_SECRETS", "redact")
    assert 0 == cli("add", f"the token is {GITHUB}").code
    assert 0 == cli("share", "slack", f"use {SLACK}", "--tag", "ops").code
    assert ["the token is [REDACTED:github-token]"] == [
        row["content"] for row in cli("list", "--json").rows() if row["type"] != "cross_task"
    ]
    assert (
        "use [REDACTED:slack-token]"
        == cli("query", "--tag", "ops", "--raw", "--json").rows()[0]["value"]
    )


def test_an_unknown_mode_is_a_clear_error(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    """FACTLEDGER_SECRETS=off is refused, naming the variable and the modes."""
    monkeypatch.setenv("FACTLEDGER_SECRETS", "off")
    refused = cli("add", "anything")
    assert 1 == refused.code
    assert "FACTLEDGER_SECRETS must be one of refuse, redact, allow, got 'off'" in refused.err


def test_import_legacy_refuses_the_whole_file_naming_the_row(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One secret in a legacy file refuses the whole import, naming the row's id and the
    offset; nothing is imported. Under `redact` every row is imported, the secret redacted."""
    legacy = tmp_path / "legacy.db"
    rows = [
        (1, "learning", "fine", "", 1.0, None, 1700000000.0, "", "", None),
        (2, "learning", f"x {GITHUB}", "", 1.0, None, 1700000001.0, "", "", None),
    ]
    legacy_file(legacy, rows)
    assert 0 == cli("add", "first, so the log exists").code
    refused = cli("import-legacy", str(legacy))
    assert 1 == refused.code
    assert "legacy memory row id=2: content holds a secret (github-token) at character 2" in (
        refused.err
    )
    assert GITHUB not in refused.err + refused.out
    assert 1 == rows_in(cli)
    monkeypatch.setenv("FACTLEDGER_SECRETS", "redact")
    imported = cli("import-legacy", str(legacy), "--json")
    assert 2 == imported.json()["imported"]
    data = b"".join(p.read_bytes() for p in tmp_path.glob("cli.db*"))
    assert GITHUB.encode() not in data
    legacy_rows = sqlite3.connect(legacy).execute("SELECT count(*) FROM memory").fetchone()[0]
    assert 2 == legacy_rows


def test_init_on_a_legacy_file_with_a_secret_refuses_and_writes_no_log(
    cli: Cli, tmp_path: Path
) -> None:
    """`init` on a file of the replaced store screens its rows as `import-legacy` does: a
    secret refuses the whole import, naming the row; no event is written, and the legacy table
    is left as it was."""
    db = tmp_path / "legacy.db"
    legacy_file(db, [(5, "learning", f"ci {GITHUB}", "", 1.0, None, 1700000000.0, "", "", None)])
    made = cli("init", db_path=str(db))
    assert 1 == made.code
    assert "legacy memory row id=5: content holds a secret (github-token) at character 3" in (
        made.err
    )
    assert GITHUB not in made.err + made.out
    with closing(open_log(db, read_only=True)) as log, log.snapshot() as snap:
        assert 0 == snap.head().position
    with closing(sqlite3.connect(db)) as raw:
        assert 1 == raw.execute("SELECT count(*) FROM memory").fetchone()[0]
