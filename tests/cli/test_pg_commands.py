"""`factledger pg init` and `pg add-agent`: the shared log's roles, from the command line."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from eventlog import FactPublished, NewEvent, PermissionDeniedError, open_log
from replay import read_operator_key
from tests.cli.conftest import Result
from tests.postgres import PgLog

Cli = Callable[..., Result]


def fact(adapter: str | None) -> NewEvent:
    payload = FactPublished(scope="project", tag="api", key="users", value="{name: str}")
    return NewEvent(payload=payload, producer_task_id="backend-1", source_adapter=adapter)


def test_init_then_add_agent_binds_the_role_to_its_adapter(
    cli: Cli, pg: PgLog, tmp_path: Path
) -> None:
    """pg init makes the roles and the log with its operator; pg add-agent makes a login the
    database holds to one adapter."""
    key = str(tmp_path / "ops.key")
    assert 0 == cli("keygen", key, db_path=None).code
    made = cli(
        "pg", "init", "--dsn", pg.dsn, "--role-prefix", pg.roles, "--operator-key", key,
        "--json", db_path=None,
    )  # fmt: skip
    assert 0 == made.code, made.err
    shown = made.json()
    assert {"owner", "writer", "reader"} == set(shown["roles"])
    assert (True, read_operator_key(key).key_id, 1) == (
        shown["created"],
        shown["operator_key_id"],
        shown["operators"],
    )
    role = f"{pg.roles}_codex"
    bound = cli(
        "pg", "add-agent", role, "--adapter", "codex", "--dsn", pg.dsn,
        "--role-prefix", pg.roles, db_path=None,
    )  # fmt: skip
    assert (0, f"role {role} may write as codex only\n") == (bound.code, bound.out)
    agent = open_log(pg.as_role(role))
    try:
        assert 2 == agent.append(fact("codex")).position
        with pytest.raises(PermissionDeniedError):
            agent.append(fact("claude-code"))
        assert 2 == agent.head().position
    finally:
        agent.close()


def test_the_dsn_comes_from_the_environment(
    cli: Cli, pg: PgLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without --dsn, FACTLEDGER_DSN names the server."""
    monkeypatch.setenv("FACTLEDGER_DSN", pg.dsn)
    assert 0 == cli("pg", "init", "--role-prefix", pg.roles, db_path=None).code


def test_no_dsn_is_a_one_line_error(cli: Cli) -> None:
    """With neither --dsn nor FACTLEDGER_DSN the command says which to give, and exits 1."""
    result = cli("pg", "init", db_path=None)
    assert 1 == result.code
    assert "--dsn" in result.err and "FACTLEDGER_DSN" in result.err
    assert 1 == len(result.err.strip().splitlines())


def test_an_adapter_that_is_not_an_identifier_is_refused(cli: Cli, pg: PgLog) -> None:
    """A lookalike adapter name is refused before anything reaches the server."""
    cli("pg", "init", "--dsn", pg.dsn, "--role-prefix", pg.roles, db_path=None)
    result = cli(
        "pg", "add-agent", f"{pg.roles}_x", "--adapter", "cl\u0430ude-code", "--dsn", pg.dsn,
        "--role-prefix", pg.roles, db_path=None,
    )  # fmt: skip
    assert 1 == result.code and "--adapter" in result.err
