"""Erasure on a PostgreSQL log: an agent login writes a secret through the library, the
operator erases it with a signed key, and its bytes are gone from the table (after the
documented `VACUUM FULL`, read page by page), from its TOAST table and from every host's cache,
while `verify`, checkpoints and proofs from before all hold. The server's own guards: an agent
login cannot erase, nothing deletes a text that no erasure in the chain names, and an erasure
the hosts do not honour (unsigned) leaves a log that fails `verify` rather than one that hides
the removal."""

from __future__ import annotations

import io
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import pytest

psycopg = pytest.importorskip("psycopg")

from eventlog import (  # noqa: E402
    MAX_CONTENT_BYTES,
    InvalidInputError,
    MemoryAdded,
    NewEvent,
    PermissionDeniedError,
)
from eventlog.drafts import prepare, seal  # noqa: E402
from eventlog.events import ContentErased  # noqa: E402
from eventlog.postgres import PostgresEventLog  # noqa: E402
from eventlog.postgres_admin import add_agent  # noqa: E402
from eventlog.postgres_schema import REFUSED_EVENT  # noqa: E402
from projections import SQLiteMemoryStore  # noqa: E402
from replay import (  # noqa: E402
    Ledger,
    generate_key,
    init_postgres,
    verify_consistency,
    verify_inclusion,
)
from tests.postgres import PgLog  # noqa: E402

DENIED = "42501"


@dataclass
class Place:
    """A log made with its operator key, an agent login bound to codex, and the keys' files."""

    pg: PgLog
    key: Path
    agent_dsn: str
    tmp: Path

    def operator(self, cache: str = "operator.db") -> Ledger:
        """The operator's ledger on this host, through its cache, open for writing."""
        return Ledger.open(self.pg.dsn, cache=self.tmp / cache, read_only=False)


@pytest.fixture
def place(pg: PgLog, tmp_path: Path) -> Place:
    key = tmp_path / "operator.key"
    generate_key(key)
    init_postgres(pg.dsn, role_prefix=pg.roles, key=key)
    add_agent(pg.dsn, f"{pg.roles}_codex", "codex", role_prefix=pg.roles)
    return Place(pg, key, pg.as_role(f"{pg.roles}_codex"), tmp_path)


@pytest.fixture
def agent_store(place: Place) -> Iterator[SQLiteMemoryStore]:
    """The agent's host: a store on its own cache, logged in as the codex login."""
    store = SQLiteMemoryStore(place.tmp / "agent.db", log=place.agent_dsn)
    yield store
    store.close()


def admin(place: Place) -> Any:
    return psycopg.connect(place.pg.server.dsn, autocommit=True)


def content_positions(place: Place) -> list[int]:
    with admin(place) as conn:
        rows = conn.execute(f"SELECT position FROM {place.pg.schema}.content ORDER BY 1")
        return [row[0] for row in rows.fetchall()]


def pieces(secret: bytes) -> list[bytes]:
    """`secret` in 24-byte pieces: a long text is stored in chunks (TOAST, SQLite overflow
    pages), so no page holds it whole, while each chunk holds whole pieces of it."""
    return [secret[i : i + 24] for i in range(0, len(secret) - 23, 24)]


def count(data: bytes, secret: bytes) -> int:
    """How many pieces of `secret` `data` holds."""
    return sum(data.count(piece) for piece in pieces(secret))


def stored_occurrences(place: Place, secret: bytes) -> int:
    """How often `secret` is in a `SELECT` of the content table."""
    with admin(place) as conn:
        rows = conn.execute(f"SELECT text FROM {place.pg.schema}.content").fetchall()
    return sum(count(bytes(row[0]), secret) for row in rows)


def page_occurrences(place: Place, secret: bytes) -> dict[str, int]:
    """How often `secret` is in the raw pages of the content table and of its TOAST table,
    read block by block with `pageinspect`."""
    found = {}
    with admin(place) as conn:
        with conn.transaction():  # one run at a time: IF NOT EXISTS races another session
            conn.execute("SELECT pg_advisory_xact_lock(hashtext('pageinspect'))")
            conn.execute("CREATE EXTENSION IF NOT EXISTS pageinspect")
        table = f"{place.pg.schema}.content"
        row = conn.execute(
            "SELECT reltoastrelid::regclass::text FROM pg_class WHERE oid = %s::regclass",
            (table,),
        ).fetchone()
        assert row is not None
        for kind, relation in (("table", table), ("toast", row[0])):
            blocks = conn.execute(
                "SELECT pg_relation_size(%s::regclass) / current_setting('block_size')::int",
                (relation,),
            ).fetchone()
            assert blocks is not None
            found[kind] = sum(
                count(bytes(page), secret)
                for (page,) in (
                    conn.execute("SELECT get_raw_page(%s, %s)", (relation, block)).fetchone()
                    for block in range(blocks[0])
                )
            )
    return found


