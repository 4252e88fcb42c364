"""Where write time goes: `python -m tests.bench.profiling [--n N] [--only WORKLOAD ...]`.

Not a benchmark (the figures are inflated by the profiler); the evidence behind it. For each
workload it prints

- the wall time per event without a profiler, against the same work in plain sqlite3;
- cProfile's own time per event of the top functions, and totals for our Python code,
  msgspec, BLAKE3 and SQLite (time inside sqlite3's C calls);
- for single writes, the exact statements our connection ran (captured with sqlite3's trace
  callback) replayed with plain sqlite3 on a copy of the file, timed per statement, and the
  WAL frames (pages) each commit wrote for ours and for the raw single-row insert.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import re
import shutil
import sqlite3
import statistics
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

from eventlog import open_log, verify_chain
from projections import (
    CrossTaskKB,
    SQLiteMemoryStore,
)
from projections import _sql_reads as sql_reads
from tests.bench import raw
from tests.bench.context import build_log
from tests.bench.corpus import Corpus, Memory, chunks
from tests.bench.quiet import silence_logs
from tests.bench.statements import Call, attach, by_statement, replay
from tests.bench.writes import as_fact_rows, as_facts

WAL_FRAME_HEADER = 24
TOP = 18
CATEGORIES = (
    ("sqlite (C calls)", re.compile(r"sqlite3\.(Connection|Cursor)")),
    ("msgspec", re.compile(r"msgspec")),
    ("blake3", re.compile(r"blake3")),
    ("factledger python", re.compile(r"/(eventlog|projections)/")),
)


def category(func: tuple[str, int, str]) -> str:
    """Which bucket a profiled function's own time belongs to."""
    text = f"{func[0]}:{func[2]}"
    for name, pattern in CATEGORIES:
        if pattern.search(text):
            return name
    return "other (stdlib, builtins, bench)"


def label(func: tuple[str, int, str]) -> str:
    """A short name for a profiled function."""
    path, line, name = func
    if path == "~":
        return name
    parts = Path(path).parts
    return f"{'/'.join(parts[-2:])}:{line}({name})"


def profile(work: Callable[[], object], events: int) -> None:
    """Print cProfile's own time per event: top functions and per-category totals."""
    profiler = cProfile.Profile()
    start = time.perf_counter()
    profiler.runcall(work)
    wall = time.perf_counter() - start
    stats = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    own = sorted(((entry[2], func, entry[1]) for func, entry in stats.items()), reverse=True)
    print(f"  profiled wall {wall / events * 1e6:.1f} us/event; own time per event:")
    for seconds, func, calls in own[:TOP]:
        print(f"    {seconds / events * 1e6:8.2f} us  {calls / events:6.2f} calls  {label(func)}")
    totals: dict[str, float] = defaultdict(float)
    for seconds, func, _ in own:
        totals[category(func)] += seconds
    print("  by category (own time per event):")
    for name, seconds in sorted(totals.items(), key=lambda kv: -kv[1]):
        print(f"    {seconds / events * 1e6:8.2f} us  {name}")


def wall_us(work: Callable[[], object], events: int) -> float:
    """Microseconds per event, unprofiled."""
    start = time.perf_counter()
    work()
    return (time.perf_counter() - start) / events * 1e6


def wal_frames(path: Path, work: Callable[[], object], commits: int) -> float:
    """WAL frames written per commit by `work`, from an emptied WAL (no checkpoint in between)."""
    checkpoint = sqlite3.connect(path, isolation_level=None)
    checkpoint.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    page = checkpoint.execute("PRAGMA page_size").fetchone()[0]
    checkpoint.close()
    wal = Path(f"{path}-wal")
    before = wal.stat().st_size if wal.exists() else 0
    work()
    return float((wal.stat().st_size - before) / (page + WAL_FRAME_HEADER) / commits)


def statements(title: str, calls: list[Call], events: int, wall: float | None = None) -> None:
    """Print time per event spent in each distinct statement."""
    grouped = by_statement(calls)
    inside = sum(seconds for _, seconds in grouped.values())
    extra = "" if wall is None else f" of {wall / events * 1e6:.1f} us wall"
    print(f"  {title}: {inside / events * 1e6:.1f} us/event inside SQLite{extra}:")
    for sql, (count, seconds) in sorted(grouped.items(), key=lambda kv: -kv[1][1]):
        text = sql if len(sql) <= 90 else sql[:87] + "..."
        print(f"    {seconds / events * 1e6:8.2f} us  {count / events:5.2f}x  {text}")


