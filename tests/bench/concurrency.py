"""Four processes appending to one file at once, against one process alone.

Every writer opens its store, waits at a barrier, then makes single durable `add` calls; the
throughput is all appends over the span from the first start to the last finish
(CLOCK_MONOTONIC is shared by every process). Afterwards every appended entry is counted
back from the log, and the chain is verified.
"""

from __future__ import annotations

import multiprocessing
import statistics
import time
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import Any

from eventlog import MemoryAdded, open_log, verify_chain
from projections import SQLiteMemoryStore
from tests.bench.context import Context
from tests.bench.quiet import silence_logs
from tests.bench.results import Result, Target

TOTAL = Target("ratio>=", 0.8, ">= 0.8x one process")
NOTHING_LOST = Target("ours==", 0, "0 lost")
CONTENT = "concurrent writer {name} entry {index}: " + "x" * 160


def writer(path: str, name: str, count: int, barrier: Barrier, out: Any) -> None:
    """One writing process: `count` single adds, timed from the barrier."""
    silence_logs()
    store = SQLiteMemoryStore(path)
    barrier.wait()
    start = time.monotonic()
    ids = [
        store.add(
            "learning",
            CONTENT.format(name=name, index=i),
            ["concurrency", name],
            0.5,
            f"task-{name}",
            source_adapter="claude-code",
        )
        for i in range(count)
    ]
    end = time.monotonic()
    store.close()
    out.put((name, ids, start, end))


def run(path: Path, writers: int, each: int) -> dict[str, Any]:
    """Run `writers` processes of `each` appends on a fresh store; rate and the count check."""
    SQLiteMemoryStore(path).close()
    spawn = multiprocessing.get_context("spawn")
    barrier = spawn.Barrier(writers)
    out = spawn.Queue()
    names = [f"w{n}" for n in range(writers)]
    procs = [
        spawn.Process(target=writer, args=(str(path), name, each, barrier, out)) for name in names
    ]
    for proc in procs:
        proc.start()
    reports = [out.get(timeout=600) for _ in procs]
    for proc in procs:
        proc.join(timeout=60)
    if any(proc.exitcode != 0 for proc in procs):
        raise RuntimeError(f"a writer failed: exit codes {[p.exitcode for p in procs]}")
    span = max(r[3] for r in reports) - min(r[2] for r in reports)
    return {"rate": writers * each / span, "seconds": span, **_count(path, names, each, reports)}


def _count(path: Path, names: list[str], each: int, reports: list[Any]) -> dict[str, Any]:
    expected = {CONTENT.format(name=name, index=i) for name in names for i in range(each)}
    ids = [entry_id for report in reports for entry_id in report[1]]
    log = open_log(path, read_only=True)
    try:
        found = [r.payload.content for r in log.read() if isinstance(r.payload, MemoryAdded)]
        chain_ok = verify_chain(log).ok
        head = log.head().position
    finally:
        log.close()
    return {
        "expected": len(expected),
        "found": len(set(found) & expected),
        "duplicates": len(found) - len(set(found)),
        "ids_unique": len(ids) == len(set(ids)),
        "head": head,
        "chain_ok": chain_ok,
    }


def concurrent(ctx: Context) -> list[Result]:
    """Total throughput of N writers against one, and an exact count of what landed."""
    writers, each = ctx.scale.writers, ctx.scale.appends_per_writer
    alone: list[dict[str, Any]] = []
    many: list[dict[str, Any]] = []
    for index in range(ctx.scale.concurrency_rounds):
        order = [(1, writers * each, alone), (writers, each, many)]
        for count, per, into in order if index % 2 == 0 else reversed(order):
            into.append(run(ctx.path(f"concurrent-{count}-{index}"), count, per))
    ratios = [m["rate"] / a["rate"] for m, a in zip(many, alone, strict=True)]
    lost = sum(r["expected"] - r["found"] for r in many + alone)
    broken = [
        r
        for r in many + alone
        if not (
            r["chain_ok"]
            and r["ids_unique"]
            and r["duplicates"] == 0
            and r["head"] == r["expected"]
        )
    ]
    return [
        Result(
            "concurrent.throughput",
            statistics.median(m["rate"] for m in many),
            "ev/s",
            baseline=statistics.median(a["rate"] for a in alone),
            baseline_name=f"one process making all {writers * each} durable adds alone",
            target=TOTAL,
            ratio=statistics.median(ratios),
            note=f"{writers} processes x {each} durable single adds, "
            f"{ctx.scale.concurrency_rounds} rounds",
            extra={"alone": alone, "concurrent": many, "round_ratios": ratios},
        ).judge(),
        Result(
            "concurrent.lost",
            float(lost + len(broken)),
            "events",
            target=NOTHING_LOST,
            note="entries missing from the log, plus runs with duplicates, non-dense "
            "positions or a broken chain",
        ).judge(),
    ]
