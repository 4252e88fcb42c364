"""The write path against its floor, with eventsourcing's SQLite recorder beside it, in the
same run and folder (issue 28, item 5).

- **Ours**: `SQLiteMemoryStore.add`, one memory per transaction, in the durable and the fast
  mode; `add_many`, 1,000 per transaction, durable. Each transaction commits the event, its
  text, its chain link, the read model's rows (the entry, its tag postings, what the other
  projectors keep), every projector's checkpoint, and the Merkle index's nodes every 256
  events. Measured twice: with the secrets detector as the environment chooses it
  (FACTLEDGER_SECRETS, default 'refuse': every text and tag scanned), and with
  `secrets="allow"` (no scan), so the reader sees what the detector costs.
- **Floor**: the writes ours makes (its `BEGIN IMMEDIATE`, INSERTs, UPDATEs and `COMMIT`,
  traced in a separate run of the same work), replayed by plain sqlite3 into a file in the
  same state: our rows with no Python around them. The targets are ours / floor: durable
  `add` >= 0.9x, fast `add` >= 0.8x, `add_many` >= 0.7x.
- **Recorder** (information only): `SQLiteApplicationRecorder.insert_events` (eventsourcing's
  SQLite recorder), one `StoredEvent` per memory whose `state` is the bytes our log stores
  for it (body, text and salt), built beforehand: one row in a rowid table with a
  primary-key index. It stores the bytes and their order; no chain, no checks, no read
  model. eventsourcing is a benchmark-only dependency: without it its rows say so and how
  to install it, and the rest is measured.

Every connection runs the same pragmas, read back and compared: WAL; `synchronous=FULL` in
the durable mode (the recorder's own default) and `NORMAL` in the fast mode (set on the
recorder's connection: the library has no setting for it); our cache size, temp store and
autocheckpoint. Each round runs every side in rotating order; ratios are medians of the
per-round ratios.
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

from eventlog import MAX_CONTENT_BYTES, MemoryAdded, NewEvent
from eventlog.drafts import prepare, seal
from projections import SQLiteMemoryStore
from projections._secrets import SecretsMode, chosen_mode
from tests.bench import raw
from tests.bench.context import Context
from tests.bench.corpus import Memory, chunks
from tests.bench.results import Result, Target, skipped
from tests.bench.sampling import Paired, Round, rate, rotated
from tests.bench.statements import Call, attach

WARMUP = 20
INSTALL = "pip install eventsourcing"
FLOOR = "our rows written by plain sqlite3 (the floor)"
THEIRS = "eventsourcing SQLiteApplicationRecorder.insert_events"
TARGETS = {
    "add.durable": Target("ratio>=", 0.9, ">= 0.9x the floor"),
    "add.fast": Target("ratio>=", 0.8, ">= 0.8x the floor"),
    "add_many": Target("ratio>=", 0.7, ">= 0.7x the floor"),
}
METRICS = tuple(f"peer.{side}{name}" for side in ("", "allow.", "recorder.") for name in TARGETS)
WRITES = ("BEGIN", "COMMIT", "INSERT", "UPDATE", "DELETE", "CREATE")
"""The statements the floor replays: the writes (a table the Merkle index creates on its
first step included), and the transaction around them."""


def available() -> bool:
    """Whether the benchmark-only dependency is installed."""
    return importlib.util.find_spec("eventsourcing") is not None


def peer(ctx: Context) -> list[Result]:
    """add (durable, fast) and add_many against the floor, with the detector as chosen and
    without it; the recorder beside them when eventsourcing is installed."""
    recorder = available()
    if not recorder:
        print(f"  peer: the recorder's rows are skipped, {_missing()}", file=sys.stderr)
    scale = ctx.scale
    runs = {
        "add.durable": _measure(ctx, "full", scale.single_durable, 1, recorder),
        "add.fast": _measure(ctx, "fast", scale.single_fast, 1, recorder),
        "add_many": _measure(ctx, "full", scale.batches, scale.batch_size, recorder),
    }
    return [
        *(runs[name].ours(f"peer.{name}", target) for name, target in TARGETS.items()),
        *(runs[name].allowed(f"peer.allow.{name}") for name in TARGETS),
        *(runs[name].recorder(f"peer.recorder.{name}") for name in TARGETS),
    ]


def _missing() -> str:
    return f"eventsourcing is not installed (a benchmark-only dependency): {INSTALL}"


class Runs:
    """The rates of one workload's rounds: the floor, ours (detector as chosen, and off),
    and the recorder's when it ran."""

    def __init__(
        self, rates: list[list[float]], mode: SecretsMode, note: str, extra: dict[str, Any]
    ) -> None:
        floor, ours, allowed, *theirs = rates
        self.ours_paired = Paired(floor, ours)
        self.allowed_paired = Paired(floor, allowed)
        self.allowed_against_ours = Paired(allowed, ours)
        self.theirs_paired = Paired(floor, theirs[0]) if theirs else None
        self.ours_against_theirs = Paired(theirs[0], ours) if theirs else None
        self.mode = mode
        self.note = note
        self.extra = extra

    def ours(self, metric: str, target: Target) -> Result:
        """Our store, detector as the environment chooses, against the floor."""
        base, mine, ratio = self.ours_paired.summary()
        if self.mode == "allow":
            detector = "secrets detector off (FACTLEDGER_SECRETS=allow), as in peer.allow.*"
        else:
            cost = statistics.median(self.allowed_against_ours.ratios)
            detector = (
                f"secrets detector on (FACTLEDGER_SECRETS={self.mode}), "
                f"{cost:.2f}x the rate with it off"
            )
        note = f"{self.note}; {detector}"
        if self.ours_against_theirs is not None:
            versus = statistics.median(self.ours_against_theirs.ratios)
            note += f"; {versus:.2f}x eventsourcing's recorder"
        return Result(
            metric,
            mine,
            "ev/s",
            baseline=base,
            baseline_name=FLOOR,
            target=target,
            ratio=ratio,
            note=note,
            extra={**self.ours_paired.samples(), **self.extra},
        ).judge()

    def allowed(self, metric: str) -> Result:
        """Our store with the detector off (`secrets="allow"`), against the floor."""
        return self._beside(metric, self.allowed_paired, 'ours with secrets="allow" (no scan)')

    def recorder(self, metric: str) -> Result:
        """eventsourcing's recorder against the floor (information), or skipped."""
        if self.theirs_paired is None:
            return skipped(metric, "ev/s", None, _missing())
        return self._beside(metric, self.theirs_paired, f"{THEIRS}, for information")

    def _beside(self, metric: str, paired: Paired, what: str) -> Result:
        base, mine, ratio = paired.summary()
        return Result(
            metric,
            mine,
            "ev/s",
            baseline=base,
            baseline_name=FLOOR,
            ratio=ratio,
            note=f"{self.note}; {what}",
            extra=paired.samples(),
        ).judge()