def cache_occurrences(path: Path, secret: bytes) -> int:
    """How often `secret` is in a cache file and its write-ahead log."""
    files = [path, path.with_name(path.name + "-wal")]
    return sum(count(f.read_bytes(), secret) for f in files if f.exists())


def vacuum_full(place: Place, note: str) -> None:
    """Run what the erasure's note tells the operator to run, as the note spells it, once
    no session holds a snapshot from before the erasure (docs/operations.md: `VACUUM FULL`
    keeps a deleted row that an open snapshot may still see; on a server shared with other
    runs of the suite, one may be open)."""
    statement = note[note.index("VACUUM FULL") :].split(" (", 1)[0]
    older = (
        "SELECT array_agg(pid) FROM pg_stat_activity WHERE pid <> pg_backend_pid()"
        " AND backend_xmin IS NOT NULL AND age(backend_xmin) > age(%s::xid)"
    )
    with admin(place) as conn:
        now = conn.execute("SELECT pg_current_xact_id()::xid::text").fetchone()
        assert now is not None
        for _ in range(1200):
            row = conn.execute(older, (now[0],)).fetchone()
            if row is None or row[0] is None:
                break
            time.sleep(0.1)
        else:
            pytest.fail(f"sessions {row[0]} kept a snapshot from before the erasure for 2 min")
        conn.execute(statement)


def test_an_erased_secret_leaves_the_server_its_pages_and_every_host_cache(
    place: Place, agent_store: SQLiteMemoryStore
) -> None:
    """An agent login writes a short secret and a long one (stored out of line, in the TOAST
    table) through the library; the operator erases both with its key. No `SELECT` of the
    content table returns them; after the `VACUUM FULL` the note names, no page of the table
    or its TOAST table holds them; the operator's cache and the agent host's cache (after
    its next catch-up) hold them in neither the file nor its WAL, nor does a new host's cache
    or an export. The other writes stay."""
    short = b"sk-" + secrets.token_hex(20).encode()
    long = b"LONG-" + secrets.token_hex(3000).encode()  # random hex: no compression helps
    kept = agent_store.add("learning", "an honest note", tags=["api"])
    first = agent_store.add("learning", f"token {short.decode()}", tags=["api"])
    second = agent_store.add("learning", long.decode(), tags=["api"])
    pages = page_occurrences(place, short), page_occurrences(place, long)
    # the reading finds them where they are stored: the long one only out of line
    assert (1, 0) == (pages[0]["table"], pages[1]["table"]), pages
    assert len(pieces(long)) - 3 <= pages[1]["toast"], pages
    with place.operator() as ledger:
        ledger.read_model.sync()  # the operator's cache holds the secrets too
    for cache in ("operator.db", "agent.db"):
        assert 0 < cache_occurrences(place.tmp / cache, short), cache
        assert len(pieces(long)) // 2 < cache_occurrences(place.tmp / cache, long), cache
    with place.operator() as ledger:
        done = ledger.erase([first, second], reason="leaked token", key=place.key)
    assert ([first, second], 0) == (done.erased, done.texts_removed)
    assert f'VACUUM FULL "{place.pg.schema}".content' in done.note
    assert [1, kept] == [p for p in content_positions(place) if p < first]
    assert first not in content_positions(place)
    assert (0, 0) == (stored_occurrences(place, short), stored_occurrences(place, long))
    vacuum_full(place, done.note)
    for secret in (short, long):
        assert {"table": 0, "toast": 0} == page_occurrences(place, secret)
    assert done.position <= agent_store.sync(min_position=done.position)
    assert ["an honest note"] == [e.content for e in agent_store.list()]
    with SQLiteMemoryStore(place.tmp / "late.db", log=place.pg.dsn) as late:  # a new host
        assert ["an honest note"] == [e.content for e in late.list()]
    exported = io.StringIO()
    with Ledger.open(place.pg.dsn) as auditor:
        auditor.export(exported)
    for cache in ("operator.db", "agent.db", "late.db"):
        for secret in (short, long):
            assert 0 == cache_occurrences(place.tmp / cache, secret), cache
    for secret in (short, long):
        assert 0 == count(exported.getvalue().encode(), secret)


