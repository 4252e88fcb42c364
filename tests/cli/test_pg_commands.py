"""`factledger pg init` and `pg add-agent`: the shared log's roles, from the command line."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from eventlog import (
    FactledgerError,
    FactPublished,
    NewEvent,
    PermissionDeniedError,
    StorageError,
    open_log,
)
from replay import Ledger, read_operator_key
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


@pytest.fixture
def agent_log(cli: Cli, pg: PgLog, tmp_path: Path) -> tuple[str, str]:
    """A log made with its operator key (1) and agent login `<prefix>_codex` bound to codex,
    which wrote a fact (2). Returns the login and the operator key's file."""
    key = str(tmp_path / "ops.key")
    assert 0 == cli("keygen", key, db_path=None).code
    made = cli("pg", "init", "--dsn", pg.dsn, "--role-prefix", pg.roles, "--operator-key", key,
               db_path=None)  # fmt: skip
    assert 0 == made.code, made.err
    role = f"{pg.roles}_codex"
    assert 0 == pg_cli(cli, pg, "add-agent", role, "--adapter", "codex").code
    agent = open_log(pg.as_role(role))
    try:
        assert 2 == agent.append(fact("codex")).position
    finally:
        agent.close()
    return role, key


def pg_cli(cli: Cli, pg: PgLog, *args: str) -> Result:
    return cli("pg", *args, "--dsn", pg.dsn, "--role-prefix", pg.roles, db_path=None)


def test_remove_agent_ends_the_login_and_keeps_its_history(
    cli: Cli, pg: PgLog, agent_log: tuple[str, str], tmp_path: Path
) -> None:
    """After pg remove-agent the role cannot connect, its open session can no longer write,
    and the log still holds (and history still shows) what it wrote."""
    role, _ = agent_log
    open_session = open_log(pg.as_role(role))
    removed = pg_cli(cli, pg, "remove-agent", role, "--json")
    assert 0 == removed.code, removed.err
    assert {"role": role, "adapter": "codex", "sessions_ended": 1} == removed.json()
    attempts = 0
    connect = open_session._connect  # type: ignore[attr-defined]

    def counted() -> object:
        nonlocal attempts
        attempts += 1
        return connect()

    open_session._connect = counted  # type: ignore[attr-defined]
    with pytest.raises(FactledgerError, match="not permitted to log in"):
        open_session.append(fact("codex"))
    assert 1 == attempts, "a refused login is final, not retried for busy_timeout_s"
    open_session.close()
    with pytest.raises(FactledgerError, match="not permitted to log in"):
        open_log(pg.as_role(role))
    history = cli("history", "--dsn", pg.dsn, "--json", db_path=str(tmp_path / "cache.db"))
    versions = history.json()["versions"]
    assert [(2, "codex", "{name: str}")] == [
        (v["position"], v["source_adapter"], v["value"]) for v in versions
    ]
    log = open_log(pg.dsn, read_only=True)
    try:
        assert 2 == log.head().position
    finally:
        log.close()


def test_remove_agent_refuses_what_is_no_agent_and_a_second_removal(
    cli: Cli, pg: PgLog, agent_log: tuple[str, str]
) -> None:
    """An unknown role, a role that is not an agent login, and an agent already removed are
    each refused in one line naming the reason, exit 1; nothing changes."""
    role, _ = agent_log
    unknown = pg_cli(cli, pg, "remove-agent", f"{pg.roles}_nobody")
    assert 1 == unknown.code and "no role of that name exists" in unknown.err
    group = pg_cli(cli, pg, "remove-agent", f"{pg.roles}_writer")
    assert 1 == group.code and "it is no agent login" in group.err
    before = pg_cli(cli, pg, "status", "--json").json()
    assert [("active", True, True)] == [(a["state"], a["login"], a["writer"]) for a in
                                        before["agents"]]  # fmt: skip
    assert 0 == pg_cli(cli, pg, "remove-agent", role).code
    again = pg_cli(cli, pg, "remove-agent", role)
    assert 1 == again.code and "already removed" in again.err
    for refused in (unknown, group, again):
        assert 1 == len(refused.err.splitlines())
    readded = pg_cli(cli, pg, "add-agent", role, "--adapter", "codex")
    assert 1 == readded.code and "never restored" in readded.err


