"""A probe for profiling: time every statement a connection runs, and replay them elsewhere."""

from __future__ import annotations

import sqlite3
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from projections import SQLiteMemoryStore


@dataclass(frozen=True)
class Call:
    """One execute or executemany: its SQL, its parameters, and the seconds it took."""

    sql: str
    params: Any
    many: bool
    seconds: float


@dataclass
class TimedConnection:
    """Stands in for a sqlite3 connection: forwards everything, timing each statement."""

    conn: sqlite3.Connection
    calls: list[Call] = field(default_factory=list)

    def execute(self, sql: str, params: Sequence[object] = ()) -> sqlite3.Cursor:
        start = time.perf_counter()
        cursor = self.conn.execute(sql, params)
        self.calls.append(Call(sql, params, False, time.perf_counter() - start))
        return cursor

    def executemany(self, sql: str, rows: Iterable[Sequence[object]]) -> sqlite3.Cursor:
        rows = list(rows)
        start = time.perf_counter()
        cursor = self.conn.executemany(sql, rows)
        self.calls.append(Call(sql, rows, True, time.perf_counter() - start))
        return cursor

    def __getattr__(self, name: str) -> Any:
        return getattr(self.conn, name)


def attach(store: SQLiteMemoryStore) -> TimedConnection:
    """Put a timing proxy in front of the connection a one-file store's log and read model
    share, so it sees every statement of a write (a probe, not an API)."""
    timed = TimedConnection(store.event_log._conn)  # type: ignore[attr-defined]
    store.event_log._conn = timed  # type: ignore[attr-defined]
    store.read_model._conn = timed  # type: ignore[attr-defined]
    return timed


def by_statement(calls: Sequence[Call]) -> dict[str, tuple[int, float]]:
    """(count, seconds) per distinct SQL text."""
    totals: dict[str, list[float]] = defaultdict(list)
    for call in calls:
        totals[" ".join(call.sql.split())].append(call.seconds)
    return {sql: (len(times), sum(times)) for sql, times in totals.items()}


def replay(conn: sqlite3.Connection, calls: Sequence[Call]) -> list[Call]:
    """Run the same statements with the same parameters on `conn`, timing each."""
    timed = TimedConnection(conn)
    for call in calls:
        if call.many:
            timed.executemany(call.sql, call.params)
        else:
            timed.execute(call.sql, call.params).fetchall()
    return timed.calls