def test_verify_passes_reports_the_erasure_and_proofs_from_before_hold(
    place: Place, agent_store: SQLiteMemoryStore
) -> None:
    """After the erasure, `verify` on the PostgreSQL log passes and reports it (position,
    key, reason, what it names); a checkpoint and an inclusion proof of the erased position
    taken before it verify, a new handle proves the same inclusion against that checkpoint,
    and the log after the erasure is proved consistent with it."""
    secret = agent_store.add("learning", "password=" + secrets.token_hex(16))
    with place.operator() as ledger:
        before = ledger.checkpoint(key=place.key)
        proof = ledger.prove_inclusion(secret, before)
        done = ledger.erase([secret], reason="a password", key=place.key)
    with Ledger.open(place.pg.dsn) as auditor:
        report = auditor.verify(checkpoint=before)
        [verdict] = report.erasures
        assert (True, secret) == (report.ok, report.head_position - 1)
        assert (done.position, done.key_id, "a password", (secret,), True) == (
            verdict.position,
            verdict.key_id,
            verdict.reason,
            verdict.positions,
            verdict.authorized,
        )
        assert verify_inclusion(proof, proof.leaf_hash, before)
        assert proof == auditor.prove_inclusion(secret, before)
        after = auditor.checkpoint()
        assert verify_consistency(auditor.prove_consistency(before, after), before, after)


def erasure(*positions: object, adapter: str | None = None) -> NewEvent:
    """An unsigned erasure naming `positions` as given (the Struct does not check them)."""
    payload = ContentErased(positions=positions, reason="x")  # type: ignore[arg-type]
    return NewEvent(payload=payload, source_adapter=adapter)


def test_an_agent_login_cannot_erase(place: Place, agent_store: SQLiteMemoryStore) -> None:
    """An agent login's erasure, through the library or by raw SQL after `SET ROLE` to the
    writer role, is refused by the server by its kind, and no text is removed."""
    secret = agent_store.add("learning", "mine")
    stored = content_positions(place)
    agent = PostgresEventLog(place.agent_dsn)
    try:
        with pytest.raises(PermissionDeniedError, match="is an agent login"):
            agent.append(erasure(secret, adapter="codex"))
    finally:
        agent.close()
    body = encoded(erasure(secret, adapter="codex"), secret + 1)
    call = (
        f"SELECT {place.pg.schema}.append_events(ARRAY['raw'], ARRAY[%s], ARRAY[''::bytea],"
        " ARRAY[%s])"
    )
    with psycopg.connect(place.agent_dsn, autocommit=True) as conn:
        for prelude in ("RESET ROLE", f'SET ROLE "{place.pg.roles}_writer"'):
            conn.execute(prelude)
            with pytest.raises(psycopg.errors.InsufficientPrivilege, match="agent login"):
                conn.execute(call, (body, b"\x00" * 32))
    assert stored == content_positions(place)


def encoded(event: NewEvent, position: int) -> bytes:
    """The body an honest client would send for `event` at `position`."""
    draft = msgspec.structs.replace(event, event_id="raw")
    prepared = prepare(draft, clock_ns=time.time_ns, max_content_bytes=MAX_CONTENT_BYTES)
    return seal(prepared, position, bytes(32)).body


def test_nothing_removes_a_text_that_no_erasure_in_the_chain_names(
    place: Place, agent_store: SQLiteMemoryStore
) -> None:
    """As the owner role (or a superuser), a raw DELETE of a text is refused while no
    erasure names its position, as is a row of `erased` that no erasure event names (an
    event of another kind, or an erasure that names other positions), and every UPDATE,
    DELETE or TRUNCATE of `erased`; the texts stay."""
    secret = agent_store.add("learning", "keep me")
    other = agent_store.add("learning", "and me")
    with place.operator() as ledger:
        done = ledger.erase([other], reason="leaked", key=place.key)
    stored = content_positions(place)
    s = place.pg.schema
    attempts = [
        f"DELETE FROM {s}.content WHERE position = {secret}",
        f"DELETE FROM {s}.content",
        f"INSERT INTO {s}.erased VALUES ({secret}, {secret + 1})",  # a memory, not an erasure
        f"INSERT INTO {s}.erased VALUES ({secret}, {done.position})",  # names only `other`
        f"UPDATE {s}.erased SET position = {secret}",
        f"DELETE FROM {s}.erased",
        f"TRUNCATE {s}.erased",
        f"UPDATE {s}.content SET text = ''",
        f"TRUNCATE {s}.content",
    ]
    with admin(place) as conn:
        for role in (f'"{place.pg.roles}_owner"', "NONE"):
            conn.execute(f"SET ROLE {role}")
            for attempt in attempts:
                with pytest.raises(psycopg.Error) as refused:
                    conn.execute(attempt)
                assert DENIED == refused.value.sqlstate, (role, attempt, refused.value)
    assert stored == content_positions(place)
    assert secret in stored and other not in stored


