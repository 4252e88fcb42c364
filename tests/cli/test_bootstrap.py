"""The bootstrap takeover, held. A log is made with its operator key in one step (`init
--operator-key`, `pg init --operator-key`); an agent, whether it holds a shell over a file
or its own PostgreSQL login through its host's cache, can never make itself the operator,
act as one, or (on PostgreSQL) write before there is one."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

import pytest

from eventlog import open_log
from replay import list_operators, read_operator_key
from tests.cli.conftest import Result
from tests.cli.test_operator_commands import FORGED_ROWS
from tests.postgres import PgLog
from tests.projections.test_legacy import legacy_file

Cli = Callable[..., Result]


def keygen(cli: Cli, path: Path) -> Path:
    """A new operator key pair; returns the private key's path."""
    assert 0 == cli("keygen", str(path), db_path=None).code
    return path


def head(target: str | Path) -> int:
    with closing(open_log(target, read_only=True)) as log:
        return log.head().position


def kinds(target: str | Path) -> list[str]:
    with closing(open_log(target, read_only=True)) as log:
        return [record.kind for record in log.read()]


# -- a log in a file ----------------------------------------------------------------------


def test_init_makes_the_log_with_its_operator_as_its_first_event(cli: Cli, tmp_path: Path) -> None:
    """`init --operator-key` creates the file's log with the key registered, self-signed, at
    position 1: the log is never open, and verify passes."""
    key = keygen(cli, tmp_path / "ops.key")
    made = cli("init", "--operator-key", str(key), "--json")
    assert (0, "") == (made.code, made.err)
    shown = made.json()
    assert (True, read_operator_key(key).key_id, 1, None) == (
        shown["created"],
        shown["operator_key_id"],
        shown["operators"],
        shown["imported"],
    )
    listed = list_operators(tmp_path / "cli.db")
    assert listed.enforced
    assert [(1, read_operator_key(key).key_id)] == [
        (o.added_position, o.added_by_key) for o in listed.operators
    ]
    assert ["operator_added"] == kinds(tmp_path / "cli.db")
    assert 0 == cli("verify").code


