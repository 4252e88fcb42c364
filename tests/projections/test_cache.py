"""A host's read-model cache over a log held elsewhere: it tails the log by position, re-links
the chain as it folds, reads its own writes, and refuses (and keeps) a cache the log contradicts.

The log here is another SQLite file standing in for the remote one: the cache sees it only
through the backend interface, as it sees a PostgreSQL log.
"""

from __future__ import annotations

import hashlib
import multiprocessing
import shutil
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from eventlog import (
    ChainBreak,
    InvalidInputError,
    InvalidTypeError,
    MemoryAdded,
    NewEvent,
    StorageError,
    open_log,
    verify_chain,
)
from projections import (
    CacheChoiceError,
    CacheRefusedError,
    CrossTaskKB,
    MemoryTrustPolicy,
    SQLiteMemoryStore,
    SyncTimeoutError,
    load_persistent_memory,
    open_view,
)
from projections import _sql_knowledge as sql_knowledge
from projections import _sql_reads as sql_reads
from projections._cache import CacheProjection
from projections._tables import table_rows
from projections.internal import (
    view_at,
)
from tests.histories import HISTORIES, Operation, play

Host = Callable[..., SQLiteMemoryStore]
Tables = dict[str, list[tuple[object, ...]]]


@pytest.fixture
def remote(tmp_path: Path) -> Path:
    """The log, in a file no host keeps its read model in."""
    path = tmp_path / "remote" / "log.db"
    open_log(path).close()
    return path


@pytest.fixture
def host(tmp_path: Path, remote: Path) -> Iterator[Host]:
    """Opens a store whose cache is `<name>/cache.db`, over `remote` unless told otherwise."""
    opened: list[SQLiteMemoryStore] = []

    def make(name: str = "a", *, log: object = None, **options: Any) -> SQLiteMemoryStore:
        store = SQLiteMemoryStore(cache_path(tmp_path, name), log=log or remote, **options)
        opened.append(store)
        return store

    yield make
    for store in opened:
        store.close()


def cache_path(tmp_path: Path, name: str) -> Path:
    return tmp_path / name / "cache.db"


TABLES = (*sql_knowledge.KNOWLEDGE_TABLES, *sql_reads.RECEIPT_TABLES)
"""Every table of the read model a store keeps."""


def tables(store: SQLiteMemoryStore) -> Tables:
    with store.snapshot() as snap:
        return {table: list(table_rows(snap, table)) for table in TABLES}


def refolded(log_path: Path) -> Tables:
    """The read model folded from the log in memory, apart from any cache."""
    event_log = open_log(log_path, read_only=True)
    try:
        view = view_at(event_log, event_log.head().position, db_path=log_path)
        with view, view.snapshot() as snap:
            return {table: list(table_rows(snap, table)) for table in TABLES}
    finally:
        event_log.close()


def file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def cache_position(path: Path) -> set[int]:
    raw = sqlite3.connect(path)
    try:
        return {row[0] for row in raw.execute("SELECT position FROM fl_projector_checkpoint")}
    finally:
        raw.close()


def copy_log(source: Path, target: Path) -> None:
    """Copy a log file whole (no handle may be writing to it)."""
    with sqlite3.connect(source) as raw:
        raw.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    raw.close()
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, target)


def added(content: str) -> NewEvent:
    return NewEvent(payload=MemoryAdded(type="learning", content=content))


# -- reading one's own writes, and other hosts' -------------------------------------------


