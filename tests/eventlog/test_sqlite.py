"""What the SQLite backend adds to the contract: triggers, pragmas, locking, file faults."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

import pytest

from eventlog import (
    EventNotFoundError,
    LogBusyError,
    LogExistsError,
    MemoryAdded,
    NewEvent,
    SQLiteEventLog,
    StorageError,
    Unreadable,
    open_log,
)
from eventlog.contract import memory
from eventlog.errors import StrayContentError


def test_log_table_refuses_update_and_delete(tmp_path: Path) -> None:
    """The database itself refuses UPDATE and DELETE on the log table."""
    path = tmp_path / "log.db"
    open_log(path).append(memory())
    raw = sqlite3.connect(path)
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        raw.execute("UPDATE fl_events SET body = x'00'")
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        raw.execute("DELETE FROM fl_events")
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        raw.execute("UPDATE fl_log_meta SET value = 'other' WHERE name = 'log_id'")


def test_wal_and_durability_pragmas(tmp_path: Path) -> None:
    """WAL always; synchronous FULL (2) by default and NORMAL (1) in the fast mode."""
    full = open_log(tmp_path / "a.db")
    fast = open_log(tmp_path / "b.db", durability="fast")
    for log, level in ((full, 2), (fast, 1)):
        with log.snapshot():
            assert ("wal",) == log.connection.execute("PRAGMA journal_mode").fetchone()
            assert (level,) == log.connection.execute("PRAGMA synchronous").fetchone()


def test_rows_written_on_the_connection_commit_with_the_append(tmp_path: Path) -> None:
    """A read model in the log's file writes on `connection` inside the log's transaction:
    its rows commit, or roll back, with the append."""
    log = open_log(tmp_path / "log.db")
    with log.transaction():
        log.connection.execute("CREATE TABLE side (position INTEGER)")
    with log.transaction() as tx:
        record = tx.append(memory())
        log.connection.execute("INSERT INTO side VALUES (?)", (record.position,))
    with pytest.raises(RuntimeError), log.transaction() as tx:
        record = tx.append(memory())
        log.connection.execute("INSERT INTO side VALUES (?)", (record.position,))
        raise RuntimeError("projector failed")
    with log.snapshot():
        assert [(1,)] == log.connection.execute("SELECT position FROM side").fetchall()
    assert 1 == log.head().position


def test_a_snapshot_reads_nothing_appended_after_it(tmp_path: Path) -> None:
    """Once a snapshot has read, another handle's appends are not in it: read and event_at
    stop where it began."""
    log, other = open_log(tmp_path / "log.db"), open_log(tmp_path / "log.db")
    log.append(memory("one"))
    with log.snapshot() as snap:
        assert 1 == snap.head().position
        other.append(memory("two"))
        assert ([1], 1) == ([r.position for r in snap.read(until=5)], snap.event_at(1).position)
        with pytest.raises(EventNotFoundError):
            snap.event_at(2)
    assert 2 == log.event_at(2).position
    log.close()
    other.close()


def test_log_id_is_stable_across_opens(tmp_path: Path) -> None:
    """Reopening a file keeps its log id, and a new file gets a new one."""
    first = open_log(tmp_path / "a.db").log_id
    assert first == open_log(tmp_path / "a.db").log_id
    assert first != open_log(tmp_path / "b.db").log_id


def test_parent_folders_are_created(tmp_path: Path) -> None:
    """Opening a path in missing folders creates them."""
    path = tmp_path / "deep" / "er" / "log.db"
    open_log(path).append(memory())
    assert path.exists()


def test_directory_path_is_a_clear_error(tmp_path: Path) -> None:
    """A directory where the database should be is refused with a clear message."""
    with pytest.raises(StorageError, match="directory"):
        open_log(tmp_path)


def test_random_bytes_file_is_a_clear_error(tmp_path: Path) -> None:
    """A file that is not a SQLite database is refused with a clear message."""
    path = tmp_path / "junk.db"
    path.write_bytes(bytes(range(256)) * 64)
    with pytest.raises(StorageError, match="not a usable SQLite database"):
        open_log(path)


def test_read_only_handle_reads_and_refuses_writes(tmp_path: Path) -> None:
    """A read-only handle reads the log and refuses to write; nothing changes."""
    path = tmp_path / "log.db"
    open_log(path).append(memory())
    reader = open_log(path, read_only=True)
    assert [1] == [r.position for r in reader.read()]
    with pytest.raises(StorageError, match="read-only"):
        reader.append(memory())
    assert 1 == open_log(path).head().position


def test_read_only_open_never_creates_a_log(tmp_path: Path) -> None:
    """Opening a missing or foreign file read-only fails without creating anything."""
    with pytest.raises(StorageError, match="no such file"):
        open_log(tmp_path / "missing.db", read_only=True)
    other = tmp_path / "other.db"
    sqlite3.connect(other).execute("CREATE TABLE memory (id INTEGER)")
    with pytest.raises(StorageError, match="no factledger log"):
        open_log(other, read_only=True)


def test_busy_budget_spent_is_a_clear_error(tmp_path: Path) -> None:
    """When another writer holds the lock past the budget, the error says so."""
    path = tmp_path / "log.db"
    log = open_log(path, busy_timeout_s=0.3)
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    started = time.monotonic()
    with pytest.raises(LogBusyError, match="other writers"):
        log.append(memory())
    assert time.monotonic() - started >= 0.3
    blocker.execute("ROLLBACK")
    assert 0 == log.head().position


def test_short_lock_is_waited_out(tmp_path: Path) -> None:
    """A writer that holds the lock briefly delays an append; it does not fail it."""
    path = tmp_path / "log.db"
    log = open_log(path)
    blocker = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    blocker.execute("BEGIN IMMEDIATE")
    release = threading.Timer(0.5, lambda: blocker.execute("ROLLBACK"))
    release.start()
    assert 1 == log.append(memory()).position
    release.join()


def test_unknown_kind_reads_as_unreadable_naming_kind_and_position(tmp_path: Path) -> None:
    """A stored row of a kind this version does not know is read as `Unreadable`, naming
    its kind, at its position; the reads go on past it."""
    path = tmp_path / "log.db"
    open_log(path).append(memory())
    body = (
        b'{"position":2,"event_id":"x","ts_ns":1,"producer_task_id":"","run_id":null,'
        b'"source_adapter":"codex","content_hash":"blake3:00","payload":{"kind":"mystery"}}'
    )
    raw = sqlite3.connect(path)
    raw.execute("INSERT INTO fl_events VALUES (2, 'x', ?, x'00')", (body,))
    raw.commit()
    log = open_log(path)
    log.append(memory("after"))
    first, second, third = log.read()
    assert isinstance(second.payload, Unreadable)
    assert ("mystery", 2, "codex") == (
        second.payload.claimed_kind,
        second.position,
        second.source_adapter,
    )
    assert "'mystery' at position 2" in second.payload.reason
    assert ("use pytest", "after") == (first.payload.written_text(), third.payload.written_text())


def test_nested_transaction_is_refused(tmp_path: Path) -> None:
    """Opening a transaction inside another on the same handle is a clear error."""
    log = open_log(tmp_path / "log.db")
    with pytest.raises(Exception, match="already open"), log.transaction(), log.transaction():
        pass


def test_threads_share_one_handle(tmp_path: Path) -> None:
    """Threads appending through one handle lose nothing and keep positions dense."""
    log = open_log(tmp_path / "log.db", durability="fast")

    def work(n: int) -> None:
        for i in range(50):
            log.append(NewEvent(payload=MemoryAdded(type="learning", content=f"{n}-{i}")))

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert list(range(1, 201)) == [r.position for r in log.read()]


def test_a_log_made_with_its_first_events_holds_them_from_the_start(tmp_path: Path) -> None:
    """`first_events` are appended, given the new log's id, in the transaction that creates
    it; a file that holds a log already is `LogExistsError`, and is left as it was."""
    path = tmp_path / "log.db"
    seen: list[str] = []

    def first(log_id: str) -> list[NewEvent]:
        seen.append(log_id)
        return [memory("the first word")]

    log = SQLiteEventLog(path, first_events=first)
    assert [log.log_id] == seen
    assert ["the first word"] == [r.payload.content for r in log.read()]  # type: ignore[union-attr]
    log.close()
    before = path.read_bytes()
    with pytest.raises(LogExistsError, match="already holds a factledger log"):
        SQLiteEventLog(path, first_events=first)
    assert (before, 1) == (path.read_bytes(), len(seen))


def test_of_writers_racing_to_make_a_log_one_makes_it_with_its_first_events(
    tmp_path: Path,
) -> None:
    """Makers with first events and plain openers race on one new file: exactly one log is
    made, and if a maker made it, its first events are at position 1; every other maker
    gets `LogExistsError` and writes nothing."""
    path = tmp_path / "log.db"
    start = threading.Barrier(8)
    outcomes: list[str] = []

    def make(n: int) -> None:
        start.wait()
        try:
            if n % 2:
                open_log(path).close()
                outcomes.append("opened")
                return
            SQLiteEventLog(path, first_events=lambda _: [memory(f"maker {n}")]).close()
            outcomes.append(f"maker {n}")
        except LogExistsError:
            outcomes.append("refused")

    threads = [threading.Thread(target=make, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    makers = [o for o in outcomes if o.startswith("maker")]
    assert 8 == len(outcomes) and len(makers) <= 1
    assert 4 == outcomes.count("opened")
    contents = [r.payload.content for r in open_log(path).read()]  # type: ignore[union-attr]
    assert makers == contents
    assert 4 - len(makers) == outcomes.count("refused")


def test_a_text_stored_past_the_head_refuses_the_next_write(tmp_path: Path) -> None:
    """A file whose last event was cut off but whose text stayed (copied, rewound or edited
    by hand) refuses an append with an error naming the position, and writes nothing: the
    stray text is neither deleted nor taken as the new event's."""
    path = tmp_path / "log.db"
    log = open_log(path)
    log.append_many([memory("first"), memory("second")])
    log.close()
    raw = sqlite3.connect(path)
    raw.execute("DROP TRIGGER fl_events_no_delete")
    raw.execute("DELETE FROM fl_events WHERE position = 2")
    raw.commit()
    raw.close()
    before = path.read_bytes()
    log = open_log(path)
    with pytest.raises(StrayContentError, match="text for position 2, past the log's head 1"):
        log.append(memory("another second"))
    assert 1 == log.head().position
    log.close()
    assert before == path.read_bytes()
