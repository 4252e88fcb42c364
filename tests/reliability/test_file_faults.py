"""File faults: a directory for a path, read-only files, garbage files and a full disk.

Read-only files are tested for real, not by chmod alone: the tests run as root, for whom
permission bits do not stop a write. A forked child (the interpreter and every module already
loaded, so it needs no file under the root-only interpreter prefix) drops to uid/gid 65534
(nobody) before it opens the database, and reports back through a pipe. Run as a normal user,
the child keeps its uid and the permission bits alone make the file read-only.
"""

from __future__ import annotations

import hashlib
import os
import random
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from eventlog import FactledgerError, SQLiteEventLog, StorageError, open_log
from projections import (
    CrossTaskKB,
    MemoryTrustPolicy,
    SQLiteMemoryStore,
    load_persistent_memory,
    open_view,
)
from tests.reliability.support import (
    NOBODY,
    Report,
    as_reader,
    assert_chain_verifies,
    assert_read_model_is_the_log_refolded,
    live_tables,
    written_text,
)

ROOT = Path(__file__).resolve().parents[2]


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def files_in(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


# -- the path is not a file ---------------------------------------------------------------------


def test_directory_as_database_path_is_a_clear_error(tmp_path: Path) -> None:
    """Opening a directory, for writing or reading, raises StorageError and creates nothing."""
    (tmp_path / "inside").mkdir()
    before = files_in(tmp_path)
    with pytest.raises(StorageError, match="directory"):
        SQLiteMemoryStore(tmp_path)
    with pytest.raises(StorageError, match="directory"):
        open_log(tmp_path / "inside", read_only=True)
    assert before == files_in(tmp_path)


def test_a_named_pipe_or_device_as_database_path_is_refused_without_waiting(
    tmp_path: Path,
) -> None:
    """A FIFO (SQLite's open would wait for a writer forever) or a character device, as a
    database to write or to read, in a real process: one line, exit 1, at once."""
    fifo = tmp_path / "pipe.db"
    os.mkfifo(fifo)
    for path in (str(fifo), "/dev/null"):
        for command in (["add", "note"], ["list"], ["verify"]):
            done = subprocess.run(
                [sys.executable, "-m", "replay", *command, "--db", path],
                capture_output=True,
                text=True,
                timeout=60,
                cwd=ROOT,
                check=False,
            )
            assert 1 == done.returncode and 1 == len(done.stderr.splitlines()), done.stderr
            assert "not a regular file" in done.stderr
    with pytest.raises(StorageError, match="not a regular file"):
        open_log(fifo, read_only=True)


def test_path_under_a_regular_file_is_a_clear_error(tmp_path: Path) -> None:
    """A database path whose parent is a regular file raises StorageError, not OSError."""
    blocker = tmp_path / "blocker"
    blocker.write_text("not a directory")
    with pytest.raises(StorageError, match="blocker"):
        SQLiteMemoryStore(blocker / "memory.db")
    assert "not a directory" == blocker.read_text()


def test_path_too_long_for_the_file_system_is_a_clear_error(tmp_path: Path) -> None:
    """A file name longer than the file system allows raises StorageError, not OSError."""
    with pytest.raises(StorageError):
        SQLiteMemoryStore(tmp_path / ("x" * 300) / "memory.db")


# -- garbage files ------------------------------------------------------------------------------


def _random_bytes(path: Path) -> None:
    path.write_bytes(random.Random(8).randbytes(64 * 1024))


def _text(path: Path) -> None:
    path.write_text("name,email\nada,ada@example.com\n" * 200)


def _header_then_garbage(path: Path) -> None:
    path.write_bytes(b"SQLite format 3\x00" + random.Random(9).randbytes(8192))


def _truncated_store(path: Path) -> None:
    with SQLiteMemoryStore(path, durability="fast") as store:
        store.add_many([{"type": "learning", "content": "x" * 300}] * 200)
    with path.open("r+b") as file:
        file.truncate(path.stat().st_size // 2)


@pytest.mark.parametrize(
    "make",
    [_random_bytes, _text, _header_then_garbage, _truncated_store],
    ids=["random-bytes", "text", "sqlite-header-then-garbage", "truncated-store"],
)
def test_garbage_file_is_refused_clearly_and_left_untouched(
    tmp_path: Path, make: Callable[[Path], None]
) -> None:
    """A file that is not a usable database raises StorageError on open, for the store and the
    log (read-write and read-only), and its bytes are left exactly as they were."""
    path = tmp_path / "garbage.db"
    make(path)
    before = digest(path)
    with pytest.raises(StorageError, match="not a usable SQLite database"):
        SQLiteMemoryStore(path)
    with pytest.raises(StorageError, match="not a usable SQLite database"):
        open_log(path)
    with pytest.raises(StorageError, match="not a usable SQLite database"):
        open_log(path, read_only=True)
    assert before == digest(path)


def test_store_with_a_corrupted_page_fails_clearly_on_read(tmp_path: Path) -> None:
    """Random bytes over the middle of a store file: whatever still opens, every failure is a
    StorageError naming the damage, never a raw sqlite3 error."""
    path = tmp_path / "memory.db"
    with SQLiteMemoryStore(path, durability="fast") as store:
        store.add_many([{"type": "learning", "content": f"{i} " + "x" * 300} for i in range(300)])
    with path.open("r+b") as file:
        file.seek(path.stat().st_size // 2)
        file.write(random.Random(10).randbytes(8192))
    with pytest.raises(StorageError, match="malformed"), SQLiteMemoryStore(path) as store:
        store.list(limit=1000)
        list(store.event_log.read())


# -- read-only files ----------------------------------------------------------------------------


def _outcome(call: Callable[[], object]) -> list[str]:
    """['ok', repr] or [error class, message]: what one call did, as JSON-friendly text."""
    try:
        return ["ok", repr(call())[:200]]
    except FactledgerError as exc:
        return [type(exc).__name__, str(exc)]
    except Exception as exc:
        return ["raw " + type(exc).__name__, str(exc)]


def _read_and_try_every_write(db_path: Path) -> Report:
    """In the child: read through every reader, then attempt every kind of write."""
    try:
        store = SQLiteMemoryStore(db_path, durability="fast")
    except FactledgerError as exc:
        return {"open": [type(exc).__name__, str(exc)]}
    kb = CrossTaskKB(store, run_id="run-1", producer_task_id="reader")
    head = store.event_log.head().position
    reads = {
        "uid": os.geteuid(),
        "head": head,
        "list": [e.content for e in store.list()],
        "query": [e.content for e in store.query(read_only_from_adapters=["codex"])],
        "relevant": [e.content for e in store.get_relevant(["api"])],
        "history": [f.value for f in kb.history("api", "users", scope="project")],
    }
    with open_view(db_path) as view:
        reads["view_subscribe"] = [
            f.value for f in CrossTaskKB(view).subscribe("api", scope="project")
        ]
    writes = {
        "add": _outcome(lambda: store.add("learning", "new", ["api"])),
        "add_many": _outcome(lambda: store.add_many([{"type": "learning", "content": "n"}])),
        "remove": _outcome(lambda: store.remove(1)),
        "decay": _outcome(lambda: store.decay_importance(0.5)),
        "prune": _outcome(lambda: store.prune(max_entries=0)),
        "publish": _outcome(lambda: kb.publish("api", "users", "v3", scope="project")),
        "publish_many": _outcome(lambda: kb.publish_many([("a", "b", "c")], scope="project")),
        "recall": _outcome(
            lambda: load_persistent_memory(store, ["api"], trust_policy=MemoryTrustPolicy())
        ),
        "subscribe": _outcome(lambda: list(kb.subscribe("api", scope="project"))),
    }
    reads["head_after"] = store.event_log.head().position
    store.close()
    return {"reads": reads, "writes": writes}


def _seed(db_path: Path) -> SQLiteMemoryStore:
    store = SQLiteMemoryStore(db_path, durability="fast")
    kb = CrossTaskKB(store, run_id="run-1", producer_task_id="writer")
    store.add("learning", "operator row", ["api"])
    store.add("learning", "codex row", ["api"], source_adapter="codex")
    kb.publish("api", "users", "v1", scope="project")
    kb.publish("api", "users", "v2", scope="project")
    return store


EXPECTED_READS = {
    "head": 4,
    "head_after": 4,
    "list": ["v2", "codex row", "operator row"],
    "query": ["codex row"],
    "relevant": ["v2", "codex row", "operator row"],
    "history": ["v1", "v2"],
    "view_subscribe": ["v2"],
}
"""A store's subscribe is receipted, so it is among the writes; a read-only view's is not."""


def _assert_reads_work_and_writes_fail_clearly(report: Report) -> None:
    assert "crashed" not in report, report
    assert "open" not in report, f"the store did not open: {report}"
    reads = report["reads"]
    assert isinstance(reads, dict)
    if os.geteuid() == 0:
        assert NOBODY == reads.pop("uid")
    else:
        reads.pop("uid")
    assert EXPECTED_READS == reads
    writes = report["writes"]
    assert isinstance(writes, dict)
    for name, (kind, message) in writes.items():
        assert "StorageError" == kind, f"{name}: {kind} {message}"
        assert "read-only" in message, f"{name}: {message}"


def test_read_only_file_reads_work_and_writes_fail_clearly(shared_dir: Path) -> None:
    """A closed database the reader may not write (its directory is writable): every read
    works, every write path raises StorageError saying read-only, and the file is unchanged."""
    db_path = shared_dir / "memory.db"
    _seed(db_path).close()
    db_path.chmod(0o444)
    shared_dir.chmod(0o1777)
    before = digest(db_path)
    report = as_reader(lambda: _read_and_try_every_write(db_path))
    _assert_reads_work_and_writes_fail_clearly(report)
    assert before == digest(db_path)
    with SQLiteMemoryStore(db_path) as store:
        assert 4 == store.event_log.head().position


def test_read_only_file_with_a_live_writer_reads_the_latest_commits(shared_dir: Path) -> None:
    """While its owner still has the database open (WAL and shared-memory files present, not
    writable by the reader), the reader sees every commit, WAL included, and cannot write."""
    db_path = shared_dir / "memory.db"
    writer = _seed(db_path)
    try:
        for path in shared_dir.iterdir():
            path.chmod(0o444)
        assert ["memory.db", "memory.db-shm", "memory.db-wal"] == files_in(shared_dir)
        report = as_reader(lambda: _read_and_try_every_write(db_path))
        _assert_reads_work_and_writes_fail_clearly(report)
        assert 4 == writer.event_log.head().position
        assert_read_model_is_the_log_refolded(writer)
    finally:
        writer.close()


def test_read_only_file_in_a_read_only_directory_fails_to_open_clearly(
    shared_dir: Path,
) -> None:
    """Known limit: with neither the file nor its directory writable and no WAL files left,
    SQLite cannot read a WAL database at all (it must create the shared-memory file). Opening
    then raises StorageError saying read-only, and nothing is created or changed."""
    db_path = shared_dir / "memory.db"
    _seed(db_path).close()
    db_path.chmod(0o444)
    shared_dir.chmod(0o555)
    before = digest(db_path)
    report = as_reader(lambda: _read_and_try_every_write(db_path))
    assert "crashed" not in report, report
    refusal = report["open"]
    assert isinstance(refusal, list)
    kind, message = refusal
    assert ("StorageError", True) == (kind, "read-only" in message)
    assert before == digest(db_path)
    assert ["memory.db"] == files_in(shared_dir)


# -- a full disk --------------------------------------------------------------------------------

BIG = "x" * 200_000
"""Content that needs many new pages, so it cannot fit a database that may not grow."""


def _connection(store: SQLiteMemoryStore) -> sqlite3.Connection:
    """The store's own SQLite connection (a private member: this simulates the disk)."""
    log = store.event_log
    assert isinstance(log, SQLiteEventLog)
    return log._conn


def _fill(store: SQLiteMemoryStore) -> None:
    """Forbid the database to grow past its current size, then fill its free space."""
    conn = _connection(store)
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count = {pages}")
    with pytest.raises(StorageError, match="no space left"):
        while True:
            store.add("learning", "filler", ["filler"])
    with pytest.raises(StorageError, match="no space left"):
        while True:
            store.decay_importance(1.0)  # the smallest event: no room is left even for it


def _ungrow(store: SQLiteMemoryStore) -> None:
    _connection(store).execute("PRAGMA max_page_count = 4294967294")


WRITES: dict[str, Callable[[SQLiteMemoryStore, CrossTaskKB], object]] = {
    "add": lambda store, kb: store.add("learning", BIG, ["api"]),
    "add_many": lambda store, kb: store.add_many(
        [{"type": "learning", "content": f"{i}"} for i in range(5)]
        + [{"type": "learning", "content": BIG}]
    ),
    "publish": lambda store, kb: kb.publish("api", "users", BIG, scope="project"),
    "publish_many": lambda store, kb: kb.publish_many(
        [("api", "a", "small"), ("api", "b", BIG)], scope="run"
    ),
    "remove": lambda store, kb: store.remove(3),
    "decay": lambda store, kb: store.decay_importance(0.5),
    "prune": lambda store, kb: store.prune(max_entries=1),
    "recall": lambda store, kb: load_persistent_memory(store, ["api"]),
}
EVENTS = {"add_many": 6, "publish_many": 2}
"""Events a write appends, where it is not one."""


@pytest.mark.parametrize("write", sorted(WRITES))
def test_full_disk_is_a_clear_error_and_loses_nothing_committed(tmp_path: Path, write: str) -> None:
    """With the database unable to grow, each write path raises StorageError naming the lack
    of space; no part of it is stored; everything committed before reads back, in this handle
    and after reopening; and once there is room again the same write succeeds."""
    db_path = tmp_path / "memory.db"
    store = SQLiteMemoryStore(db_path, durability="fast")
    kb = CrossTaskKB(store, run_id="run-1", producer_task_id="task-1")
    store.add("learning", "committed before", ["api"])
    kb.publish("api", "users", "v1", scope="project")
    _fill(store)
    head = store.event_log.head()
    tables = live_tables(store)
    with pytest.raises(StorageError, match="no space left"):
        WRITES[write](store, kb)
    assert head == store.event_log.head()
    assert tables == live_tables(store)
    assert "committed before" in [e.content for e in store.list(limit=1000)]
    assert [("users", "v1")] == [
        (f.key, f.value) for f in kb.history("api", "users", scope="project")
    ]
    _ungrow(store)
    WRITES[write](store, kb)
    assert head.position + EVENTS.get(write, 1) == store.event_log.head().position
    store.close()
    with SQLiteMemoryStore(db_path, durability="fast") as again:
        assert_chain_verifies(again.event_log)
        assert_read_model_is_the_log_refolded(again)
        first, second = again.event_log.read(limit=2)
        assert ("committed before", "v1") == (written_text(first), written_text(second))
