"""An agent's PostgreSQL login, bound to its adapter, trying raw SQL against everything it can
reach: every table, sequence and function of the log's schema. Each attempt is refused by the
database, and afterwards every host's `query`, `list`, `add` and `verify` still work."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest

psycopg = pytest.importorskip("psycopg")

from eventlog import MAX_CONTENT_BYTES, NewEvent  # noqa: E402
from eventlog.contract import EVERY_KIND, memory  # noqa: E402
from eventlog.drafts import prepare, seal  # noqa: E402
from eventlog.events import ContentErased, is_operator_action  # noqa: E402
from eventlog.postgres_schema import REFUSED_EVENT  # noqa: E402
from tests.cli.conftest import Result, log_with_codex_login  # noqa: E402
from tests.postgres import PgLog  # noqa: E402

Cli = Callable[..., Result]
SALT = b"\x01" * 32
DENIED = "42501"
MIB = 1024 * 1024


@pytest.fixture
def agent_dsn(cli: Cli, pg: PgLog, tmp_path: Path) -> str:
    """A log made with its operator key and one fact, and a login bound to codex."""
    login = log_with_codex_login(cli, pg, tmp_path)
    cache = str(tmp_path / "operator.db")
    shared = cli("share", "users", "{name: str}", "--tag", "api", "--dsn", pg.dsn, db_path=cache)
    assert 0 == shared.code, shared.err
    return pg.as_role(login)


def body(event: NewEvent, position: int, event_id: str = "raw") -> bytes:
    """The body an honest client would send for `event` at `position`."""
    draft = msgspec.structs.replace(event, event_id=event_id)
    prepared = prepare(draft, clock_ns=time.time_ns, max_content_bytes=MAX_CONTENT_BYTES)
    return seal(prepared, position, bytes(32)).body


def own(text: str = "hello") -> NewEvent:
    return memory(text, source_adapter="codex")


def append_attempts(schema: str) -> dict[str, tuple[str, tuple[object, ...]]]:
    """Calls of the write path an agent can make, each wrong in one way, at position 3."""
    call = f"SELECT {schema}.append_events(%s::text[], %s::bytea[], %s::bytea[], %s::bytea[])"
    good = body(own(), 3)
    operator_action = next(e for e in EVERY_KIND if is_operator_action(e.payload))

    def one(data: bytes, *, event_id: str = "raw", text: bytes = b"", salt: bytes = SALT) -> tuple:
        return (call, ([event_id], [data], [text], [salt]))

    return {
        "malformed JSON": one(b'{"position":3,'),
        "not UTF-8": one(b'{"position":3,"x":"\xff"}'),
        "not an object": one(b"[1, 2, 3]"),
        "unknown kind": one(good.replace(b'"memory_added"', b'"memory_erased"')),
        "unreadable kind": one(good.replace(b'"memory_added"', b'"unreadable"')),
        "missing field": one(good.replace(b'"type":', b'"kind_of":')),
        "position mismatch": one(body(own(), 7)),
        "position as text": one(good.replace(b'"position":3', b'"position":"3"')),
        "event id mismatch": one(good, event_id="other"),
        "2 MiB body": one(good.replace(b"{", b'{"pad":"' + b"x" * (2 * MIB) + b'",', 1)),
        "2 MiB text": one(good, text=b"x" * (2 * MIB)),
        "short salt": one(good, salt=b"\x01"),
        "lengths differ": (call, (["a", "b"], [good], [b""], [SALT])),
        "a NULL": (call, (["raw"], [None], [b""], [SALT])),
        "another adapter": one(body(memory("spoof", source_adapter="claude-code"), 3)),
        "no adapter": one(body(memory("anonymous"), 3)),
        "operator kind": one(
            body(msgspec.structs.replace(operator_action, source_adapter="codex"), 3)
        ),
        "an erasure": one(body(erasure(2), 3)),
    }


def erasure(*positions: int) -> NewEvent:
    """An erasure under the agent's own adapter (an operator kind, whatever it names)."""
    return NewEvent(payload=ContentErased(positions=positions, reason="x"), source_adapter="codex")


def table_attempts(schema: str) -> list[str]:
    """Writes around the write path: a chained row with any chain value, a content row for
    a future position, and every edit of every table."""
    edits = [
        f"INSERT INTO {schema}.events VALUES (3, 'raw', '\\x7b7d', '\\x00')",
        f"INSERT INTO {schema}.content VALUES (3, 'pre-filled', '\\x00')",
        f"UPDATE {schema}.head SET position = position",
        f"INSERT INTO {schema}.head VALUES (false, 3, '\\x00')",
        f"INSERT INTO {schema}.agents VALUES ('someone', 'codex')",
        f"INSERT INTO {schema}.meta VALUES ('format', 'x')",
        f"INSERT INTO {schema}.agents VALUES ('another', 'claude-code')",
        f"INSERT INTO {schema}.erased VALUES (2, 3)",
    ]
    changes = {
        "events": "event_id = 'x'",
        "content": "text = 'x'",
        "head": "chain_hash = 'x'",
        "meta": "value = 'x'",
        "agents": "adapter = 'x'",
        "erased": "position = 1",
    }
    for table in ("events", "content", "head", "meta", "agents", "erased"):
        edits += [
            f"UPDATE {schema}.{table} SET {changes[table]}",
            f"DELETE FROM {schema}.{table}",
            f"TRUNCATE {schema}.{table}",
        ]
    return edits