def test_an_unsigned_erasure_takes_no_effect_and_the_log_then_fails_verify(
    place: Place, agent_store: SQLiteMemoryStore
) -> None:
    """The server cannot check a signature: a login no adapter binds (the operator's own,
    here) appends an unsigned erasure and the server removes the text. No host honours it,
    and `verify` fails at the removed text and reports the erasure as unauthorized."""
    secret = agent_store.add("learning", "not yours to erase")
    writer = PostgresEventLog(place.pg.dsn)
    try:
        unsigned = writer.append(erasure(secret))
    finally:
        writer.close()
    assert secret not in content_positions(place)
    with Ledger.open(place.pg.dsn) as auditor:
        report = auditor.verify()
    [verdict] = report.erasures
    assert (False, secret) == (report.ok, report.first_bad_position)
    assert (unsigned.position, None, False) == (
        verdict.position,
        verdict.key_id,
        verdict.authorized,
    )


@pytest.mark.parametrize(
    "positions",
    ['"2"', '["2"]', "[2.0]", "[2e0]", "[true]", "[null]", f"[{2**70}]", "[[2]]", '{"a": 2}'],
)
def test_an_erasure_naming_positions_that_are_no_integers_is_refused_whole(
    place: Place, agent_store: SQLiteMemoryStore, positions: str
) -> None:
    """Positions must be JSON integers as written (`2e0` and `2.0`, which PostgreSQL's jsonb
    reads as numbers, are no integers to a host): otherwise the whole append, sent by raw SQL
    as a superuser with an honest write before the erasure, is refused with the log's
    refusal code and a message naming the problem, and no text is removed."""
    position = agent_store.add("learning", "stays")
    stored = content_positions(place)
    note = encoded(NewEvent(payload=MemoryAdded(type="learning", content="x")), position + 1)
    body = encoded(erasure(2), position + 2).replace(
        b'"positions":[2]', b'"positions":' + positions.encode()
    )
    call = (
        f"SELECT {place.pg.schema}.append_events(ARRAY['raw-1', 'raw'], %s::bytea[],"
        " ARRAY['x', '']::bytea[], %s::bytea[])"
    )
    with admin(place) as conn, pytest.raises(psycopg.Error) as refused:
        conn.execute(call, ([note.replace(b'"raw"', b'"raw-1"'), body], [bytes(32)] * 2))
    assert (REFUSED_EVENT, True) == (
        refused.value.sqlstate,
        "names its positions as a JSON array of integers" in str(refused.value),
    )
    assert stored == content_positions(place)


def test_the_server_removes_only_earlier_written_texts_an_erasure_names(
    place: Place, agent_store: SQLiteMemoryStore
) -> None:
    """An erasure's positions at or past its own, below 1, holding no written text (the
    operator's registration), named twice, or erased before, remove nothing more; texts
    written in the same append before it are removed with it."""
    first = agent_store.add("learning", "one")
    second = agent_store.add("learning", "two")
    writer = PostgresEventLog(place.pg.dsn)
    try:
        writer.append(erasure(first))
        head = writer.head().position
        added = writer.append_many(
            [
                NewEvent(payload=MemoryAdded(type="learning", content="three")),
                erasure(0, -5, 1, first, head + 1, head + 2, head + 5),
            ]
        )
        named = writer.append(erasure(second, second, 10**12))
    finally:
        writer.close()
    removed = {first, second, added[0].position}
    assert sorted(set(range(1, named.position + 1)) - removed) == content_positions(place)
    with admin(place) as conn:
        erased = conn.execute(f"SELECT * FROM {place.pg.schema}.erased ORDER BY 1").fetchall()
    assert [
        (first, head),
        (second, named.position),
        (added[0].position, added[1].position),
    ] == erased


def test_through_the_library_the_refusal_is_invalid_input(place: Place) -> None:
    """A position no 64-bit integer holds, sent through the library, comes back as an
    `InvalidInputError` naming the problem, and the head does not move."""
    writer = PostgresEventLog(place.pg.dsn)
    try:
        head = writer.head()
        with pytest.raises(InvalidInputError, match="JSON array of integers"):
            writer.append(erasure(2**70))
        assert head == writer.head()
    finally:
        writer.close()