def test_after_init_an_agent_cannot_make_itself_the_operator(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a log made without a key, whoever runs `operator add` first becomes its operator;
    on one made by `init --operator-key`, an agent's own key is refused, as are its unsigned
    quarantine and policy, and nothing is written."""
    open_log_made = cli("init", db_path=str(tmp_path / "open.db"))
    assert 0 == open_log_made.code and "any local user can act as operator" in open_log_made.err
    key = keygen(cli, tmp_path / "ops.key")
    assert 0 == cli("init", "--operator-key", str(key)).code
    assert 0 == cli("add", "Run tests with pytest -q", "--tag", "backend").code
    monkeypatch.setenv("FACTLEDGER_ADAPTER", "codex")
    intruder = keygen(cli, tmp_path / "intruder.key")
    taken = cli("operator", "add", f"{intruder}.pub", "--key", str(intruder))
    assert 1 == taken.code and "is not an operator key of this log" in taken.err, taken.err
    for action in (
        ("quarantine", "--position", "2", "--reason", "mine now"),
        ("policy", "set", "backend", "--on-conflict", "deny"),
    ):
        refused = cli(*action)
        assert 1 == refused.code and "needs an operator key" in refused.err, refused.err
    assert 2 == head(tmp_path / "cli.db")
    taken_open = cli(
        "operator",
        "add",
        f"{intruder}.pub",
        "--key",
        str(intruder),
        db_path=str(tmp_path / "open.db"),
    )
    assert 0 == taken_open.code, "an open log's first `operator add` wins: what init prevents"


def test_init_on_a_log_that_exists_writes_nothing(cli: Cli, tmp_path: Path) -> None:
    """Run again, `init` changes no byte: with the log's own key it says so, with another key
    it refuses (exit 1), without a key it reports the log."""
    key = keygen(cli, tmp_path / "ops.key")
    other = keygen(cli, tmp_path / "other.key")
    assert 0 == cli("init", "--operator-key", str(key)).code
    before = (tmp_path / "cli.db").read_bytes()
    again = cli("init", "--operator-key", str(key), "--json")
    assert (0, False, 1) == (again.code, again.json()["created"], again.json()["operators"])
    refused = cli("init", "--operator-key", str(other))
    assert 1 == refused.code
    assert f"key {read_operator_key(other).key_id} (other) is not one of its operator" in (
        refused.err
    )
    assert 0 == cli("init").code
    assert before == (tmp_path / "cli.db").read_bytes()


def test_init_makes_files_only(cli: Cli, pg: PgLog) -> None:
    """A log in PostgreSQL is made by `pg init`: `init --dsn` is a usage error naming it."""
    result = cli("init", "--dsn", pg.dsn)
    assert 1 == result.code and "pg init" in result.err
    with pytest.raises(Exception, match="no factledger log"):
        head(pg.dsn)


def test_init_on_a_legacy_file_imports_its_rows_signed(cli: Cli, tmp_path: Path) -> None:
    """On a file of the replaced store, `init --operator-key` registers the key, then imports
    the `memory` rows signed by it: their claims are honoured."""
    db = tmp_path / "legacy.db"
    legacy_file(db, FORGED_ROWS)
    key = keygen(cli, tmp_path / "ops.key")
    made = cli("init", "--operator-key", str(key), "--json", db_path=str(db))
    assert 0 == made.code, made.err
    report = made.json()["imported"]
    assert (2, True, 2, 3) == (
        report["imported"],
        report["claims_honoured"],
        report["first_position"],
        report["last_position"],
    )
    listed = cli("list", "--all", "--json", db_path=str(db)).rows()
    assert {("claude-code", "researcher-1"), (None, None)} == {
        (e["source_adapter"], e["task_id"]) for e in listed
    }
    with closing(sqlite3.connect(db)) as raw:
        assert 2 == raw.execute("SELECT count(*) FROM memory").fetchone()[0]


def test_init_on_a_legacy_file_with_a_bad_row_makes_no_log(cli: Cli, tmp_path: Path) -> None:
    """The operator and the signed import are one transaction: a row that cannot be imported
    is named, and the file is left without a log, its bytes unchanged."""
    db = tmp_path / "legacy.db"
    legacy_file(db, [*FORGED_ROWS, (3, "no-such-type", "x", "", 1.0, None, 1.6e9, "", "", None)])
    before = db.read_bytes()
    key = keygen(cli, tmp_path / "ops.key")
    result = cli("init", "--operator-key", str(key), db_path=str(db))
    assert 1 == result.code and "legacy memory row id=3" in result.err, result.err
    assert before == db.read_bytes()
    with pytest.raises(Exception, match="no factledger log"):
        head(db)


# -- a log in PostgreSQL, agents through their own logins and their hosts' caches ------------


@pytest.fixture
def hosts(tmp_path: Path) -> tuple[str, str]:
    """The operators' host's cache and an agent host's cache, neither made yet."""
    return str(tmp_path / "ops" / "cache.db"), str(tmp_path / "agent" / "cache.db")


def bind_codex(cli: Cli, pg: PgLog) -> str:
    """`pg add-agent` for codex; returns the agent login's DSN."""
    role = f"{pg.roles}_codex"
    bound = cli(
        "pg", "add-agent", role, "--adapter", "codex", "--role-prefix", pg.roles,
        "--dsn", pg.dsn, db_path=None,
    )  # fmt: skip
    assert 0 == bound.code, bound.err
    return pg.as_role(role)


def test_an_agent_login_cannot_take_a_log_made_without_an_operator(
    cli: Cli, pg: PgLog, hosts: tuple[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reproduction: `pg init` without a key, then an agent's login, through its host's
    cache, registers its own key. The database refuses it, and the agent's plain writes too,
    until an operator registers through a login no adapter binds; the agent's key is never
    an operator, and once one is, the agent writes."""
    ops, host = hosts
    made = cli("pg", "init", "--dsn", pg.dsn, "--role-prefix", pg.roles, db_path=None)
    assert 0 == made.code and "agent logins can write nothing" in made.err, made.err
    agent = ("--dsn", bind_codex(cli, pg))
    monkeypatch.setenv("FACTLEDGER_ADAPTER", "codex")
    intruder = keygen(cli, tmp_path / "intruder.key")
    takeover = cli(
        "operator", "add", f"{intruder}.pub", "--key", str(intruder), *agent, db_path=host
    )
    assert 1 == takeover.code and "is an agent login" in takeover.err, takeover.err
    early = cli("share", "k", "v", "--tag", "api", *agent, db_path=host)
    assert 1 == early.code and "the log has no operator key" in early.err, early.err
    assert 0 == head(pg.dsn)
    monkeypatch.delenv("FACTLEDGER_ADAPTER")
    key = keygen(cli, tmp_path / "ops.key")
    added = cli("operator", "add", f"{key}.pub", "--key", str(key), "--dsn", pg.dsn, db_path=ops)
    assert 0 == added.code, added.err
    monkeypatch.setenv("FACTLEDGER_ADAPTER", "codex")
    assert 0 == cli("share", "k", "v", "--tag", "api", *agent, db_path=host).code
    assert [read_operator_key(key).key_id] == [o.key_id for o in list_operators(pg.dsn).operators]


def test_an_agent_login_never_acts_as_operator_even_holding_the_key(
    cli: Cli, pg: PgLog, hosts: tuple[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`pg init --operator-key` registers the key at position 1. An agent's login given the
    operator's own private key (leaked into its environment) still cannot quarantine, set a
    policy, add a key or import through its host's cache: the database refuses each by its
    kind, whatever the signature, and the log is unchanged."""
    ops, host = hosts
    key = keygen(cli, tmp_path / "ops.key")
    made = cli(
        "pg", "init", "--dsn", pg.dsn, "--role-prefix", pg.roles, "--operator-key", str(key),
        db_path=None,
    )  # fmt: skip
    assert (0, "") == (made.code, made.err)
    agent = ("--dsn", bind_codex(cli, pg))
    monkeypatch.setenv("FACTLEDGER_ADAPTER", "codex")
    monkeypatch.setenv("FACTLEDGER_OPERATOR_KEY", str(key))
    assert 0 == cli("share", "k", "mine", "--tag", "api", *agent, db_path=host).code
    assert ["operator_added", "fact_published"] == kinds(pg.dsn)
    forged = tmp_path / "forged.db"
    legacy_file(forged, FORGED_ROWS)
    intruder = keygen(cli, tmp_path / "intruder.key")
    for action in (
        ("quarantine", "--adapter", "codex", "--reason", "hide my tracks"),
        ("policy", "set", "api", "--on-conflict", "deny"),
        ("operator", "add", f"{intruder}.pub"),
        ("import-legacy", str(forged)),
    ):
        refused = cli(*action, *agent, db_path=host)
        assert 1 == refused.code and "is an agent login" in refused.err, (action, refused.err)
    assert ["operator_added", "fact_published"] == kinds(pg.dsn)
    monkeypatch.delenv("FACTLEDGER_ADAPTER")
    done = cli("quarantine", "--adapter", "codex", "--reason", "by the operator", "--dsn",
               pg.dsn, db_path=ops)  # fmt: skip
    assert 0 == done.code, done.err


def test_pg_init_run_again_keeps_the_log_and_checks_the_key(
    cli: Cli, pg: PgLog, tmp_path: Path
) -> None:
    """`pg init --operator-key` run again re-grants and changes nothing in the log; another
    key is refused (exit 1), and so is a key for a log made without one."""
    key = keygen(cli, tmp_path / "ops.key")
    other = keygen(cli, tmp_path / "other.key")
    init = ("pg", "init", "--dsn", pg.dsn, "--role-prefix", pg.roles)
    assert 0 == cli(*init, "--operator-key", str(key), db_path=None).code
    again = cli(*init, "--operator-key", str(key), "--json", db_path=None)
    assert (0, False) == (again.code, again.json()["created"])
    refused = cli(*init, "--operator-key", str(other), db_path=None)
    assert 1 == refused.code and "is not one of its operator keys" in refused.err
    assert ["operator_added"] == kinds(pg.dsn)