def test_status_shows_roles_bindings_head_and_operators(
    cli: Cli, pg: PgLog, agent_log: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """pg status names the three group roles, each agent with its adapter and state, the
    head and the operator keys, as JSON and as text that fits 80 columns."""
    role, key = agent_log
    shown = pg_cli(cli, pg, "status", "--json")
    assert 0 == shown.code, shown.err
    status = shown.json()
    assert (pg.schema, 2) == (status["schema"], status["head_position"])
    assert 64 == len(status["head_chain_hash"])
    assert {"owner", "writer", "reader"} == {r["kind"] for r in status["roles"]}
    assert all(r["exists"] for r in status["roles"])
    assert [(role, "codex", "active")] == [
        (a["role"], a["adapter"], a["state"]) for a in status["agents"]
    ]
    assert [read_operator_key(key).key_id] == [o["key_id"] for o in status["operators"]]
    assert status["operators_enforced"] is True
    assert 0 == pg_cli(cli, pg, "remove-agent", role).code
    monkeypatch.setenv("COLUMNS", "80")
    text = pg_cli(cli, pg, "status").out
    assert max(len(line) for line in text.splitlines()) <= 80
    assert status["head_chain_hash"] in text.split()
    agent_line = next(line for line in text.splitlines() if line.startswith(role))
    assert ["codex", "removed", "no", "no"] == agent_line.split()[1:]


def test_a_write_the_database_refuses_is_one_line(
    cli: Cli, pg: PgLog, agent_log: tuple[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An agent login that signs a quarantine with a stolen operator key is refused by the
    database; the error is the server's one sentence, without psycopg's CONTEXT lines."""
    role, key = agent_log
    monkeypatch.setenv("FACTLEDGER_ADAPTER", "codex")
    refused = cli(
        "quarantine", "--adapter", "codex", "--reason", "x", "--key", key,
        "--dsn", pg.as_role(role), db_path=str(tmp_path / "agent.db"),
    )  # fmt: skip
    assert 1 == refused.code
    assert 1 == len(refused.err.splitlines())
    assert "is an agent login: it may not append quarantine_applied" in refused.err
    assert "CONTEXT" not in refused.err and "PL/pgSQL" not in refused.err


def make_it_as_before_erasure(pg: PgLog) -> None:
    """Take a log back to the schema it had before erasure existed: no `erased` table and
    none of its functions, and `content` refusing every DELETE."""
    import psycopg

    s = pg.schema
    with psycopg.connect(pg.server.dsn, autocommit=True) as conn:
        for statement in (
            f"DROP TABLE {s}.erased",
            f"DROP TRIGGER only_erased ON {s}.content",
            f"DROP TRIGGER append_only ON {s}.content",
            f"CREATE TRIGGER append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON {s}.content"
            f" FOR EACH STATEMENT EXECUTE FUNCTION {s}.refuse_change()",
            f"DROP FUNCTION {s}.erased_positions(bytea), {s}.only_erased(), {s}.check_erased()",
        ):
            conn.execute(statement)


def erasure_setup(pg: PgLog) -> dict[str, object]:
    """What the catalog says of the pieces erasure needs: the `erased` table's owner, who
    may read it, `content`'s triggers, and the functions."""
    import psycopg

    s = pg.schema
    with psycopg.connect(pg.server.dsn, autocommit=True) as conn:
        owner = conn.execute(
            "SELECT tableowner FROM pg_tables WHERE schemaname = %s AND tablename = 'erased'",
            (s,),
        ).fetchone()
        readers = [
            kind
            for kind in ("writer", "reader")
            if owner is not None
            and conn.execute(
                "SELECT has_table_privilege(%s, %s, 'SELECT')",
                (f"{pg.roles}_{kind}", f"{s}.erased"),
            ).fetchone()
            == (True,)
        ]
        triggers = conn.execute(
            "SELECT tgname FROM pg_trigger WHERE tgrelid = %s::regclass AND NOT tgisinternal"
            " ORDER BY 1",
            (f"{s}.content",),
        ).fetchall()
        functions = conn.execute(
            "SELECT p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace"
            " WHERE n.nspname = %s AND p.proname IN ('erased_positions', 'only_erased',"
            " 'check_erased') ORDER BY 1",
            (s,),
        ).fetchall()
    return {
        "owner": owner and owner[0],
        "readers": readers,
        "triggers": [t for (t,) in triggers],
        "functions": [f for (f,) in functions],
    }


def test_pg_init_gives_a_log_made_before_erasure_what_erasure_needs(
    cli: Cli, pg: PgLog, tmp_path: Path
) -> None:
    """On a log made before erasure existed (which refuses every DELETE of a text), pg init,
    run twice, adds the `erased` table (owned by the owner role, readable by writers and
    readers), `content`'s new triggers and the functions. Before it, an operator's erasure is
    refused, naming pg init, and nothing is written (its server would keep the text); after
    it, the erasure removes the text, and a DELETE no erasure names is still refused."""
    import psycopg

    key = str(tmp_path / "ops.key")
    assert 0 == cli("keygen", key, db_path=None).code
    init = ("pg", "init", "--dsn", pg.dsn, "--role-prefix", pg.roles)
    assert 0 == cli(*init, "--operator-key", key, db_path=None).code
    fresh = erasure_setup(pg)
    log = open_log(pg.dsn)
    try:
        secret, kept = (log.append(fact(None)).position, log.append(fact(None)).position)
    finally:
        log.close()
    make_it_as_before_erasure(pg)
    assert {"owner": None, "readers": [], "triggers": ["append_only"], "functions": []} == (
        erasure_setup(pg)
    )
    with Ledger.open(pg.dsn, cache=tmp_path / "ops.db", read_only=False) as ledger:
        head = ledger.event_log.head()
        with pytest.raises(StorageError, match=r"predates erasure.*factledger pg init"):
            ledger.erase([secret], reason="leaked", key=key)
        assert head == ledger.event_log.head()
    for _ in range(2):
        again = cli(*init, db_path=None)
        assert 0 == again.code, again.err
        assert fresh == erasure_setup(pg)
    assert {
        "owner": f"{pg.roles}_owner",
        "readers": ["writer", "reader"],
        "triggers": ["append_only", "only_erased"],
        "functions": ["check_erased", "erased_positions", "only_erased"],
    } == fresh
    with Ledger.open(pg.dsn, cache=tmp_path / "ops.db", read_only=False) as ledger:
        ledger.erase([secret], reason="leaked", key=key)
    contents = f"SELECT position FROM {pg.schema}.content WHERE position IN (%s, %s)"
    with psycopg.connect(pg.server.dsn, autocommit=True) as conn:
        assert [(kept,)] == conn.execute(contents, (secret, kept)).fetchall()
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="only an erasure"):
            conn.execute(f"DELETE FROM {pg.schema}.content WHERE position = %s", (kept,))
