"""Host caches over a PostgreSQL log: the cache tests' behaviours on the real server, and the
audit commands against it. Each test gets its own schema (`tests/eventlog/conftest.py`)."""

from __future__ import annotations

import hashlib
import io
import multiprocessing
from collections.abc import Iterator
from pathlib import Path

import pytest

psycopg = pytest.importorskip("psycopg")

from eventlog import InvalidInputError, open_log, verify_chain  # noqa: E402
from projections import (  # noqa: E402
    CacheRefusedError,
    CrossTaskKB,
    SQLiteMemoryStore,
    open_view,
)
from replay import Ledger, quarantine, release, verify_inclusion  # noqa: E402
from tests.postgres import PgLog  # noqa: E402
from tests.projections.test_cache import _tailer, _writer, added, tables  # noqa: E402
from tests.replay.test_history import script  # noqa: E402


@pytest.fixture
def dsn(pg: PgLog) -> str:
    """This test's log, on the server."""
    return pg.dsn


@pytest.fixture
def stores(tmp_path: Path, dsn: str) -> Iterator[list[SQLiteMemoryStore]]:
    opened: list[SQLiteMemoryStore] = []
    yield opened
    for store in opened:
        store.close()


def on_host(stores: list[SQLiteMemoryStore], cache: Path, dsn: str) -> SQLiteMemoryStore:
    store = SQLiteMemoryStore(cache, log=dsn)
    stores.append(store)
    return store


def roll_back(place: PgLog, position: int) -> None:
    """What a restore from an old backup does: the log loses every event after `position`."""
    with psycopg.connect(place.server.dsn, autocommit=True) as admin:
        admin.execute("SET session_replication_role = replica")
        for table in ("content", "events"):  # a backup holds both tables as they were
            admin.execute(f'DELETE FROM "{place.schema}".{table} WHERE position > %s', (position,))
        admin.execute(
            f'UPDATE "{place.schema}".head SET position = %s, chain_hash = '
            f'(SELECT chain_hash FROM "{place.schema}".events WHERE position = %s)',
            (position, position),
        )


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_two_hosts_read_their_own_writes_and_each_others_after_sync(
    tmp_path: Path, dsn: str, stores: list[SQLiteMemoryStore]
) -> None:
    """A write is visible through its own handle at once, and on another host after
    `sync(min_position=p)`."""
    first = on_host(stores, tmp_path / "a.db", dsn)
    second = on_host(stores, tmp_path / "b.db", dsn)
    position = first.add("learning", "from host a")
    assert "from host a" == first.list(limit=1)[0].content
    assert position <= second.sync(min_position=position)
    assert ["from host a"] == [e.content for e in second.list()]


def test_four_writers_on_two_hosts_and_a_tailer(tmp_path: Path, dsn: str) -> None:
    """Four processes on two host caches append to the server at once while a third host
    tails it: nothing lost, no gap seen, every cache equals the others, the chain verifies."""
    each, names = 20, ["w0", "w1", "w2", "w3"]
    spawn = multiprocessing.get_context("spawn")
    barrier, out, tail = spawn.Barrier(len(names)), spawn.Queue(), spawn.Queue()
    hosts = {name: tmp_path / f"host{i % 2}.db" for i, name in enumerate(names)}
    for cache in set(hosts.values()):
        SQLiteMemoryStore(cache, log=dsn).close()
    writers = [
        spawn.Process(target=_writer, args=(str(hosts[n]), dsn, n, each, barrier, out))
        for n in names
    ]
    tailer = spawn.Process(target=_tailer, args=(str(tmp_path / "tail.db"), dsn, each * 4, tail))
    for process in [tailer, *writers]:
        process.start()
    results = [out.get(timeout=120) for _ in names]
    seen, gaps = tail.get(timeout=120)
    for process in [tailer, *writers]:
        process.join(60)
    assert all(own for _, _, own in results)
    assert list(range(1, each * 4 + 1)) == sorted(p for _, ids, _ in results for p in ids)
    assert (each * 4, 0) == (seen, gaps)
    folded = []
    for cache in [*set(hosts.values()), tmp_path / "tail.db", tmp_path / "fresh.db"]:
        with SQLiteMemoryStore(cache, log=dsn) as store:
            folded.append(tables(store))
    assert all(folded[0] == other for other in folded[1:])
    event_log = open_log(dsn, read_only=True)
    assert verify_chain(event_log).ok
    event_log.close()


