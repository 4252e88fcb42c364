"""The PostgreSQL log: the shipped contract, the same bytes as SQLite, and a database that
itself refuses edits and adapters a role is not bound to."""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

psycopg = pytest.importorskip("psycopg")

from eventlog import (  # noqa: E402  # noqa: E402
    MAX_CONTENT_BYTES,
    OPERATOR_KINDS,
    CorruptLogError,
    EventLog,
    EventNotFoundError,
    FactledgerError,
    InvalidInputError,
    LegacyFormatError,
    LogBusyError,
    LogExistsError,
    NewEvent,
    PermissionDeniedError,
    StorageError,
    is_operator_action,
    open_log,
    postgres,
    verify_chain,
)
from eventlog import postgres_schema as schema  # noqa: E402
from eventlog.chain import SHA256  # noqa: E402
from eventlog.contract import EVERY_KIND, LogContract, fact, memory  # noqa: E402
from eventlog.drafts import prepare, seal  # noqa: E402
from eventlog.events import PAYLOAD_TYPES, kind_of  # noqa: E402
from eventlog.postgres import PostgresEventLog, translate  # noqa: E402
from eventlog.postgres_admin import add_agent, init_schema  # noqa: E402
from tests.postgres import PgLog  # noqa: E402
from tests.test_docs import docs_export_verifier  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def admin(place: PgLog) -> Any:
    """A superuser session on the test's server."""
    return psycopg.connect(place.server.dsn, autocommit=True)


OPERATOR = next(e for e in EVERY_KIND if e.payload.kind == "operator_added")
"""An operator key's registration. The server never checks a signature (the projectors do),
only that the log holds one, so a sample stands in for a signed one."""


def with_operator(log_id: str) -> list[NewEvent]:
    """A new log's first events: its operator's registration."""
    return [OPERATOR]


def login(place: PgLog, name: str, group: str) -> str:
    """Create a login role in `group` (one of this test's roles); return a DSN for it."""
    with admin(place) as conn:
        conn.execute(f'CREATE ROLE "{name}" LOGIN IN ROLE "{group}"')
    return place.as_role(name)


class TestPostgresLog(LogContract):
    """The shipped contract, unchanged, on a PostgreSQL log opened by `open_log`."""

    @pytest.fixture(autouse=True)
    def _place(self, pg: PgLog) -> Iterator[None]:
        self.place = pg
        self.opened: list[EventLog] = []
        yield
        for log in self.opened:
            log.close()

    def open(self, *, clock_ns: Callable[[], int] | None = None) -> EventLog:
        log = open_log(self.place.dsn, clock_ns=clock_ns or time.time_ns)
        self.opened.append(log)
        return log


@pytest.fixture
def pg_log(pg: PgLog) -> Iterator[PostgresEventLog]:
    log = PostgresEventLog(pg.dsn)
    yield log
    log.close()


def test_open_log_chooses_postgres_for_its_uris(pg: PgLog) -> None:
    """`postgresql://` and `postgres://` URIs open the PostgreSQL backend."""
    first = open_log(pg.dsn)
    second = open_log("postgres://" + pg.dsn.removeprefix("postgresql://"))
    assert (PostgresEventLog, PostgresEventLog) == (type(first), type(second))
    assert first.log_id == second.log_id
    first.close()
    second.close()