def refused(dsn: str, statement: str, params: tuple[object, ...] | None = None) -> str | None:
    """The SQLSTATE with which the server refused `statement` (None: accepted); its message
    is one line."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        try:
            conn.execute(statement, params)
        except psycopg.Error as exc:
            message = exc.diag.message_primary or ""
            assert 1 == len(message.splitlines()), message
            return exc.sqlstate
    return None


def test_an_agent_login_reaches_only_the_write_path(pg: PgLog, agent_dsn: str) -> None:
    """What a bound login may do in the log's schema: SELECT on its tables, EXECUTE on
    `lock_head` and `append_events`; no other privilege on any table, sequence or function."""
    role = f"{pg.roles}_codex"
    with psycopg.connect(pg.dsn, autocommit=True) as conn:
        tables = conn.execute(
            "SELECT c.relname, p.privilege FROM pg_class c"
            " JOIN pg_namespace n ON n.oid = c.relnamespace,"
            " unnest(ARRAY['INSERT','UPDATE','DELETE','TRUNCATE','REFERENCES','TRIGGER',"
            "'SELECT']) AS p(privilege)"
            " WHERE n.nspname = %s AND c.relkind IN ('r', 'p', 'v', 'm', 'S')"
            " AND has_table_privilege(%s, c.oid, p.privilege) ORDER BY 1, 2",
            (pg.schema, role),
        ).fetchall()
        functions = conn.execute(
            "SELECT p.proname, p.prosecdef FROM pg_proc p"
            " JOIN pg_namespace n ON n.oid = p.pronamespace"
            " WHERE n.nspname = %s AND has_function_privilege(%s, p.oid, 'EXECUTE') ORDER BY 1",
            (pg.schema, role),
        ).fetchall()
        create = conn.execute(
            "SELECT has_schema_privilege(%s, %s, 'CREATE')", (role, pg.schema)
        ).fetchone()
    tables_granted = ("agents", "content", "erased", "events", "head", "meta")
    assert [(t, "SELECT") for t in tables_granted] == tables
    assert [("append_events", True), ("lock_head", True)] == functions
    assert (False,) == create


def test_every_raw_sql_attempt_of_an_agent_is_refused_and_hosts_read_on(
    cli: Cli, pg: PgLog, agent_dsn: str, tmp_path: Path
) -> None:
    """Each malformed, oversized, misplaced, foreign or operator row sent through the write
    path is refused (one line, a stable SQLSTATE), as is every write around it; afterwards
    the log is unchanged and an operator's and an agent's host both query, list, add and
    verify."""
    expected_denied = {"another adapter", "no adapter", "operator kind", "an erasure"}
    found = {
        name: refused(agent_dsn, statement, params)
        for name, (statement, params) in append_attempts(pg.schema).items()
    }
    assert {name: DENIED if name in expected_denied else REFUSED_EVENT for name in found} == found
    for statement in table_attempts(pg.schema):
        assert DENIED == refused(agent_dsn, statement), statement
    with psycopg.connect(agent_dsn, autocommit=True) as conn:
        assert (2,) == conn.execute(f"SELECT position FROM {pg.schema}.head").fetchone()
        assert (0,) == conn.execute(f"SELECT count(*) FROM {pg.schema}.content c"
                                    f" WHERE c.position > 2").fetchone()  # fmt: skip
        assert [(1,), (2,)] == conn.execute(f"SELECT position FROM {pg.schema}.content"
                                            " ORDER BY 1").fetchall()  # fmt: skip
        assert [] == conn.execute(f"SELECT * FROM {pg.schema}.erased").fetchall()
    for dsn, cache in ((pg.dsn, "operator.db"), (agent_dsn, "agent.db")):
        db = str(tmp_path / cache)
        for command in (
            ("add", "still writable", "--tag", "api"),
            ("query", "--tag", "api"),
            ("list",),
            ("verify",),
        ):
            result = cli(*command, "--dsn", dsn, db_path=db)
            assert 0 == result.code, (command, result.err)


def test_an_honest_agent_appends_through_the_write_path(agent_dsn: str, pg: PgLog) -> None:
    """A well-formed row at the next position is accepted, and the chain value the server
    computes and returns is RFC 6962's link over the previous head and the body's leaf."""
    good = body(own(), 3)
    call = f"SELECT {pg.schema}.append_events(%s::text[], %s::bytea[], %s::bytea[], %s::bytea[])"
    head = f"SELECT position, chain_hash FROM {pg.schema}.head"
    with psycopg.connect(agent_dsn, autocommit=True) as conn:
        before = conn.execute(head).fetchone()
        row = conn.execute(call, (["raw"], [good], [b""], [SALT])).fetchone()
        after = conn.execute(head).fetchone()
    assert before is not None and row is not None
    leaf = hashlib.sha256(b"\x00" + good).digest()
    link = hashlib.sha256(b"\x02" + bytes(before[1]) + leaf).digest()
    assert ([link], (3, link)) == ([bytes(v) for v in row[0]], (after[0], bytes(after[1])))
