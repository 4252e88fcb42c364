"""factledger against the eventsourcing library's SQLite recorder, in the same run and folder.

- **Ours**: `SQLiteMemoryStore.add`, one memory per transaction, in the durable and the fast
  mode; `add_many`, 1,000 per transaction, durable. Each transaction commits the event, its
  chain link, the read model's rows (the entry, its tag postings, what the other projectors
  keep) and every projector's checkpoint.
- **Our log alone**: `SQLiteEventLog.append` / `append_many` of drafts built beforehand, the
  layer the recorder is: checked, encoded, hashed and chained, one row per event.
- **Theirs**: `SQLiteApplicationRecorder.insert_events` (eventsourcing's SQLite recorder,
  whose notification ids follow commit order as our positions do), one `StoredEvent` per
  memory whose `state` is the body our log stores for it, built beforehand: one row in a
  rowid table with a primary-key index, between `BEGIN` and `COMMIT`. It stores the bytes
  and their order; no chain, no checks, no read model.
- **Floor**: the writes ours makes (its `BEGIN IMMEDIATE`, INSERTs, UPDATEs and `COMMIT`,
  traced in a separate run of the same work), replayed by plain sqlite3 into a file in the
  same state: what our rows cost with no Python around them.

Every connection runs the same pragmas, read back and compared: WAL; `synchronous=FULL` in
the durable mode (the recorder's own default) and `NORMAL` in the fast mode (set on the
recorder's connection: the library has no setting for it); our cache size, temp store and
autocheckpoint. Each round runs the four in rotating order. eventsourcing is a
benchmark-only dependency: without it this group says so and how to install it.
"""

from __future__ import annotations

import importlib.util
import shutil
import sqlite3
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from eventlog import MAX_CONTENT_BYTES, MemoryAdded, NewEvent, open_log
from eventlog.drafts import prepare, seal
from projections import SQLiteMemoryStore
from tests.bench import raw
from tests.bench.context import Context
from tests.bench.corpus import Memory, chunks
from tests.bench.results import Result, Target, skipped
from tests.bench.sampling import Paired, rate, rotated
from tests.bench.statements import Call, attach

WARMUP = 20
SINGLE = Target("ratio>=", 1.0, ">= 1.0x eventsourcing")
BATCH = Target("ratio>=", 0.5, ">= 0.5x eventsourcing")
INSTALL = "pip install eventsourcing"
THEIRS = "eventsourcing SQLiteApplicationRecorder.insert_events"
TARGETS = {"add.durable": SINGLE, "add.fast": SINGLE, "add_many": BATCH}
METRICS = tuple(f"peer.{side}{name}" for side in ("", "log.", "floor.") for name in TARGETS)
WRITES = ("BEGIN", "COMMIT", "INSERT", "UPDATE", "DELETE")
"""The statements the floor replays: the writes, and the transaction around them."""


def available() -> bool:
    """Whether the benchmark-only dependency is installed."""
    return importlib.util.find_spec("eventsourcing") is not None


def peer(ctx: Context) -> list[Result]:
    """add (durable, fast) and add_many against eventsourcing's recorder; beside them our log
    alone and the floor."""
    if not available():
        why = f"eventsourcing is not installed (a benchmark-only dependency): {INSTALL}"
        print(f"  peer: skipped, {why}", file=sys.stderr)
        return [
            skipped(metric, "ev/s", TARGETS.get(metric.removeprefix("peer.")), why)
            for metric in METRICS
        ]
    scale = ctx.scale
    runs = {
        "add.durable": _measure(ctx, "full", scale.single_durable, 1),
        "add.fast": _measure(ctx, "fast", scale.single_fast, 1),
        "add_many": _measure(ctx, "full", scale.batches, scale.batch_size),
    }
    return [
        *(runs[name].ours(f"peer.{name}", target) for name, target in TARGETS.items()),
        *(runs[name].log(f"peer.log.{name}") for name in TARGETS),
        *(runs[name].floor(f"peer.floor.{name}") for name in TARGETS),
    ]