def test_same_drafts_store_the_same_bytes_and_chain_as_sqlite(
    pg: PgLog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With one log id, a pinned clock and pinned salts, both backends store identical rows:
    the same bodies, event ids, positions, chain values, texts and salts, byte for byte, but
    for the text the sample erasure names, which the server removes when it stores the
    erasure (a SQLite file keeps it: `Ledger.erase` removes it once the erasure is folded
    with effect, and this one is unsigned).

    Each backend draws a random log id when it creates a log, so the PostgreSQL log is
    created here with the SQLite log's id (as `init_schema` would, with a chosen id)."""
    monkeypatch.setattr("eventlog.drafts.os.urandom", lambda size: b"\x07" * size)
    ticks = itertools.count(1_764_374_400_000_000_000, 1000)
    sqlite_log = open_log(tmp_path / "log.db", clock_ns=lambda: next(ticks))
    with admin(pg) as conn, conn.transaction():
        schema.create(conn, pg.schema, sqlite_log.log_id, SHA256.genesis(sqlite_log.log_id))
    pg_ticks = itertools.count(1_764_374_400_000_000_000, 1000)
    pg_log = PostgresEventLog(pg.dsn, clock_ns=lambda: next(pg_ticks))
    drafts = [
        *(memory(f"m{i}", event_id=f"m-{i}") for i in range(3)),
        *[
            NewEvent(**{**{f: getattr(e, f) for f in e.__struct_fields__}, "event_id": f"k-{i}"})
            for i, e in enumerate(EVERY_KIND)
        ],
        fact("k", "naïve café", event_id="f-1", run_id="run-7", source_adapter="codex"),
    ]
    for backend in (sqlite_log, pg_log):
        backend.append(drafts[0])
        backend.append_many(drafts[1:5])
        with backend.transaction() as tx:
            for draft in drafts[5:]:
                tx.append(draft)
    erased = EVERY_KIND[-1].payload.positions[0]
    assert [
        row._replace(text=None, salt=None) if row.position == erased else row
        for row in sqlite_log.scan()
    ] == list(pg_log.scan())
    assert [
        msgspec.structs.replace(record, payload=record.payload.without_text(), text_state="absent")
        if record.position == erased
        else record
        for record in sqlite_log.read()
    ] == list(pg_log.read())
    assert sqlite_log.head() == pg_log.head()
    # the chain links; the text an unsigned erasure removed fails the log (closed)
    report = verify_chain(pg_log)
    assert (False, erased, "absent") == (
        report.ok,
        report.first_bad_position,
        report.findings[0].problem,
    )
    pg_log.close()


def test_an_export_verifies_offline_and_audits_work(
    pg: PgLog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An export of a PostgreSQL log passes the documented offline verifier
    (docs/spec/export.md), and verify, checkpoint and inclusion proofs work on the log by its
    DSN."""
    import replay

    log = PostgresEventLog(pg.dsn)
    log.append_many(EVERY_KIND)
    log.append(fact("k", "naïve café", source_adapter="codex"))
    monkeypatch.chdir(tmp_path)
    export = tmp_path / "log.jsonl"
    with export.open("w", encoding="utf-8") as out:
        replay.export_log(pg.dsn, out)
    assert len(EVERY_KIND) + 1 == len(docs_export_verifier()(export))
    assert replay.verify(pg.dsn).ok
    held = replay.checkpoint(pg.dsn)
    proof = replay.prove_inclusion(pg.dsn, 3, held)
    assert replay.verify_inclusion(proof, proof.leaf_hash, held)
    assert (len(EVERY_KIND) + 1, log.head().chain_hash) == (held.size, held.chain_hash)
    log.close()


def test_generated_ids_are_indexed_and_unique(pg_log: PostgresEventLog, pg: PgLog) -> None:
    """Every event id, generated or given, is unique in the log by the database's index."""
    pg_log.append_many([memory("a"), memory("b", event_id="given")])
    with admin(pg) as conn:
        indexed = conn.execute(
            "SELECT indexdef FROM pg_indexes WHERE schemaname = %s AND indexdef LIKE %s",
            (pg.schema, "%UNIQUE%(event_id)%"),
        ).fetchall()
    assert 1 == len(indexed)


def test_opening_an_empty_schema_creates_the_log_once(pg: PgLog) -> None:
    """Handles opened at once on an empty schema create one log, with one id."""
    ids: list[str] = []

    def open_one() -> None:
        log = PostgresEventLog(pg.dsn)
        ids.append(log.log_id)
        log.close()

    threads = [threading.Thread(target=open_one) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert 4 == len(ids) and 1 == len(set(ids))


def test_read_only_handles_refuse_writes_and_need_a_log(pg: PgLog) -> None:
    """A read-only handle on no log is refused; on a log it reads and refuses appends."""
    with pytest.raises(StorageError, match="holds no factledger log"):
        PostgresEventLog(pg.dsn, read_only=True)
    PostgresEventLog(pg.dsn).append(memory("kept"))
    reader = PostgresEventLog(pg.dsn, read_only=True)
    with pytest.raises(StorageError, match="read-only"):
        reader.append(memory("refused"))
    assert ["kept"] == [r.payload.content for r in reader.read()]  # type: ignore[union-attr]
    reader.close()


def test_tailing_by_position_reads_only_what_is_new(pg_log: PostgresEventLog) -> None:
    """A tailer keeps the last position it read and asks for what came after it."""
    pg_log.append_many([memory(str(i)) for i in range(5)])
    seen = pg_log.head().position
    pg_log.append_many([memory("six"), memory("seven")])
    assert [6, 7] == [r.position for r in pg_log.read(after=seen)]
    assert [] == list(pg_log.read(after=pg_log.head().position))


def test_snapshot_holds_its_head(pg: PgLog, pg_log: PostgresEventLog) -> None:
    """A snapshot reads up to the head it first saw, whatever is appended meanwhile."""
    pg_log.append(memory("one"))
    other = PostgresEventLog(pg.dsn)
    with pg_log.snapshot() as snap:
        assert 1 == snap.head().position
        other.append(memory("two"))
        assert [1] == [r.position for r in snap.read()]
        assert [1] == [r.position for r in snap.read(until=5)]
        assert 1 == snap.event_at(1).position
        with pytest.raises(EventNotFoundError):
            snap.event_at(2)
    assert 2 == pg_log.head().position
    assert 2 == pg_log.event_at(2).position
    other.close()


def test_a_snapshot_that_found_no_event_keeps_that_answer(
    pg: PgLog, pg_log: PostgresEventLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """event_at before a snapshot has fixed its head costs one query and no head query;
    when it finds nothing, the head is fixed there, so a later append does not appear in
    that read."""
    pg_log.append(memory("one"))
    other = PostgresEventLog(pg.dsn)
    queries: list[str] = []
    fetch, head = pg_log._fetch, pg_log.head
    monkeypatch.setattr(pg_log, "_fetch", lambda *a: queries.append("fetch") or fetch(*a))
    monkeypatch.setattr(pg_log, "head", lambda: queries.append("head") or head())
    with pg_log.snapshot() as snap:
        assert 1 == snap.event_at(1).position
        assert ["fetch"] == queries
        with pytest.raises(EventNotFoundError):
            snap.event_at(2)
        other.append(memory("two"))
        with pytest.raises(EventNotFoundError):
            snap.event_at(2)
        assert (1, [1]) == (snap.head().position, [r.position for r in snap.read()])
    other.close()


# -- immutability and roles -----------------------------------------------------------------


EDITS = [
    "UPDATE {s}.events SET body = body",
    "DELETE FROM {s}.events",
    "TRUNCATE {s}.events",
    "UPDATE {s}.meta SET value = 'other' WHERE name = 'log_id'",
    "DELETE FROM {s}.meta",
    "TRUNCATE {s}.meta",
    "DELETE FROM {s}.head",
    "TRUNCATE {s}.head",
    "UPDATE {s}.head SET position = 1",
    "INSERT INTO {s}.events VALUES (4, 'gap', '\\x7b7d', '\\x00')",
    "TRUNCATE {s}.agents",
]


def refusals(dsn: str, edits: list[str], schema_name: str) -> dict[str, str | None]:
    """The SQLSTATE with which the database refused each edit (None: it was accepted)."""
    found: dict[str, str | None] = {}
    with psycopg.connect(dsn, autocommit=True) as conn:
        for edit in edits:
            try:
                conn.execute(edit.format(s=schema_name))
                found[edit] = None
            except psycopg.Error as exc:
                found[edit] = exc.sqlstate
    return found


def test_the_database_refuses_edits_even_from_a_superuser(pg: PgLog) -> None:
    """UPDATE, DELETE and TRUNCATE of the log, its metadata and bindings, a head that does not
    name the last row and a row that leaves a gap are refused by triggers, for everyone."""
    log = PostgresEventLog(pg.dsn)
    log.append_many([memory("a"), memory("b")])
    before = list(log.scan())
    found = refusals(pg.dsn, EDITS, pg.schema)
    # TRUNCATE of events is refused before its trigger: the content table references it
    expected = {edit: "23514" if "gap" in edit else "42501" for edit in EDITS}
    assert {**expected, "TRUNCATE {s}.events": "0A000"} == found
    assert before == list(log.scan())
    assert 2 == log.head().position
    log.close()


def test_logs_in_several_schemas_can_be_made_at_once(pg: PgLog) -> None:
    """Six logs made at the same moment in six schemas of one database all succeed: their
    grants on the shared database are taken in turn, never "tuple concurrently updated"."""
    import psycopg

    schemas = [f"{pg.schema}_{n}" for n in range(6)]
    start = threading.Barrier(len(schemas))
    failures: list[BaseException] = []

    def make(name: str) -> None:
        start.wait()
        try:
            init_schema(pg.server.url(schema=name), role_prefix=name)
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=make, args=(name,)) for name in schemas]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert [] == failures
    finally:
        with psycopg.connect(pg.server.dsn, autocommit=True) as admin, admin.transaction():
            schema.serialize_administration(admin)
            for name in schemas:
                admin.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


def test_init_schema_creates_roles_with_least_privilege(pg: PgLog) -> None:
    """The owner owns the schema; the writer may select, and changes nothing but through the
    write path (no INSERT, no UPDATE of the head); the reader may select; PUBLIC nothing."""
    roles = init_schema(pg.dsn, role_prefix=pg.roles)
    assert (f"{pg.roles}_owner", f"{pg.roles}_writer", f"{pg.roles}_reader") == roles
    table = f"{pg.schema}.events"
    checks = {
        "owner": f"SELECT nspowner::regrole::text FROM pg_namespace WHERE nspname = '{pg.schema}'",
        "public": f"SELECT has_schema_privilege('public', '{pg.schema}', 'USAGE'),"
        f" has_table_privilege('public', '{table}', 'SELECT')",
        "writer": f"SELECT has_table_privilege('{roles.writer}', '{table}', 'INSERT'),"
        f" has_table_privilege('{roles.writer}', '{table}', 'SELECT'),"
        f" has_table_privilege('{roles.writer}', '{table}', 'UPDATE'),"
        f" has_table_privilege('{roles.writer}', '{table}', 'DELETE'),"
        f" has_table_privilege('{roles.writer}', '{table}', 'TRUNCATE'),"
        f" has_column_privilege('{roles.writer}', '{pg.schema}.head', 'position', 'UPDATE'),"
        f" has_table_privilege('{roles.writer}', '{pg.schema}.meta', 'INSERT')",
        "reader": f"SELECT has_table_privilege('{roles.reader}', '{table}', 'SELECT'),"
        f" has_table_privilege('{roles.reader}', '{table}', 'INSERT'),"
        f" has_column_privilege('{roles.reader}', '{pg.schema}.head', 'position', 'UPDATE')",
    }
    with admin(pg) as conn:
        found = {name: conn.execute(query).fetchone() for name, query in checks.items()}
    assert {
        "owner": (roles.owner,),
        "public": (False, False),
        "writer": (False, True, False, False, False, False, False),
        "reader": (True, False, False),
    } == found
    assert roles == init_schema(pg.dsn, role_prefix=pg.roles)


def test_writer_and_reader_roles_work_through_the_library(pg: PgLog) -> None:
    """A writer's login appends and reads; a reader's login reads and is refused appends."""
    roles = init_schema(pg.dsn, role_prefix=pg.roles)
    writer = PostgresEventLog(login(pg, f"{pg.roles}_svc", roles.writer))
    writer.append_many([memory("a"), fact("k", "v", source_adapter="codex")])
    reader = PostgresEventLog(login(pg, f"{pg.roles}_audit", roles.reader))
    assert [1, 2] == [r.position for r in reader.read()]
    with pytest.raises(PermissionDeniedError, match="permission denied"):
        reader.append(memory("refused"))
    assert 2 == reader.head().position
    assert verify_chain(reader).ok
    writer.close()
    reader.close()


ROLE_EDITS = [
    "UPDATE {s}.events SET body = body",
    "DELETE FROM {s}.events",
    "TRUNCATE {s}.events",
    "UPDATE {s}.meta SET value = 'x'",
    "INSERT INTO {s}.meta VALUES ('x', 'y')",
    "INSERT INTO {s}.agents VALUES ('someone', 'codex')",
    "UPDATE {s}.head SET position = 1",
    "DELETE FROM {s}.head",
]


@pytest.mark.parametrize("kind", ["writer", "agent"])
def test_writer_and_agent_roles_cannot_edit_the_log(pg: PgLog, kind: str) -> None:
    """Writer and agent logins may not rewrite, delete, truncate or bind: the database
    refuses each (PostgreSQL's insufficient_privilege), and the log is unchanged."""
    roles = init_schema(pg.dsn, role_prefix=pg.roles, first_events=with_operator)
    name = f"{pg.roles}_{kind}_login"
    if kind == "agent":
        add_agent(pg.dsn, name, "codex", role_prefix=pg.roles)
        dsn = pg.as_role(name)
    else:
        dsn = login(pg, name, roles.writer)
    log = PostgresEventLog(dsn)
    log.append_many([memory("a", source_adapter="codex"), memory("b", source_adapter="codex")])
    before = list(log.scan())
    assert dict.fromkeys(ROLE_EDITS, "42501") == refusals(dsn, ROLE_EDITS, pg.schema)
    assert before == list(log.scan())
    log.close()


# -- identity -------------------------------------------------------------------------------


@pytest.fixture
def agent(pg: PgLog) -> Iterator[PostgresEventLog]:
    """A log handle logged in as an agent role bound to `codex`, in a log made with its
    operator."""
    init_schema(pg.dsn, role_prefix=pg.roles, first_events=with_operator)
    add_agent(pg.dsn, f"{pg.roles}_codex", "codex", role_prefix=pg.roles)
    log = PostgresEventLog(pg.as_role(f"{pg.roles}_codex"))
    yield log
    log.close()


def test_an_agent_appends_as_its_adapter(agent: PostgresEventLog) -> None:
    """An agent role's events that name its adapter are written."""
    records = agent.append_many(
        [memory("a", source_adapter="codex"), fact("k", "v", source_adapter="codex")]
    )
    assert [2, 3] == [r.position for r in records]
    assert verify_chain(agent).ok


@pytest.mark.parametrize(
    "batch",
    [
        [memory("spoof", source_adapter="claude-code")],
        [memory("anonymous")],
        [memory("ok", source_adapter="codex"), memory("spoof", source_adapter="gemini-cli")],
    ],
    ids=["other-adapter", "no-adapter", "one-in-a-batch"],
)
def test_the_database_refuses_an_agent_naming_another_adapter(
    agent: PostgresEventLog, batch: list[NewEvent]
) -> None:
    """Events naming another adapter, or none, are refused by the database itself: a clear
    PermissionDeniedError, and nothing of the batch is written."""
    agent.append(memory("before", source_adapter="codex"))
    head = agent.head()
    with pytest.raises(PermissionDeniedError, match="may append only events of adapter codex"):
        agent.append_many(batch)
    assert head == agent.head()
    with pytest.raises(PermissionDeniedError), agent.transaction() as tx:
        tx.append_many(batch)
    assert head == agent.head()


@pytest.mark.parametrize("reply", ["before-commit-is-queued", "when-the-pipeline-ends"])
def test_a_refused_append_raises_one_error_and_logs_nothing(
    agent: PostgresEventLog,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    reply: str,
) -> None:
    """The server's refusal of a row reaches the client either while COMMIT is queued or when
    the pipeline ends (it varies from run to run; a pause after sending the rows forces the
    first): either way the trigger's error is raised alone, and psycopg logs nothing."""
    if reply == "before-commit-is-queued":
        send_pending = postgres._Transaction._send_pending

        def send_then_wait(tx: Any) -> None:
            send_pending(tx)
            time.sleep(0.05)

        monkeypatch.setattr(postgres._Transaction, "_send_pending", send_then_wait)
    caplog.set_level(logging.DEBUG)
    head = agent.head()
    for _ in range(5):
        with pytest.raises(PermissionDeniedError, match="may append only events of adapter"):
            agent.append(memory("spoof", source_adapter="claude-code"))
    assert head == agent.head()
    assert [] == [r.getMessage() for r in caplog.records if r.name.startswith("psycopg")]


def raw_insert(pg: PgLog, body: bytes, event_id: str) -> list[str]:
    """Append `body` under `event_id` by raw SQL through the log's write path as the agent's
    login, as it is and after `SET ROLE` to the writer; return the server's refusals."""
    append = f"SELECT {pg.schema}.append_events(ARRAY[%s], ARRAY[%s], ARRAY[''::bytea], ARRAY[%s])"
    refusals = []
    with psycopg.connect(pg.as_role(f"{pg.roles}_codex"), autocommit=True) as conn:
        for prelude in ("RESET ROLE", f'SET ROLE "{pg.roles}_writer"'):
            conn.execute(prelude)
            with pytest.raises(psycopg.errors.InsufficientPrivilege) as refused:
                conn.execute(append, (event_id, body, b"\x00" * 32))
            refusals.append(str(refused.value))
    return refusals


def test_an_agent_cannot_escape_its_binding_by_sql(pg: PgLog, agent: PostgresEventLog) -> None:
    """Raw SQL with a hand-made body is refused too, also after `SET ROLE` to the writer."""
    agent.append(memory("first", source_adapter="codex"))
    stored = list(agent.scan())[-1]
    body = stored.body.replace(b'"codex"', b'"claude-code"')
    refusals = raw_insert(pg, body.replace(b'"position":2,', b'"position":3,'), stored.event_id)
    assert all("adapter codex" in refusal for refusal in refusals), refusals
    assert 2 == agent.head().position


OPERATOR_ACTIONS = [e for e in EVERY_KIND if is_operator_action(e.payload)]


def encode(event: NewEvent, position: int = 3) -> bytes:
    """The body the log would store for `event` at `position` (under event id `raw`)."""
    event = msgspec.structs.replace(event, event_id="raw")
    prepared = prepare(event, clock_ns=time.time_ns, max_content_bytes=MAX_CONTENT_BYTES)
    return seal(prepared, position, b"\x00" * 32)[0]


@pytest.mark.parametrize(
    "action", OPERATOR_ACTIONS, ids=lambda e: e.payload.kind.replace("memory_added", "import")
)
def test_an_agent_login_is_refused_every_operator_action_by_its_kind(
    agent: PostgresEventLog, action: NewEvent
) -> None:
    """Quarantines, releases, operator keys, policies, approvals, rejections and imports are
    refused to an agent login by the database, whatever signature they carry, even under
    the login's own adapter."""
    own = msgspec.structs.replace(action, source_adapter="codex", event_id=None)
    head = agent.head()
    with pytest.raises(PermissionDeniedError, match="is an agent login: it may not append"):
        agent.append(own)
    assert head == agent.head()


def test_the_kinds_refused_to_agents_are_the_operator_actions() -> None:
    """One sample of every kind: an agent may write it exactly when it is no operator action,
    and every operator kind the payload types declare is among the samples."""
    assert {kind_of(t) for t in PAYLOAD_TYPES} == {e.payload.kind for e in EVERY_KIND}
    assert OPERATOR_KINDS == {e.payload.kind for e in OPERATOR_ACTIONS} - {"memory_added"}
    assert ["memory_added"] == [
        e.payload.kind for e in OPERATOR_ACTIONS if e.payload.kind not in OPERATOR_KINDS
    ]


def test_an_agent_login_writes_every_other_kind(agent: PostgresEventLog) -> None:
    """Every kind an agent writes is accepted under its own adapter."""
    written = [
        msgspec.structs.replace(e, source_adapter="codex")
        for e in EVERY_KIND
        if not is_operator_action(e.payload)
    ]
    assert len(written) == len(agent.append_many(written))
    assert verify_chain(agent).ok


def test_raw_sql_cannot_slip_an_operator_action_past_the_kind_check(
    pg: PgLog, agent: PostgresEventLog
) -> None:
    """Hand-made rows as an agent's login, also after `SET ROLE`: every operator action, and
    one spelled with a JSON escape: each is refused."""
    agent.append(memory("first", source_adapter="codex"))
    bodies = {
        ("import" if e.payload.kind == "memory_added" else e.payload.kind): encode(
            msgspec.structs.replace(e, source_adapter="codex")
        )
        for e in OPERATOR_ACTIONS
    }
    bodies["escaped"] = bodies["quarantine_applied"].replace(
        b"quarantine_applied", b"quarantine\\u005fapplied"
    )
    for name, body in bodies.items():
        refusals = raw_insert(pg, body, "raw")
        assert all("is an agent login" in refusal for refusal in refusals), (name, refusals)
    assert 2 == agent.head().position


def test_agent_logins_wait_for_the_log_s_first_operator(pg: PgLog) -> None:
    """In a log made without an operator, an agent login can append nothing, while other
    writers can; once an operator key is registered (by a login no adapter binds), the
    agent writes."""
    roles = init_schema(pg.dsn, role_prefix=pg.roles)
    add_agent(pg.dsn, f"{pg.roles}_codex", "codex", role_prefix=pg.roles)
    agent = PostgresEventLog(pg.as_role(f"{pg.roles}_codex"))
    writer = PostgresEventLog(login(pg, f"{pg.roles}_svc", roles.writer))
    try:
        with pytest.raises(PermissionDeniedError, match="the log has no operator key"):
            agent.append(memory("too early", source_adapter="codex"))
        writer.append(memory("an unbound writer's note"))
        with pytest.raises(PermissionDeniedError, match="the log has no operator key"):
            agent.append(memory("still too early", source_adapter="codex"))
        assert 1 == agent.head().position
        writer.append(OPERATOR)
        assert 3 == agent.append(memory("now", source_adapter="codex")).position
    finally:
        agent.close()
        writer.close()


def test_an_agent_may_write_a_nul_in_its_text(agent: PostgresEventLog) -> None:
    """The database reads each row's envelope to check it; a NUL in the text (valid JSON,
    which PostgreSQL's JSON types cannot hold) does not make that read fail."""
    record = agent.append(memory("before\x00after", source_adapter="codex"))
    assert "before\x00after" == agent.event_at(record.position).payload.content


def test_a_log_made_with_its_first_events_starts_with_them(pg: PgLog) -> None:
    """`init_schema(first_events=...)` appends them in the transaction that makes the log,
    given its id; asked again, it refuses (`LogExistsError`) and changes nothing, while a
    plain `init_schema` still re-grants."""
    seen: list[str] = []

    def first(log_id: str) -> list[NewEvent]:
        seen.append(log_id)
        return [OPERATOR]

    roles = init_schema(pg.dsn, role_prefix=pg.roles, first_events=first)
    log = PostgresEventLog(pg.dsn)
    try:
        assert [log.log_id] == seen
        assert ["operator_added"] == [r.kind for r in log.read()]
        assert verify_chain(log).ok
        with pytest.raises(LogExistsError, match="already holds a factledger log"):
            init_schema(pg.dsn, role_prefix=pg.roles, first_events=first)
        assert roles == init_schema(pg.dsn, role_prefix=pg.roles)
        assert 1 == log.head().position and 1 == len(seen)
    finally:
        log.close()


def test_an_agent_binding_is_never_changed(pg: PgLog) -> None:
    """Adding the same agent again is a no-op; another adapter, or an existing role, is
    refused."""
    init_schema(pg.dsn, role_prefix=pg.roles)
    name = f"{pg.roles}_codex"
    add_agent(pg.dsn, name, "codex", role_prefix=pg.roles)
    add_agent(pg.dsn, name, "codex", role_prefix=pg.roles)
    with pytest.raises(InvalidInputError, match="bound to adapter 'codex'"):
        add_agent(pg.dsn, name, "claude-code", role_prefix=pg.roles)
    with pytest.raises(InvalidInputError, match="already exists"):
        add_agent(pg.dsn, f"{pg.roles}_writer", "codex", role_prefix=pg.roles)
    with pytest.raises(InvalidInputError, match="lower-case"):
        add_agent(pg.dsn, "Robert'); DROP TABLE x;--", "codex", role_prefix=pg.roles)


def test_an_agent_is_bound_only_to_an_ascii_adapter_name(pg: PgLog) -> None:
    """The library's `add_agent` refuses a lookalike adapter (a Cyrillic U+0441) as the log's own
    appends do, and creates no role."""
    init_schema(pg.dsn, role_prefix=pg.roles)
    name = f"{pg.roles}_lookalike"
    with pytest.raises(InvalidInputError, match="U\\+0441 CYRILLIC"):
        add_agent(pg.dsn, name, "\u0441laude-code", role_prefix=pg.roles)
    with admin(pg) as conn:
        assert conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (name,)).fetchone() is None


def test_add_agent_needs_an_initialized_log(pg: PgLog) -> None:
    """Binding an agent before `init_schema` says what to run first."""
    with pytest.raises(StorageError, match="init_schema"):
        add_agent(pg.dsn, f"{pg.roles}_codex", "codex", role_prefix=pg.roles)


# -- errors ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("error", "expected", "says"),
    [
        (psycopg.errors.LockNotAvailable, LogBusyError, "held it too long"),
        (psycopg.errors.DeadlockDetected, LogBusyError, "held it too long"),
        (psycopg.errors.SerializationFailure, LogBusyError, "held it too long"),
        (psycopg.errors.InsufficientPrivilege, PermissionDeniedError, "cannot write log"),
        (psycopg.errors.InvalidPassword, PermissionDeniedError, "cannot write log"),
        (psycopg.errors.ReadOnlySqlTransaction, StorageError, "log was opened read-only"),
        (psycopg.errors.DiskFull, StorageError, "no space left for log"),
        (psycopg.errors.InvalidCatalogName, StorageError, "no such database"),
        (psycopg.errors.IdleInTransactionSessionTimeout, StorageError, "idle inside"),
        (psycopg.errors.UniqueViolation, StorageError, "cannot write (log)"),
    ],
)
def test_errors_map_by_sqlstate_not_message(
    error: type[Exception], expected: type[FactledgerError], says: str
) -> None:
    """The SQLSTATE decides, whatever the message says."""
    for message in ("permission denied", "could not obtain lock", "disk full"):
        translated = translate(error(message), "write", "log")  # type: ignore[arg-type]
        assert expected is type(translated)
        assert says in str(translated)


