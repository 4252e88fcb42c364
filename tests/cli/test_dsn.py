"""The command line against a log in PostgreSQL: `--dsn` names the log, `--db` this host's
cache. Two cache files stand for two hosts sharing one server."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

import pytest

from eventlog import open_log
from tests.cli.conftest import Result
from tests.postgres import PgLog

Cli = Callable[..., Result]


@pytest.fixture
def hosts(tmp_path: Path) -> tuple[str, str]:
    """Two hosts' cache files, neither made yet."""
    return str(tmp_path / "host-a" / "cache.db"), str(tmp_path / "host-b" / "cache.db")


def head(dsn: str) -> int:
    with closing(open_log(dsn, read_only=True)) as log:
        return log.head().position


def init(cli: Cli, pg: PgLog, *, operator_key: Path | None = None) -> None:
    """`pg init` as the superuser; with `operator_key`, a new key registered by it."""
    key = []
    if operator_key is not None:
        assert 0 == cli("keygen", str(operator_key), db_path=None).code
        key = ["--operator-key", str(operator_key)]
    made = cli("pg", "init", "--dsn", pg.dsn, "--role-prefix", pg.roles, *key, db_path=None)
    assert 0 == made.code, made.err


def test_a_fact_shared_on_one_host_is_read_on_another(
    cli: Cli, pg: PgLog, hosts: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """share and add on host A append to the server's log; query and list on host B, with
    its own cache, see them at once; neither host's cache holds the log."""
    a, b = hosts
    init(cli, pg)
    monkeypatch.setenv("FACTLEDGER_TASK_ID", "backend-1")
    shared = cli("share", "base_url", "https://api", "--tag", "api", "--dsn", pg.dsn, db_path=a)
    assert (0, "") == (shared.code, shared.err), shared.err
    assert 0 == cli("add", "use httpx", "--dsn", pg.dsn, db_path=a).code
    found = cli("query", "--tag", "api", "--json", "--dsn", pg.dsn, db_path=b)
    assert 0 == found.code, found.err
    [fact] = found.rows()
    assert ("https://api", "backend-1", 1) == (
        fact["value"],
        fact["producer_task_id"],
        fact["position"],
    )
    listed = cli("--dsn", pg.dsn, "list", "--json", db_path=b)
    assert "use httpx" in [e["content"] for e in listed.rows()]
    assert 2 == head(pg.dsn)
    for cache in hosts:
        with closing(sqlite3.connect(cache)) as db:
            tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master")}
        assert "fl_fact" in tables and "fl_events" not in tables


def test_the_dsn_comes_from_the_environment(
    cli: Cli, pg: PgLog, hosts: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """FACTLEDGER_DSN names the log when --dsn is not given."""
    a, b = hosts
    init(cli, pg)
    monkeypatch.setenv("FACTLEDGER_DSN", pg.dsn)
    assert 0 == cli("share", "k", "v", "--tag", "t", db_path=a).code
    assert ["v"] == [f["value"] for f in cli("query", "--tag", "t", "--json", db_path=b).rows()]


def test_audits_read_the_log_by_its_dsn(
    cli: Cli, pg: PgLog, hosts: tuple[str, str], tmp_path: Path
) -> None:
    """verify, checkpoint, prove, history, blame, blast-radius, lineage, diff, as-of,
    export and rebuild work against the server's log, from a host that wrote nothing."""
    a, b = hosts
    init(cli, pg)
    dsn = ("--dsn", pg.dsn)
    for value in ("v1", "v2"):
        assert 0 == cli("share", "base_url", value, "--tag", "api", *dsn, db_path=a).code
    verified = cli("verify", "--json", *dsn, db_path=b)
    assert (0, True, 2) == (verified.code, verified.json()["ok"], verified.json()["checked"])
    taken = cli("checkpoint", "--out", str(tmp_path / "cp.txt"), *dsn, db_path=b)
    assert 0 == taken.code, taken.err
    proved = cli("prove", "1", "--checkpoint", str(tmp_path / "cp.txt"), "--json", *dsn, db_path=b)
    assert 0 == proved.code, proved.err
    again = cli("verify", "--checkpoint", str(tmp_path / "cp.txt"), *dsn, db_path=b)
    assert 0 == again.code, again.err
    versions = cli("history", "--tag", "api", "--key", "base_url", "--json", *dsn, db_path=b)
    assert ["v1", "v2"] == [v["value"] for v in versions.json()["versions"]]
    assert 0 == cli("blame", "--json", *dsn, db_path=b).code
    radius = cli("blast-radius", "--producer", "manual-cli", "--json", *dsn, db_path=b)
    assert 0 == radius.code, radius.err
    assert [1, 2] == sorted(e["position"] for e in radius.json()["events"])
    assert 0 == cli("lineage", "1", "--json", *dsn, db_path=b).code
    changed = cli("diff", "1", "2", "--json", *dsn, db_path=b)
    assert ["base_url"] == [c["key"] for c in changed.json()["changed"]]
    then = cli("as-of", "--position", "1", "--tag", "api", "--json", *dsn, db_path=b)
    assert ["v1"] == [f["value"] for f in then.rows()]
    exported = cli("export", *dsn, db_path=b)
    assert 3 == len(exported.out.splitlines())
    fresh = str(tmp_path / "host-c" / "cache.db")
    rebuilt = cli("rebuild", "--json", *dsn, db_path=fresh)
    assert (0, True) == (rebuilt.code, rebuilt.json()["matches"]), rebuilt.err
    assert 2 == head(pg.dsn)


def test_operator_actions_append_to_the_log_signed(
    cli: Cli, pg: PgLog, hosts: tuple[str, str], tmp_path: Path
) -> None:
    """An operator key registered from one host signs a quarantine and its release from the
    other; an agent's read on the first host no longer sees the quarantined fact."""
    a, b = hosts
    init(cli, pg)
    dsn = ("--dsn", pg.dsn)
    key = str(tmp_path / "operator.key")
    assert 0 == cli("keygen", key, db_path=None).code
    assert 0 == cli("operator", "add", f"{key}.pub", "--key", key, *dsn, db_path=a).code
    assert 0 == cli("share", "u", "poison", "--tag", "api", *dsn, db_path=a).code
    held = cli(
        "quarantine", "--position", "2", "--reason", "poison", "--key", key, "--json", *dsn,
        db_path=b,
    )  # fmt: skip
    assert 0 == held.code, held.err
    assert [] == cli("query", "--tag", "api", "--json", *dsn, db_path=a).rows()
    position = str(held.json()["quarantine_position"])
    assert 0 == cli("release", position, "--reason", "fine", "--key", key, *dsn, db_path=a).code
    assert ["poison"] == [
        f["value"] for f in cli("query", "--tag", "api", "--json", *dsn, db_path=b).rows()
    ]
    operators = cli("operator", "list", "--json", *dsn, db_path=b)
    assert operators.json()["enforced"]


def test_a_lookalike_adapter_writes_nothing(
    cli: Cli, pg: PgLog, hosts: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An adapter in the environment that only looks like a name is refused under its
    variable's name before the server is written."""
    a, _ = hosts
    init(cli, pg)
    monkeypatch.setenv("FACTLEDGER_ADAPTER", "cl\u0430ude-code")
    result = cli("share", "k", "v", "--tag", "t", "--dsn", pg.dsn, db_path=a)
    assert 1 == result.code and "FACTLEDGER_ADAPTER" in result.err
    assert 0 == head(pg.dsn)


def test_a_role_bound_to_an_adapter_cannot_write_as_another(
    cli: Cli, pg: PgLog, hosts: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Connected as an agent's role, the command line writes as its adapter, and the
    database refuses a write under any other: one line, exit 1, nothing written."""
    a, _ = hosts
    init(cli, pg, operator_key=Path(a).parent.parent / "ops.key")
    role = f"{pg.roles}_codex"
    bound = cli("pg", "add-agent", role, "--adapter", "codex", "--role-prefix", pg.roles,
                "--dsn", pg.dsn, db_path=None)  # fmt: skip
    assert 0 == bound.code, bound.err
    as_agent = ("--dsn", pg.as_role(role))
    monkeypatch.setenv("FACTLEDGER_ADAPTER", "codex")
    assert 0 == cli("share", "k", "mine", "--tag", "t", *as_agent, db_path=a).code
    monkeypatch.setenv("FACTLEDGER_ADAPTER", "claude-code")
    spoofed = cli("share", "k", "spoof", "--tag", "t", *as_agent, db_path=a)
    assert 1 == spoofed.code and 1 == len(spoofed.err.strip().splitlines()), spoofed.err
    assert 2 == head(pg.dsn)


def test_a_read_never_creates_the_log(cli: Cli, pg: PgLog, hosts: tuple[str, str]) -> None:
    """A read against a schema that holds no log is one line on stderr, and creates none."""
    a, _ = hosts
    result = cli("query", "--tag", "t", "--dsn", pg.dsn, db_path=a)
    assert 1 == result.code and "no factledger log" in result.err
    assert 1 == len(result.err.strip().splitlines())


def test_a_dsn_that_is_not_a_postgresql_uri_is_refused(cli: Cli, tmp_path: Path) -> None:
    """--dsn names a server; a file there is a usage error naming --dsn, and nothing is made."""
    result = cli("share", "k", "v", "--tag", "t", "--dsn", str(tmp_path / "log.db"))
    assert 1 == result.code and "--dsn" in result.err
    assert [] == list(tmp_path.iterdir())


@pytest.mark.parametrize(
    "command",
    [
        ("history",),
        ("blast-radius", "--adapter", "codex"),
        ("quarantine", "--adapter", "codex", "--reason", "r"),
        ("share", "k", "v", "--tag", "t"),
        ("query", "--tag", "t"),
        ("list",),
    ],
    ids=["history", "blast-radius", "quarantine", "share", "query", "list"],
)
def test_a_dsn_as_the_hosts_cache_is_refused(
    cli: Cli, pg: PgLog, tmp_path: Path, command: tuple[str, ...]
) -> None:
    """--db names this host's cache file: a DSN there (a mistyped pair of options) is one
    line naming the mistake, exit 1, and the log is left as it was; no file is made (the
    store used to make a cache at a path spelled like the DSN, password and all)."""
    init(cli, pg)
    other = "postgresql://someone:hunter2@elsewhere.invalid/db"
    result = cli(*command, "--dsn", pg.dsn, db_path=other)
    assert 1 == result.code
    assert "not a postgresql:// DSN" in result.err and "hunter2" not in result.err
    assert 1 == len(result.err.strip().splitlines())
    assert 0 == head(pg.dsn)
    assert [] == list(tmp_path.iterdir())


def test_remove_and_conflict_policy_reach_every_host(
    cli: Cli, pg: PgLog, hosts: tuple[str, str]
) -> None:
    """An entry removed on one host is gone on the other; a policy set on one host holds a
    foreign overwrite made on the other."""
    a, b = hosts
    init(cli, pg)
    dsn = ("--dsn", pg.dsn)
    added = cli("add", "stale advice", "--json", *dsn, db_path=a).json()["id"]
    assert 0 == cli("remove", str(added), *dsn, db_path=b).code
    assert "no entries" in cli("list", *dsn, db_path=a).out
    assert 0 == cli("policy", "set", "api", "--on-conflict", "deny", *dsn, db_path=a).code
    assert 0 == cli("share", "u", "ours", "--tag", "api", *dsn, db_path=a).code
    with pytest.MonkeyPatch.context() as env:
        env.setenv("FACTLEDGER_ADAPTER", "codex")
        assert 0 == cli("share", "u", "theirs", "--tag", "api", *dsn, db_path=b).code
    assert ["ours"] == [
        f["value"] for f in cli("query", "--tag", "api", "--json", *dsn, db_path=a).rows()
    ]


def checkpoints(cache: str) -> set[int]:
    with closing(sqlite3.connect(f"file:{cache}?mode=ro", uri=True)) as db:
        return {p for (p,) in db.execute("SELECT position FROM fl_projector_checkpoint")}


def test_operator_commands_leave_the_host_cache_at_the_head(
    cli: Cli, pg: PgLog, hosts: tuple[str, str]
) -> None:
    """policy set, quarantine and release with --dsn go through the --db cache: right after
    each, that cache is at the log's head, so the host's next read folds nothing."""
    a, b = hosts
    init(cli, pg)
    dsn = ("--dsn", pg.dsn)
    assert 0 == cli("share", "u", "poison", "--tag", "api", *dsn, db_path=a).code
    for command in (
        ("policy", "set", "api", "--on-conflict", "deny"),
        ("quarantine", "--position", "1", "--reason", "poison"),
        ("release", "3", "--reason", "fine"),
    ):
        done = cli(*command, *dsn, db_path=b)
        assert 0 == done.code, done.err
        assert {head(pg.dsn)} == checkpoints(b), command
    assert 4 == head(pg.dsn)
    assert ["poison"] == [
        f["value"] for f in cli("query", "--tag", "api", "--json", *dsn, db_path=b).rows()
    ]