class Runs:
    """The rates of one workload's rounds: theirs, ours, our log alone and the floor."""

    def __init__(self, rates: list[list[float]], note: str, extra: dict[str, Any]) -> None:
        theirs, ours, log, floor = rates
        self.ours_paired = Paired(theirs, ours)
        self.log_paired = Paired(theirs, log)
        self.floor_paired = Paired(theirs, floor)
        self.ours_against_floor = Paired(floor, ours)
        self.note = note
        self.extra = extra

    def ours(self, metric: str, target: Target) -> Result:
        """Our store against the recorder, with the floor's ratio in the note."""
        base, mine, ratio = self.ours_paired.summary()
        return Result(
            metric,
            mine,
            "ev/s",
            baseline=base,
            baseline_name=THEIRS,
            target=target,
            ratio=ratio,
            note=f"{self.note}; the floor (our rows written by plain sqlite3) is "
            f"{statistics.median(self.floor_paired.ratios):.2f}x eventsourcing and ours "
            f"{statistics.median(self.ours_against_floor.ratios):.2f}x the floor",
            extra={**self.ours_paired.samples(), **self.extra},
        ).judge()

    def log(self, metric: str) -> Result:
        """Our log alone against the recorder."""
        return self._beside(metric, self.log_paired, "SQLiteEventLog.append_many alone")

    def floor(self, metric: str) -> Result:
        """The floor against the recorder."""
        return self._beside(metric, self.floor_paired, "our writes replayed by plain sqlite3")

    def _beside(self, metric: str, paired: Paired, what: str) -> Result:
        base, mine, ratio = paired.summary()
        return Result(
            metric,
            mine,
            "ev/s",
            baseline=base,
            baseline_name=THEIRS,
            ratio=ratio,
            note=f"{self.note}; {what}",
            extra=paired.samples(),
        ).judge()


def _measure(ctx: Context, durability: str, transactions: int, size: int) -> Runs:
    """`transactions` transactions of `size` memories per round, four ways."""
    from eventsourcing.persistence import StoredEvent

    label = f"{durability}-{size}"
    rounds = ctx.scale.rounds
    count = transactions * size
    work = [ctx.corpus.memories(count) for _ in range(rounds)]
    warmup = ctx.corpus.memories(WARMUP * size)
    start = ctx.path(f"peer-start-{label}")
    floor_calls = _traced(ctx.path(f"peer-trace-{label}"), start, warmup, work, size)
    store = SQLiteMemoryStore(ctx.path(f"peer-ours-{label}"), durability=durability)  # type: ignore[arg-type]
    log = open_log(ctx.path(f"peer-log-{label}"), durability=durability)  # type: ignore[arg-type]
    pragmas = raw.pragmas_of(store.event_log)
    theirs = Theirs(ctx.path(f"peer-theirs-{label}"), pragmas)
    shutil.copyfile(start, ctx.path(f"peer-floor-{label}"))
    floor = raw.connect(ctx.path(f"peer-floor-{label}"), pragmas)
    stored = [[_stored(StoredEvent, c) for c in chunks(_bodies(m), size)] for m in work]
    drafts = [[_drafts(c) for c in chunks(m, size)] for m in work]
    try:
        if raw.pragmas_of(log) != pragmas:
            raise RuntimeError("the log alone runs with other pragmas than the store")
        _write(store, warmup, size)
        for chunk in chunks(warmup, size):
            log.append_many(_drafts(chunk))
        theirs.insert_all([_stored(StoredEvent, c) for c in chunks(_bodies(warmup), size)])
        done = [0, 0, 0, 0]

        def next_of(side: int) -> int:
            done[side] += 1
            return done[side] - 1

        def log_round(transactions: list[list[NewEvent]]) -> None:
            for events in transactions:
                log.append_many(events)

        rates = rotated(
            rounds,
            [
                lambda: rate(count, lambda: theirs.insert_all(stored[next_of(0)])),
                lambda: rate(count, lambda: _write(store, work[next_of(1)], size)),
                lambda: rate(count, lambda: log_round(drafts[next_of(2)])),
                lambda: rate(count, lambda: _replay(floor, floor_calls[next_of(3)])),
            ],
        )
        theirs.check_pragmas()
    finally:
        store.close()
        log.close()
        theirs.close()
        floor.close()
    mode = "durable" if durability == "full" else "fast"
    what = "one memory" if size == 1 else f"{size:,} memories"
    note = f"{transactions} transactions of {what} x {rounds} rounds, {mode} mode"
    return Runs(rates, note, {"pragmas": pragmas})