def single(folder: Path, verb: str, durability: str, count: int) -> None:
    """Profile one-per-transaction add or publish, and replay its statements."""
    corpus = Corpus(3)
    path = folder / f"{verb}-{durability}.db"
    store = SQLiteMemoryStore(path, durability=durability)  # type: ignore[arg-type]
    kb = CrossTaskKB(store, run_id="bench-run", producer_task_id="bench-task")
    pragmas = raw.pragmas_of(store.event_log)
    memories = corpus.memories(count)

    def ours(batch: list[Memory]) -> Callable[[], None]:
        def run() -> None:
            if verb == "add":
                for m in batch:
                    store.add(
                        m.type,
                        m.content,
                        list(m.tags),
                        m.importance,
                        m.task_id,
                        source_adapter=m.source_adapter,
                    )
            else:
                for tag, key, value in as_facts(batch):
                    kb.publish(tag, key, value, scope="project")

        return run

    legacy_rows = as_fact_rows(memories) if verb == "publish" else memories
    conn = raw.legacy_table(folder / f"raw-{verb}-{durability}.db", pragmas)
    ours(corpus.memories(20))()
    raw.insert_each(conn, legacy_rows[:20])
    print(f"\n== {verb}, one per transaction, {durability} ({count} events)")
    mine = wall_us(ours(memories), count)
    theirs = wall_us(lambda: raw.insert_each(conn, legacy_rows), count)
    print(
        f"  unprofiled: ours {mine:.1f} us/event, plain sqlite3 single-row insert {theirs:.1f} us"
    )
    profile(ours(corpus.memories(count)), count)
    frames = wal_frames(path, ours(corpus.memories(100)), 100)
    raw_frames = wal_frames(
        folder / f"raw-{verb}-{durability}.db",
        lambda: raw.insert_each(conn, legacy_rows[:100]),
        100,
    )
    print(f"  WAL frames (pages written) per commit: ours {frames:.2f}, raw {raw_frames:.2f}")
    store.close()
    conn.close()
    copy = folder / f"{verb}-{durability}-copy.db"
    store = SQLiteMemoryStore(path, durability=durability)  # type: ignore[arg-type]
    kb = CrossTaskKB(store, run_id="bench-run", producer_task_id="bench-task")
    store.read_model.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    shutil.copyfile(path, copy)
    timed = attach(store)
    start = time.perf_counter()
    ours(corpus.memories(count))()
    wall = time.perf_counter() - start
    store.close()
    statements("our statements, timed in the run", timed.calls, count, wall)
    plain = raw.connect(copy, pragmas)
    start = time.perf_counter()
    replayed = replay(plain, timed.calls)
    wall = time.perf_counter() - start
    plain.close()
    statements("the same statements replayed with plain sqlite3", replayed, count, wall)


def batched(folder: Path, verb: str, count: int) -> None:
    """Profile add_many or publish_many, 1,000 per transaction, durable."""
    corpus = Corpus(5)
    store = SQLiteMemoryStore(folder / f"{verb}.db")
    kb = CrossTaskKB(store, run_id="bench-run", producer_task_id="bench-task")
    pragmas = raw.pragmas_of(store.event_log)
    conn = raw.legacy_table(folder / f"raw-{verb}.db", pragmas)

    def ours(memories: list[Memory]) -> Callable[[], None]:
        def run() -> None:
            for batch in chunks(memories, 1000):
                if verb == "add_many":
                    store.add_many([m.row() for m in batch])
                else:
                    kb.publish_many(as_facts(batch), scope="project")

        return run

    def baseline(memories: list[Memory]) -> Callable[[], None]:
        rows = as_fact_rows(memories) if verb == "publish_many" else memories

        def run() -> None:
            for batch in chunks(rows, 1000):
                raw.insert_batch(conn, batch)

        return run

    ours(corpus.memories(1000))()
    print(f"\n== {verb}, 1,000 per transaction, durable ({count} events)")
    print(
        f"  unprofiled: ours {wall_us(ours(corpus.memories(count)), count):.2f} us/event, "
        f"plain sqlite3 executemany "
        f"{wall_us(baseline(corpus.memories(count)), count):.2f} us/row"
    )
    profile(ours(corpus.memories(count)), count)
    path = folder / f"{verb}.db"
    copy = folder / f"{verb}-copy.db"
    store.read_model.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    shutil.copyfile(path, copy)
    timed = attach(store)
    start = time.perf_counter()
    ours(corpus.memories(count))()
    wall = time.perf_counter() - start
    store.close()
    conn.close()
    statements("our statements, timed in the run", timed.calls, count, wall)
    plain = raw.connect(copy, pragmas)
    start = time.perf_counter()
    replayed = replay(plain, timed.calls)
    wall = time.perf_counter() - start
    plain.close()
    statements("the same statements replayed with plain sqlite3", replayed, count, wall)


def walk(folder: Path, count: int) -> None:
    """Profile eventlog.verify_chain over a log of `count` events."""
    path = folder / "walk.db"
    build_log(path, Corpus(9), count)
    log = open_log(path, read_only=True)
    print(f"\n== verify_chain over {count} events")
    print(f"  unprofiled: {wall_us(lambda: verify_chain(log), count):.2f} us/event")
    profile(lambda: verify_chain(log), count)
    log.close()


