"""Many hosts on one log: tail lag from commit to visible on another host, and four writers on
two hosts against one writer.

`python -m tests.bench.hosts [--dsn DSN | --sqlite] [--events N] [--adds N] [--json PATH]`

Against PostgreSQL (`--dsn`, else `$FACTLEDGER_TEST_DSN`, else postgres on 127.0.0.1:5432), each
run in a schema of its own, dropped afterwards; with `--sqlite`, against a SQLite file standing
in for the server (the figures then say so). Every host is a process with its own SQLite cache
file; CLOCK_MONOTONIC is shared by every process on this machine.

Tail lag: a writer appends one event at a time through the log's own handle, at jittered
intervals, noting when each append was acknowledged; a process on another host waits with
`sync(min_position=p)` for each next position and notes when its cache shows it.
Writers: four processes on two hosts (two sharing each cache) make durable `add` calls at once;
their total rate over the span from the first start to the last finish is set against one
process making as many alone, on a fresh log each.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import Any
from urllib.parse import quote

from eventlog import MemoryAdded, NewEvent, open_log, verify_chain
from projections import SQLiteMemoryStore
from tests.bench.quiet import silence_logs

DEFAULT_DSN = "postgresql://postgres@127.0.0.1:5432/postgres"
INTERVAL_S = (0.005, 0.015)
"""The writer waits a random time in this range between appends, so lags do not queue."""


def tailer(cache: str, log: str, events: int, ready: Any, out: Any) -> None:
    """Another host: wait for each next position and note when this host's cache shows it."""
    silence_logs()
    store = SQLiteMemoryStore(cache, log=log)
    seen: dict[int, float] = {}
    reached = store.sync()
    ready.set()
    while reached < events:
        reached = store.sync(min_position=reached + 1, timeout=30)
        now = time.monotonic()
        for position in range(len(seen) + 1, reached + 1):
            seen[position] = now
    store.close()
    out.put(seen)


def tail_lag(target: str, root: Path, events: int) -> dict[str, Any]:
    """Lags in milliseconds from an acknowledged append to its position showing on a host."""
    spawn = multiprocessing.get_context("spawn")
    ready, out = spawn.Event(), spawn.Queue()
    open_log(target).close()
    process = spawn.Process(
        target=tailer, args=(str(root / "tail-host.db"), target, events, ready, out)
    )
    process.start()
    ready.wait(60)
    writer = open_log(target)
    committed: dict[int, float] = {}
    for index in range(events):
        record = writer.append(NewEvent(payload=MemoryAdded(type="learning", content=f"e{index}")))
        committed[record.position] = time.monotonic()
        time.sleep(random.uniform(*INTERVAL_S))
    writer.close()
    seen = out.get(timeout=120)
    process.join(60)
    lags = sorted((seen[p] - committed[p]) * 1000 for p in committed)
    return {
        "events": events,
        "p50_ms": statistics.median(lags),
        "p99_ms": lags[min(len(lags) - 1, int(len(lags) * 0.99))],
        "max_ms": lags[-1],
    }


def writer(cache: str, log: str, name: str, count: int, barrier: Barrier, out: Any) -> None:
    """One writing process on a host: `count` durable adds, timed from the barrier."""
    silence_logs()
    store = SQLiteMemoryStore(cache, log=log, source_adapter="codex")
    barrier.wait()
    start = time.monotonic()
    ids = [store.add("learning", f"{name} entry {i}", [name], task_id=name) for i in range(count)]
    end = time.monotonic()
    store.close()
    out.put((ids, start, end))


def writers(target: str, root: Path, hosts: list[str], count: int) -> dict[str, Any]:
    """Processes appending at once, one per entry of `hosts` (the cache each uses)."""
    spawn = multiprocessing.get_context("spawn")
    barrier, out = spawn.Barrier(len(hosts)), spawn.Queue()
    for host in set(hosts):
        SQLiteMemoryStore(root / host, log=target).close()
    procs = [
        spawn.Process(target=writer, args=(str(root / host), target, f"w{i}", count, barrier, out))
        for i, host in enumerate(hosts)
    ]
    for proc in procs:
        proc.start()
    reports = [out.get(timeout=600) for _ in procs]
    for proc in procs:
        proc.join(60)
    span = max(r[2] for r in reports) - min(r[1] for r in reports)
    ids = sorted(i for r in reports for i in r[0])
    log = open_log(target, read_only=True)
    try:
        chain_ok = verify_chain(log).ok
    finally:
        log.close()
    return {
        "processes": len(hosts),
        "hosts": len(set(hosts)),
        "rate": len(ids) / span,
        "dense": ids == list(range(1, len(ids) + 1)),
        "chain_ok": chain_ok,
    }


@contextmanager
def fresh_log(dsn: str | None, root: Path, name: str) -> Iterator[str]:
    """A new, empty log: a schema of its own on the server, or a SQLite file."""
    if dsn is None:
        yield str(root / name / "log.db")
        return
    import psycopg

    schema = f"fl_bench_{uuid.uuid4().hex[:10]}"
    option = "options=" + quote(f"-c factledger.schema={schema}", safe="")
    yield f"{dsn}{'&' if '?' in dsn else '?'}{option}"
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.hosts", description=__doc__)
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--dsn", help="the PostgreSQL server (a superuser DSN)")
    where.add_argument("--sqlite", action="store_true", help="a SQLite file stands in for it")
    parser.add_argument("--events", type=int, default=300, help="appends the tailer follows")
    parser.add_argument("--adds", type=int, default=200, help="adds per writer process")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    dsn = None if args.sqlite else args.dsn or os.environ.get("FACTLEDGER_TEST_DSN", DEFAULT_DSN)
    silence_logs()
    with tempfile.TemporaryDirectory(prefix="factledger-hosts-") as scratch:
        root = Path(scratch)
        with fresh_log(dsn, root, "lag") as target:
            lag = tail_lag(target, root, args.events)
        with fresh_log(dsn, root, "one") as target:
            alone = writers(target, root, ["alone.db"], args.adds * 4)
        with fresh_log(dsn, root, "four") as target:
            many = writers(target, root, ["host-a.db", "host-b.db"] * 2, args.adds)
    figures = {
        "log": "postgresql" if dsn else "sqlite file standing in for the server",
        "tail_lag": lag,
        "one_writer": alone,
        "four_writers_two_hosts": many,
        "ratio": many["rate"] / alone["rate"],
    }
    print(f"log: {figures['log']}")
    print(
        f"tail lag, commit to visible on another host ({lag['events']} appends): "
        f"p50 {lag['p50_ms']:.1f} ms, p99 {lag['p99_ms']:.1f} ms, max {lag['max_ms']:.1f} ms "
        f"(target p50 < 50 ms)"
    )
    print(
        f"durable adds: one writer {alone['rate']:.0f}/s; four writers on two hosts "
        f"{many['rate']:.0f}/s ({figures['ratio']:.2f}x); positions dense "
        f"{alone['dense'] and many['dense']}, "
        f"chain verifies {alone['chain_ok'] and many['chain_ok']}"
    )
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