def _write(store: SQLiteMemoryStore, memories: Sequence[Memory], size: int) -> None:
    """Our public write: `add` one by one, or `add_many` in transactions of `size`."""
    if size == 1:
        for m in memories:
            store.add(
                m.type,
                m.content,
                list(m.tags),
                m.importance,
                m.task_id,
                source_adapter=m.source_adapter,
            )
        return
    for chunk in chunks(memories, size):
        store.add_many([m.row() for m in chunk])


def _traced(
    path: Path, start: Path, warmup: list[Memory], work: list[list[Memory]], size: int
) -> list[list[Call]]:
    """The writes ours makes for each round of `work`, traced in a store of its own (fast
    mode: the statements are the same in both), and at `start` a copy of that store's file
    as it was after the warmup, for the floor to replay them into."""
    store = SQLiteMemoryStore(path, durability="fast")
    try:
        _write(store, warmup, size)
        store.read_model.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        shutil.copyfile(path, start)
        timed = attach(store)
        rounds = []
        for memories in work:
            timed.calls.clear()
            _write(store, memories, size)
            rounds.append([c for c in timed.calls if c.sql.lstrip().upper().startswith(WRITES)])
    finally:
        store.close()
    return rounds


def _replay(conn: sqlite3.Connection, calls: Sequence[Call]) -> None:
    """Run the traced writes with plain sqlite3, nothing else."""
    for call in calls:
        if call.many:
            conn.executemany(call.sql, call.params)
        else:
            conn.execute(call.sql, call.params)


def _drafts(memories: Sequence[Memory]) -> list[NewEvent]:
    """The events `SQLiteMemoryStore.add` appends for these memories."""
    return [
        NewEvent(
            payload=MemoryAdded(
                type=m.type,
                content=m.content,
                tags=m.tags,
                importance=m.importance,
                task_id=m.task_id,
            ),
            producer_task_id=m.task_id or "",
            source_adapter=m.source_adapter,
        )
        for m in memories
    ]


def _bodies(memories: Sequence[Memory]) -> list[bytes]:
    """The bytes our log stores for these memories (at positions 1, 2, ...)."""
    bodies, previous = [], bytes(32)
    for position, event in enumerate(_drafts(memories), 1):
        item = prepare(event, clock_ns=time.time_ns, max_content_bytes=MAX_CONTENT_BYTES)
        body, previous, _ = seal(item, position, previous)
        bodies.append(body)
    return bodies


def _stored(stored_event: Callable[..., Any], states: Sequence[bytes]) -> list[Any]:
    """One transaction's StoredEvents: a new aggregate, consecutive versions."""
    originator = uuid.uuid4()
    return [
        stored_event(originator_id=originator, originator_version=v, topic="memory", state=s)
        for v, s in enumerate(states)
    ]


class Theirs:
    """eventsourcing's SQLite application recorder in a file of its own, with our pragmas."""

    def __init__(self, path: Path, pragmas: dict[str, str]) -> None:
        from eventsourcing.sqlite import SQLiteApplicationRecorder, SQLiteDatastore

        self._pragmas = pragmas
        self._datastore = SQLiteDatastore(str(path))
        self._recorder = SQLiteApplicationRecorder(self._datastore)
        self._recorder.create_table()
        with self._datastore.get_connection(commit=False) as connection:
            conn = connection._sqlite_conn
            for name in raw.PRAGMAS:
                if name != "journal_mode":
                    conn.execute(f"PRAGMA {name}={pragmas[name]}")
        self.check_pragmas()

    def check_pragmas(self) -> None:
        """Refuse to report figures unless the recorder ran on one connection with our pragmas."""
        pool = self._datastore.pool
        if pool.num_in_pool != 1 or pool.num_in_use:
            raise RuntimeError("the recorder opened more than one connection")
        with self._datastore.get_connection(commit=False) as connection:
            conn = connection._sqlite_conn
            actual = {
                name: str(conn.execute(f"PRAGMA {name}").fetchone()[0]) for name in raw.PRAGMAS
            }
        if actual != self._pragmas:
            raise RuntimeError(f"the recorder's pragmas differ from ours: {actual}")

    def insert_all(self, transactions: Sequence[Sequence[Any]]) -> None:
        """One `insert_events` call (one transaction) per item."""
        insert = self._recorder.insert_events
        for events in transactions:
            insert(events)

    def close(self) -> None:
        self._datastore.close()