def audit(folder: Path, count: int) -> None:
    """Profile replay.verify and replay.rebuild."""
    path = folder / "audit.db"
    build_log(path, Corpus(9), count)
    from replay import rebuild, verify

    print(f"\n== replay verify and rebuild over {count} events")
    print(f"  unprofiled: verify {wall_us(lambda: verify(path), count):.2f} us/event")
    profile(lambda: verify(path), count)
    print(f"  unprofiled: rebuild {wall_us(lambda: rebuild(path), count):.2f} us/event")
    profile(lambda: rebuild(path), count)


def relevant(folder: Path, count: int) -> None:
    """Profile get_relevant over `count` entries, and show SQLite's plan for it."""
    corpus = Corpus(13)
    path = folder / "relevant.db"
    store = SQLiteMemoryStore(path, durability="fast")
    for batch in chunks([m.row() for m in corpus.memories(count)], 1000):
        store.add_many(batch)
    queries = corpus.queries(200)
    print(f"\n== get_relevant over {count} entries, 200 queries of 3 tags")

    def run() -> None:
        for tags in queries:
            store.get_relevant(list(tags), limit=10)

    print(f"  unprofiled: {wall_us(run, len(queries)) / 1000:.3f} ms/query")
    profile(run, len(queries))
    with store.snapshot() as snap:
        for tag in queries[0]:
            rows = snap.execute("SELECT count(*) FROM fl_memory_tag WHERE tag = ?", (tag,))
            print(f"  tag {tag!r} is on {rows[0][0]} entries")

        plan = snap.execute(
            "EXPLAIN QUERY PLAN "
            + sql_reads.RANKED_FIRST.format(filters=sql_reads.FILTER_VISIBLE).text,
            [queries[0][0], 10],
        )
        print("  plan: " + "; ".join(str(row[-1]) for row in plan))
    store.close()


def pages(folder: Path, count: int) -> None:
    """What a commit costs with plain sqlite3 as a function of the pages it dirties."""
    print(f"\n== plain sqlite3: one 500-byte row into k tables per transaction ({count} each)")
    for sync in ("NORMAL", "FULL"):
        path = folder / f"pages-{sync}.db"
        conn = raw.connect(path, {**PAGE_PRAGMAS, "synchronous": SYNC_LEVELS[sync]})
        for table in range(8):
            conn.execute(f"CREATE TABLE t{table} (id INTEGER PRIMARY KEY, v TEXT)")
        samples: dict[int, list[float]] = {k: [] for k in (1, 2, 4, 6, 8)}
        n = count if sync == "NORMAL" else max(count // 10, 50)
        for _ in range(5):
            for k, times in samples.items():
                start = time.perf_counter()
                for _ in range(n):
                    conn.execute("BEGIN IMMEDIATE")
                    for table in range(k):
                        conn.execute(f"INSERT INTO t{table} (v) VALUES (?)", ("x" * 500,))
                    conn.execute("COMMIT")
                times.append((time.perf_counter() - start) / n * 1e6)
        conn.close()
        print(
            f"  synchronous={sync}: "
            + ", ".join(
                f"{k} pages {statistics.median(times):.0f} us" for k, times in samples.items()
            )
        )


PAGE_PRAGMAS = {
    "journal_mode": "wal",
    "cache_size": "-32000",
    "temp_store": "2",
    "wal_autocheckpoint": "4000",
}
SYNC_LEVELS = {"NORMAL": "1", "FULL": "2"}


WORKLOADS: dict[str, Callable[[Path, int], None]] = {
    "add.durable": lambda f, n: single(f, "add", "full", max(n // 10, 50)),
    "publish.durable": lambda f, n: single(f, "publish", "full", max(n // 10, 50)),
    "add.fast": lambda f, n: single(f, "add", "fast", n),
    "publish.fast": lambda f, n: single(f, "publish", "fast", n),
    "add_many": lambda f, n: batched(f, "add_many", n * 10),
    "publish_many": lambda f, n: batched(f, "publish_many", n * 10),
    "verify_chain": lambda f, n: walk(f, n * 50),
    "get_relevant": lambda f, n: relevant(f, n * 50),
    "audit": lambda f, n: audit(f, n * 50),
    "pages": pages,
}


def main(argv: list[str] | None = None) -> int:
    """Run the chosen workloads in a scratch folder."""
    parser = argparse.ArgumentParser(
        prog="python -m tests.bench.profiling",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--n", type=int, default=2000, help="scale (single fast writes)")
    parser.add_argument("--only", nargs="+", choices=sorted(WORKLOADS), default=list(WORKLOADS))
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args(argv)
    silence_logs()
    folder = Path(tempfile.mkdtemp(prefix="factledger-profile-", dir=args.dir))
    try:
        for name in args.only:
            WORKLOADS[name](folder, args.n)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