def test_a_client_catches_a_server_that_keeps_another_chain(pg: PgLog) -> None:
    """A server whose write path links with another prefix is caught by the client on the
    append (CorruptLogError naming the position) and by verification afterwards."""
    log = PostgresEventLog(pg.dsn)
    log.append(memory("honest"))
    with admin(pg) as conn:
        row = conn.execute(
            "SELECT pg_get_functiondef(%s::regprocedure)",
            (f"{pg.schema}.append_events(text[], bytea[], bytea[], bytea[])",),
        ).fetchone()
        assert row is not None and "'\\x02'::bytea" in row[0]
        conn.execute(row[0].replace("'\\x02'::bytea", "'\\x03'::bytea"))
    with pytest.raises(CorruptLogError, match="computed a chain value at position 2"):
        log.append(memory("lied about"))
    assert not verify_chain(log).ok
    log.close()


def test_init_on_a_v1_log_keeps_it_and_makes_it_read_only(pg: PgLog) -> None:
    """`pg init` on a format-v1 schema succeeds and leaves its events readable; its write
    path then refuses every append, naming `factledger migrate`, in the client and in raw
    SQL."""
    roles = init_schema(pg.dsn, role_prefix=pg.roles)
    PostgresEventLog(pg.dsn).close()
    with admin(pg) as conn:
        conn.execute(f"DROP TABLE {pg.schema}.content")
        conn.execute(f"DROP FUNCTION {pg.schema}.lock_head(), {pg.schema}.append_events")
        conn.execute(f"ALTER TABLE {pg.schema}.meta DISABLE TRIGGER append_only")
        conn.execute(f"UPDATE {pg.schema}.meta SET value = 'factledger-postgres-log/1'"
                     " WHERE name = 'format'")  # fmt: skip
        conn.execute(f"ALTER TABLE {pg.schema}.meta ENABLE TRIGGER append_only")
    assert roles == init_schema(pg.dsn, role_prefix=pg.roles)
    writer = PostgresEventLog(login(pg, f"{pg.roles}_svc", roles.writer))
    try:
        assert 1 == writer.log_format.version
        with pytest.raises(LegacyFormatError, match="factledger migrate"):
            writer.append(memory("refused"))
        with pytest.raises(LegacyFormatError, match="factledger migrate"), writer.transaction():
            pass
        raw_dsn = login(pg, f"{pg.roles}_svc2", roles.writer)
        with psycopg.connect(raw_dsn) as conn, pytest.raises(psycopg.Error) as raw:
            conn.execute(
                f"SELECT {pg.schema}.append_events(ARRAY['x'], ARRAY['\\x7b7d'::bytea],"
                " ARRAY[''::bytea], ARRAY[''::bytea])"
            )
        assert (schema.LEGACY_FORMAT, True) == (
            raw.value.sqlstate,
            "factledger migrate" in str(raw.value),
        )
        assert 0 == writer.head().position
    finally:
        writer.close()