def _measure(ctx: Context, durability: str, transactions: int, size: int, recorder: bool) -> Runs:
    """`transactions` transactions of `size` memories per round, three or four ways."""
    label = f"{durability}-{size}"
    rounds = ctx.scale.rounds
    count = transactions * size
    work = [ctx.corpus.memories(count) for _ in range(rounds)]
    warmup = ctx.corpus.memories(WARMUP * size)
    start = ctx.path(f"peer-start-{label}")
    floor_calls = _traced(ctx.path(f"peer-trace-{label}"), start, warmup, work, size)
    mode = chosen_mode(None)
    store = SQLiteMemoryStore(ctx.path(f"peer-ours-{label}"), durability=durability)  # type: ignore[arg-type]
    allowed = SQLiteMemoryStore(
        ctx.path(f"peer-allow-{label}"),
        durability=durability,  # type: ignore[arg-type]
        secrets="allow",
    )
    pragmas = raw.pragmas_of(store.event_log)
    shutil.copyfile(start, ctx.path(f"peer-floor-{label}"))
    floor = raw.connect(ctx.path(f"peer-floor-{label}"), pragmas)
    theirs = Theirs(ctx.path(f"peer-theirs-{label}"), pragmas) if recorder else None
    try:
        if raw.pragmas_of(allowed.event_log) != pragmas:
            raise RuntimeError("the store without the detector runs with other pragmas")
        _write(store, warmup, size)
        _write(allowed, warmup, size)
        done = [0, 0, 0, 0]

        def next_of(side: int) -> int:
            done[side] += 1
            return done[side] - 1

        sides: list[Round] = [
            lambda: rate(count, lambda: _replay(floor, floor_calls[next_of(0)])),
            lambda: rate(count, lambda: _write(store, work[next_of(1)], size)),
            lambda: rate(count, lambda: _write(allowed, work[next_of(2)], size)),
        ]
        if theirs is not None:
            from eventsourcing.persistence import StoredEvent

            stored = [[_stored(StoredEvent, c) for c in chunks(_bodies(m), size)] for m in work]
            theirs.insert_all([_stored(StoredEvent, c) for c in chunks(_bodies(warmup), size)])
            sides.append(lambda: rate(count, lambda: theirs.insert_all(stored[next_of(3)])))
        rates = rotated(rounds, sides)
        if theirs is not None:
            theirs.check_pragmas()
    finally:
        store.close()
        allowed.close()
        floor.close()
        if theirs is not None:
            theirs.close()
    kind = "durable" if durability == "full" else "fast"
    what = "one memory" if size == 1 else f"{size:,} memories"
    note = f"{transactions} transactions of {what} x {rounds} rounds, {kind} mode"
    return Runs(rates, mode, note, {"pragmas": pragmas, "secrets": mode})


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
    """The bytes our log stores for these memories (at positions 1, 2, ...): each event's
    body, its text and its salt."""
    bodies, previous = [], bytes(32)
    for position, event in enumerate(_drafts(memories), 1):
        item = prepare(event, clock_ns=time.time_ns, max_content_bytes=MAX_CONTENT_BYTES)
        sealed = seal(item, position, previous)
        previous = sealed.chain_hash
        bodies.append(sealed.body + sealed.text + sealed.salt)
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