def test_a_deleted_cache_is_rebuilt_from_the_server(
    tmp_path: Path, dsn: str, stores: list[SQLiteMemoryStore]
) -> None:
    """A host that lost its cache folds the log anew and holds what it held before."""
    store = on_host(stores, tmp_path / "a.db", dsn)
    store.add("learning", "kept by the log")
    before = tables(store)
    store.close()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{tmp_path / 'a.db'}{suffix}").unlink(missing_ok=True)
    assert before == tables(on_host(stores, tmp_path / "a.db", dsn))


def test_a_cache_ahead_of_or_disagreeing_with_the_server_is_refused_and_kept(
    tmp_path: Path,
    pg: PgLog,
    dsn: str,
) -> None:
    """The server restored from an old backup (it lost events a host folded) is refused; so
    is the server once other events took those positions. The cache stays as it was."""
    cache = tmp_path / "a.db"
    with SQLiteMemoryStore(cache, log=dsn) as store:
        for i in range(5):
            store.add("learning", f"e{i}")
    before = digest(cache)
    roll_back(pg, 3)
    with pytest.raises(CacheRefusedError, match="past the log's head 3"):
        SQLiteMemoryStore(cache, log=dsn)
    server = open_log(dsn)
    server.append_many([added("another fourth"), added("another fifth")])
    server.close()
    with pytest.raises(CacheRefusedError, match="disagrees with the log's chain at position 5"):
        SQLiteMemoryStore(cache, log=dsn)
    assert before == digest(cache)


def test_audit_commands_work_against_the_server(tmp_path: Path, dsn: str) -> None:
    """Every investigation of a `Ledger` on the server's DSN answers the same with a host
    cache as with none (a read model folded in memory); none of them writes the log."""
    with SQLiteMemoryStore(tmp_path / "writer.db", log=dsn) as store:
        script(store)
    cache = tmp_path / "auditor.db"
    server = open_log(dsn, read_only=True)
    head = server.head()
    with Ledger.open(dsn, cache=cache) as cached, Ledger.open(dsn) as folded:
        assert folded.history() == cached.history()
        assert ["v1", "v2", "v3"] == [
            v.value for v in cached.history(tag="api", key="base_url").versions
        ]
        assert folded.blame() == cached.blame()
        radius = cached.blast_radius(source_adapter="codex")
        assert folded.blast_radius(source_adapter="codex") == radius
        assert folded.lineage(2) == cached.lineage(2)
        assert folded.operators() == cached.operators()
        with cached.as_of(position=2) as view:
            assert ["v2"] == [f.value for f in CrossTaskKB(view).subscribe("api", scope="project")]
        assert ["base_url"] == [c.key for c in cached.diff(1, 2).changed]
        out = io.StringIO()
        assert 8 == cached.export(out).events
        assert cached.verify().ok
        assert cached.rebuild().matches
        with pytest.raises(InvalidInputError, match="this host's cache"):
            folded.rebuild()
        held = cached.checkpoint()
        assert folded.checkpoint() == held
        assert cached.verify(checkpoint=held).ok
        row = next(server.scan(after=2, until=3))
        assert verify_inclusion(cached.prove_inclusion(3, held), row, held)
    with open_view(cache, log=dsn) as view:
        assert "not a fact" in [e.content for e in view.list(type="learning")]
    assert head == server.head()
    server.close()


def test_quarantine_and_release_write_to_the_server(tmp_path: Path, dsn: str) -> None:
    """A responder quarantines and releases through the server's DSN; every host sees both."""
    with SQLiteMemoryStore(tmp_path / "writer.db", log=dsn) as store:
        script(store)
    applied = quarantine(dsn, source_adapter="codex", reason="suspect on every host")
    with SQLiteMemoryStore(tmp_path / "host.db", log=dsn) as host:
        kb = CrossTaskKB(host)
        assert ["v1"] == [f.value for f in kb.subscribe("api", scope="project")]
        release(dsn, applied, reason="cleared")
        assert applied + 2 == host.sync(min_position=applied + 2)  # the subscribe's receipt
        assert ["v3"] == [f.value for f in kb.subscribe("api", scope="project")]
