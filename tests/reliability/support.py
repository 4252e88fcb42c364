"""Helpers shared by the reliability tests: child processes, read-model comparison, events."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from eventlog import EventLog, FactPublished, MemoryAdded, RecordedEvent, verify_chain
from projections import (
    SQLiteMemoryStore,
)
from projections._projector import fold
from projections._reads import Queryable
from projections.internal import (
    default_projectors,
)

ROOT = Path(__file__).resolve().parents[2]
"""The repository root, put on the children's PYTHONPATH."""

Row = tuple[Any, ...]
Tables = dict[str, list[Row]]


def spawn_worker(*args: str) -> subprocess.Popen[str]:
    """Start `python -m tests.reliability.workers ARGS` with line-based pipes to talk to it."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-m", "tests.reliability.workers", *args],
        cwd=ROOT,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def complete_lines(text: str) -> list[str]:
    """The lines of `text` that were written whole (a killed writer may leave a partial one)."""
    lines = text.split("\n")
    return [line for line in lines[:-1] if line]


class ScratchWriter:
    """A private in-memory SQLite database a read model can be folded into."""

    def __init__(self) -> None:
        self._conn = sqlite3.connect(":memory:", isolation_level=None)

    def execute(self, statement: str, params: Sequence[object] = ()) -> list[Row]:
        return self._conn.execute(statement, params).fetchall()

    def executemany(self, statement: str, rows: Iterable[Sequence[object]]) -> None:
        self._conn.executemany(statement, rows)

    def close(self) -> None:
        self._conn.close()


def table_rows(db: Queryable, table: str) -> list[Row]:
    """Every row of `table` (a projector's table: a constant name), ordered by all columns."""
    columns = [row[0] for row in db.execute("SELECT name FROM pragma_table_info(?)", (table,))]
    order = ", ".join(f'"{column}"' for column in columns)
    return db.execute(f"SELECT * FROM {table} ORDER BY {order}")


def read_model(db: Queryable) -> Tables:
    """Every table of the default projectors in `db`."""
    return {
        table: table_rows(db, table)
        for projector in default_projectors("any log: table names are fixed")
        for table in projector.tables
    }


def live_tables(store: SQLiteMemoryStore) -> Tables:
    """The live read model of `store`."""
    with store.snapshot() as snap:
        return read_model(snap)


def refolded_tables(log: EventLog) -> Tables:
    """The read model folded from scratch out of every event of `log`."""
    scratch = ScratchWriter()
    try:
        fold(scratch, default_projectors(log.log_id), log.read())
        return read_model(scratch)
    finally:
        scratch.close()


def assert_read_model_is_the_log_refolded(store: SQLiteMemoryStore, context: str = "") -> None:
    """The live read model of `store` equals a refold of its log from scratch."""
    assert refolded_tables(store.event_log) == live_tables(store), (
        f"{context}: read model != refold"
    )


def assert_chain_verifies(log: EventLog, context: str = "") -> None:
    """Every stored row of `log` re-hashes to its chain value, up to the head."""
    report = verify_chain(log)
    assert report.ok, f"{context}: chain does not verify: {report}"
    assert log.head().position == report.checked, context


def written_text(record: RecordedEvent) -> str:
    """The content or value an event wrote ('' for other kinds)."""
    payload = record.payload
    if isinstance(payload, MemoryAdded):
        return payload.content
    if isinstance(payload, FactPublished):
        return payload.value
    return ""


NOBODY = 65534
"""The unprivileged user a child drops to, so file permissions bind even when tests run as root."""
Report = dict[str, object]


def as_reader(work: Callable[[], Report]) -> Report:
    """Run `work` in a forked child that cannot write the database, and return its report."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child's coverage is not collected
        try:
            os.close(read_end)
            if os.geteuid() == 0:
                os.setgroups([])
                os.setgid(NOBODY)
                os.setuid(NOBODY)
            try:
                report = work()
            except BaseException as exc:
                report = {"crashed": f"{type(exc).__name__}: {exc}"}
            with os.fdopen(write_end, "w") as pipe:
                pipe.write(json.dumps(report))
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end) as pipe:
        text = pipe.read()
    os.waitpid(pid, 0)
    report = json.loads(text)
    assert isinstance(report, dict)
    return report