def test_a_dsn_as_the_cache_is_refused_and_nothing_is_made(
    remote: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A host's cache is a file on this host: a store or a view given a DSN as its cache
    refuses it (`CacheChoiceError`, not repeating the DSN's password) and makes no file at
    a path spelled like the DSN."""
    monkeypatch.chdir(tmp_path)
    dsn = "postgresql://someone:hunter2@db.internal/kb"
    for opening in (
        lambda: SQLiteMemoryStore(dsn, log=remote),
        lambda: open_view(dsn, log=remote),
    ):
        with pytest.raises(CacheChoiceError, match="not a postgresql:// DSN") as refused:
            opening()
        assert "hunter2" not in str(refused.value)
    assert ["remote"] == sorted(p.name for p in tmp_path.iterdir())


def test_the_writing_handle_reads_its_own_writes(host: Host) -> None:
    """An append commits in the log, and the cache has folded it when the call returns (a
    subscribe's receipt too)."""
    store = host()
    kb = CrossTaskKB(store, run_id="r1", producer_task_id="t1")
    for i in range(3):
        entry = store.add("learning", f"n{i}")
        assert f"n{i}" == store.list(limit=1)[0].content
        assert entry == store.event_log.head().position
    kb.publish("api", "url", "v1", scope="run")
    kb.publish("api", "url", "v2", scope="run")
    assert ["v2"] == [fact.value for fact in kb.subscribe("api", scope="run")]
    assert {6} == cache_position(store.db_path)  # type: ignore[arg-type]
    assert "recall_recorded" == store.event_log.event_at(6).kind  # subscribe's receipt


def test_an_append_inside_an_open_read_is_refused_clearly_and_writes_nothing(
    host: Host,
) -> None:
    """A cache cannot fold inside a read of its own: an append while this handle holds a
    snapshot is a StorageError saying so (not SQLite's 'cannot start a transaction within a
    transaction'), the log does not move, and the next append works."""
    store = host()
    store.add("learning", "n0")
    with store.snapshot(), pytest.raises(StorageError, match="while a read of it is open"):
        store.add("learning", "n1")
    assert 1 == store.event_log.head().position
    assert 2 == store.add("learning", "n1")


def test_another_host_sees_a_position_after_sync(host: Host) -> None:
    """After `sync(min_position=p)` a read on another host sees position p; reads catch up
    on their own too."""
    first, second = host("a"), host("b")
    assert 0 == second.sync()
    position = first.add("learning", "written on host a")
    assert position <= second.sync(min_position=position)
    assert ["written on host a"] == [e.content for e in second.list()]
    again = first.add("learning", "read without a sync")
    assert again == second.list(limit=1)[0].id


def test_sync_waits_for_the_log_to_reach_a_position(host: Host) -> None:
    """`sync` waits (bounded) for a position the log has not reached, and returns once it
    has; past its timeout it raises a clear error."""
    writer, reader = host("a"), host("b")
    with pytest.raises(SyncTimeoutError, match="did not reach position 1 within"):
        reader.sync(min_position=1, timeout=0.05)
    later = threading.Timer(0.05, lambda: writer.add("learning", "late"))
    later.start()
    try:
        assert 1 == reader.sync(min_position=1, timeout=5.0)
    finally:
        later.join()
    assert ["late"] == [e.content for e in reader.list()]


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ({"min_position": -1}, InvalidInputError),
        ({"min_position": "3"}, InvalidTypeError),
        ({"timeout": -1.0}, InvalidInputError),
        ({"timeout": float("nan")}, InvalidInputError),
    ],
)
def test_sync_refuses_bad_arguments(
    host: Host, arguments: dict[str, Any], error: type[Exception]
) -> None:
    """A position that is not one, or a timeout that is not a duration, is a clear error."""
    with pytest.raises(error):
        host().sync(**arguments)


def test_an_append_commits_in_the_log_whatever_the_enclosing_with_does(host: Host) -> None:
    """With a log held elsewhere each append commits at `append()`: an exception leaving the
    `with` afterwards does not undo it (unlike one file, where the `with` is one commit)."""
    store = host()
    with pytest.raises(RuntimeError), store.write_transaction() as tx:
        [record] = tx.append([added("kept")])
        assert record.position == tx.head_position()
        raise RuntimeError("the caller failed after appending")
    assert ["kept"] == [e.content for e in store.list()]


def test_the_prompt_reads_the_head_and_the_cache_in_one_snapshot(host: Host) -> None:
    """The prompt path works over a cache: its receipt names the position the cache showed."""
    store = host()
    store.add("learning", "remember this", ["api"], source_adapter="codex")
    policy = MemoryTrustPolicy(trusted_adapters=frozenset({"codex"}))
    text = load_persistent_memory(store, ["api"], trust_policy=policy, task_id="t")
    assert "remember this" in text
    receipt = store.event_log.event_at(2)
    assert 1 == receipt.payload.head_position  # type: ignore[union-attr]


# -- crashes, deleted caches and rebuilds ---------------------------------------------------


def _append_then_die(cache: str, log: str) -> None:
    """A writer that dies after its append committed in the log, before its cache folds."""
    import os

    from projections._cache import CacheProjection as Projection

    def die(*_: object) -> None:
        os._exit(17)

    store = SQLiteMemoryStore(cache, log=log)
    Projection._fold = die  # type: ignore[method-assign]
    store.add("learning", "committed, never folded here")


def test_a_crash_between_append_and_fold_is_repaired_by_catch_up(
    tmp_path: Path, remote: Path, host: Host
) -> None:
    """A process killed after the log committed its append leaves its cache behind, never
    wrong; the next handle on that cache catches up."""
    host("a").add("learning", "before")
    worker = multiprocessing.get_context("spawn").Process(
        target=_append_then_die, args=(str(cache_path(tmp_path, "a")), str(remote))
    )
    worker.start()
    worker.join(60)
    assert 17 == worker.exitcode
    assert {1} == cache_position(cache_path(tmp_path, "a"))
    assert 2 == open_log(remote, read_only=True).head().position
    reopened = host("a")
    assert ["committed, never folded here", "before"] == [e.content for e in reopened.list()]
    assert refolded(remote) == tables(reopened)


def test_a_fold_that_fails_after_the_append_leaves_the_cache_behind(
    host: Host, monkeypatch: pytest.MonkeyPatch
) -> None:
    """If folding fails once the log has committed, the append stands and the next read
    folds it."""
    store = host()
    original = CacheProjection._fold

    def fail(*_: object) -> None:
        raise OSError("disk went away")

    monkeypatch.setattr(CacheProjection, "_fold", fail)
    with pytest.raises(OSError, match="disk went away"):
        store.add("learning", "appended")
    monkeypatch.setattr(CacheProjection, "_fold", original)
    assert 1 == store.event_log.head().position
    assert ["appended"] == [e.content for e in store.list()]


def test_a_deleted_cache_is_rebuilt_from_the_log(tmp_path: Path, remote: Path, host: Host) -> None:
    """Remove a host's cache and open it again: it is folded anew and equals the old one."""
    store = host()
    play(store, [("add", "learning", ["a"], "codex", 0.5), ("publish", "run", "k1", "v", None)])
    before = tables(store)
    store.close()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{cache_path(tmp_path, 'a')}{suffix}").unlink(missing_ok=True)
    assert before == tables(host())


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(operations=HISTORIES)
def test_a_cache_equals_a_rebuild_from_the_log(
    tmp_path_factory: Any, operations: list[Operation]
) -> None:
    """Whatever the history, the cache folded write by write equals the log refolded from
    scratch, and equals a cache built afresh by another host."""
    root = tmp_path_factory.mktemp("history")
    log_path = root / "log.db"
    with SQLiteMemoryStore(root / "a.db", log=log_path) as store:
        play(store, list(operations))
        incremental = tables(store)
    with SQLiteMemoryStore(root / "b.db", log=log_path) as fresh:
        assert refolded(log_path) == incremental == tables(fresh)


# -- caches the log contradicts -------------------------------------------------------------


def test_a_cache_of_another_log_is_refused_and_kept(
    tmp_path: Path, host: Host, remote: Path
) -> None:
    """A cache records the log it folds; opening it over another log is refused, untouched."""
    host().add("learning", "in the first log")
    cache = cache_path(tmp_path, "a")
    before = file_digest(cache)
    other = tmp_path / "other" / "log.db"
    with pytest.raises(CacheRefusedError, match=r"folds log .*, not log"):
        SQLiteMemoryStore(cache, log=other)
    assert before == file_digest(cache)


def test_a_log_file_is_never_taken_for_a_cache(tmp_path: Path, remote: Path) -> None:
    """Naming a log's own file as the cache is refused, and the file is left alone."""
    one_file = tmp_path / "memory.db"
    SQLiteMemoryStore(one_file).close()
    before = file_digest(one_file)
    with pytest.raises(CacheRefusedError, match="is not a read-model cache"):
        SQLiteMemoryStore(one_file, log=remote)
    assert before == file_digest(one_file)


def test_a_file_of_other_tables_is_never_taken_for_a_cache(tmp_path: Path, remote: Path) -> None:
    """A database of other tables named as the cache is refused before anything is written
    to it, its journal mode included."""
    other = tmp_path / "legacy.db"
    raw = sqlite3.connect(other)
    raw.execute("CREATE TABLE memory (id INTEGER PRIMARY KEY, content TEXT)")
    raw.commit()
    raw.close()
    before = file_digest(other)
    with pytest.raises(CacheRefusedError, match="is not a read-model cache"):
        SQLiteMemoryStore(other, log=remote)
    assert before == file_digest(other)
    raw = sqlite3.connect(other)
    assert "delete" == raw.execute("PRAGMA journal_mode").fetchone()[0]
    raw.close()


def test_a_cache_ahead_of_the_log_is_refused_and_kept(
    tmp_path: Path, remote: Path, host: Host
) -> None:
    """A log that lost events this host folded (restored from an old backup) is refused:
    the cache stays as it is, the evidence of what was lost."""
    store = host()
    for i in range(3):
        store.add("learning", f"e{i}")
    store.close()
    backup = tmp_path / "backup" / "log.db"
    copy_log(remote, backup)
    store = host()
    store.add("learning", "lost when the log is restored")
    store.close()
    copy_log(backup, remote)
    cache = cache_path(tmp_path, "a")
    before = file_digest(cache)
    with pytest.raises(CacheRefusedError, match="past the log's head 3") as refused:
        host()
    assert 4 == refused.value.position
    assert before == file_digest(cache)
    assert {4} == cache_position(cache)


def test_a_cache_whose_chain_disagrees_with_the_log_is_refused_and_kept(
    tmp_path: Path, remote: Path, host: Host
) -> None:
    """A log whose history differs from what this host folded (same log, rewritten after
    position 2) is refused at the first position where the chains part, whether the cache is
    level with the log or behind it."""
    store = host()
    store.add("learning", "e1")
    store.add("learning", "e2")
    store.close()
    fork = tmp_path / "fork" / "log.db"
    copy_log(remote, fork)
    store = host()
    store.add("learning", "the original third")
    store.close()
    forked = open_log(fork)
    forked.append(added("a different third"))
    forked.close()
    cache = cache_path(tmp_path, "a")
    before = file_digest(cache)
    with pytest.raises(CacheRefusedError, match="disagrees with the log's chain at position 3"):
        host(log=fork)
    forked = open_log(fork)
    forked.append(added("and a fourth"))
    forked.close()
    with pytest.raises(CacheRefusedError, match="at position 3"):
        host(log=fork)
    assert before == file_digest(cache)


def test_an_open_store_refuses_to_read_past_a_log_that_changed_under_it(
    remote: Path, host: Host
) -> None:
    """A handle that is already open notices on its next read that the log no longer holds
    what it folded (its last event replaced behind the log's back)."""
    writer, reader = host("a"), host("b")
    writer.add("learning", "e1")
    writer.add("learning", "e2")
    assert 2 == reader.sync()
    raw = sqlite3.connect(remote)
    for table in ("fl_events", "fl_content"):  # the event and its text, as a rewind would
        raw.execute(f"DROP TRIGGER {table}_no_delete")
        raw.execute(f"DELETE FROM {table} WHERE position = 2")
    raw.commit()
    raw.close()
    rewritten = open_log(remote)
    rewritten.append(added("another second"))
    rewritten.close()
    with pytest.raises(CacheRefusedError, match="at position 2"):
        reader.list()


def test_an_event_whose_chain_does_not_link_is_never_folded(
    tmp_path: Path, remote: Path, host: Host
) -> None:
    """A row changed behind the log's back stops the fold before it: the cache holds only the
    events before it, and reads refuse rather than answer from a broken chain."""
    store = host()
    for i in range(4):
        store.add("learning", f"e{i}")
    store.close()
    raw = sqlite3.connect(remote)
    raw.execute("DROP TRIGGER fl_events_no_update")
    raw.execute(
        "UPDATE fl_events SET body = replace(body, 'learning', 'learnin_') WHERE position = 3"
    )
    raw.commit()
    raw.close()
    with pytest.raises(ChainBreak) as broken:
        host("b")
    assert 3 == broken.value.position
    assert {0} == cache_position(cache_path(tmp_path, "b"))


# -- many processes on many hosts ------------------------------------------------------------


def _writer(cache: str, log: str, name: str, count: int, barrier: Any, out: Any) -> None:
    store = SQLiteMemoryStore(cache, log=log, source_adapter="codex")
    barrier.wait()
    ids = [store.add("learning", f"{name}-{i}", [name]) for i in range(count)]
    mine = {e.id for e in store.list(tags=[name], limit=count)}
    store.close()
    out.put((name, ids, set(ids) <= mine))


def _tailer(cache: str, log: str, total: int, out: Any) -> None:
    """Follow the log on its own host, checking positions arrive dense and in order."""
    store = SQLiteMemoryStore(cache, log=log)
    event_log = open_log(log, read_only=True)
    seen, gaps = 0, 0
    deadline = time.monotonic() + 60
    while seen < total and time.monotonic() < deadline:
        reached = store.sync()
        for row in event_log.scan(after=seen, until=reached):
            gaps += row.position != seen + 1
            seen = row.position
        time.sleep(0.002)
    store.close()
    event_log.close()
    out.put((seen, gaps))


def test_four_writers_on_two_hosts_and_a_tailer(tmp_path: Path, remote: Path) -> None:
    """Four processes, two per host cache, append at once while a third host tails the log:
    nothing is lost, the tailer sees no gap, every cache equals the refold, the chain verifies."""
    each, names = 25, ["w0", "w1", "w2", "w3"]
    spawn = multiprocessing.get_context("spawn")
    barrier, out, tail = spawn.Barrier(len(names)), spawn.Queue(), spawn.Queue()
    hosts = {name: cache_path(tmp_path, f"host{i % 2}") for i, name in enumerate(names)}
    for cache in set(hosts.values()):
        SQLiteMemoryStore(cache, log=remote).close()
    writers = [
        spawn.Process(target=_writer, args=(str(hosts[n]), str(remote), n, each, barrier, out))
        for n in names
    ]
    tailer = spawn.Process(
        target=_tailer, args=(str(cache_path(tmp_path, "tail")), str(remote), each * 4, tail)
    )
    for process in [tailer, *writers]:
        process.start()
    results = [out.get(timeout=120) for _ in names]
    seen, gaps = tail.get(timeout=120)
    for process in [tailer, *writers]:
        process.join(60)
    assert all(own for _, _, own in results)
    positions = sorted(p for _, ids, _ in results for p in ids)
    assert list(range(1, each * 4 + 1)) == positions
    assert (each * 4, 0) == (seen, gaps)
    expected = refolded(remote)
    for cache in [*set(hosts.values()), cache_path(tmp_path, "tail")]:
        with SQLiteMemoryStore(cache, log=remote) as store:
            assert expected == tables(store)
    event_log = open_log(remote, read_only=True)
    assert verify_chain(event_log).ok
    event_log.close()


@pytest.mark.parametrize("log", [42, b"remote.db", object()])
def test_a_log_that_is_not_a_log_is_refused(tmp_path: Path, log: object) -> None:
    """`log=` takes a path, a DSN or an EventLog; anything else is a clear type error, and
    no file is created."""
    with pytest.raises(InvalidTypeError, match="log must be"):
        SQLiteMemoryStore(tmp_path / "cache.db", log=log)  # type: ignore[arg-type]
    assert [] == list(tmp_path.iterdir())
