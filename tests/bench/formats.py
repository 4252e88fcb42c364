"""`python -m tests.bench.formats BASE`: this tree's log format against BASE's, in one run.

BASE is a checkout writing another format (format v1: `git archive <v1 commit> | tar -x -C
/tmp/fl-v1`). Each tree runs in its own spawned process with that tree first on `sys.path`,
so it writes and reads with its own code, in alternating rounds (which goes first
alternates). Each round, on a fresh file per tree: a durable single `add` (`--singles`
calls), `add_many` of 1,000 (`--batches` calls, fast durability), `verify` of the whole log
and `rebuild` (refold and compare), in events per second, and the file's bytes per event.
Prints the medians of each side and the ratio this tree / BASE.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import shutil
import statistics
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parents[2]
BATCH = 1000
MEASURES = ("single_add_per_s", "add_many_ev_per_s", "verify_ev_per_s", "rebuild_ev_per_s")
"""Rates (higher is better); `bytes_per_event` is reported beside them."""


def one_round(tree: str, folder: str, singles: int, batches: int) -> dict[str, float]:
    """In a worker for `tree`: one round of every measure on new files in `folder`."""
    if sys.path[0] != tree:
        sys.path.insert(0, tree)
    from projections import SQLiteMemoryStore
    from replay import Ledger

    root = Path(folder)
    durable = root / "durable.db"
    with SQLiteMemoryStore(durable, durability="full") as store:
        store.add("learning", "warm up", ["bench"])
        start = time.perf_counter()
        for i in range(singles):
            store.add("learning", f"single note {i}: run the tests first", ["bench"])
        single = singles / (time.perf_counter() - start)
    bulk = root / "bulk.db"
    rows = [
        {"type": "learning", "content": f"note {i} about the build and its tests", "tags": ["b"]}
        for i in range(BATCH)
    ]
    with SQLiteMemoryStore(bulk, durability="fast") as store:
        store.add_many(rows[:10])
        start = time.perf_counter()
        for _ in range(batches):
            store.add_many(rows)
        many = batches * BATCH / (time.perf_counter() - start)
    with Ledger.open(bulk) as ledger:
        events = ledger.event_log.head().position
        start = time.perf_counter()
        report = ledger.verify()
        verified = events / (time.perf_counter() - start)
        assert report.ok, report.reason
        start = time.perf_counter()
        ledger.rebuild()
        rebuilt = events / (time.perf_counter() - start)
    size = sum(p.stat().st_size for p in root.glob("bulk.db*"))
    return {
        "single_add_per_s": single,
        "add_many_ev_per_s": many,
        "verify_ev_per_s": verified,
        "rebuild_ev_per_s": rebuilt,
        "bytes_per_event": size / events,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.formats")
    parser.add_argument("base", help="another checkout (a tree writing format v1)")
    parser.add_argument("--singles", type=int, default=200)
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    trees = {"this": str(HERE), "base": str(Path(args.base).resolve())}
    found: dict[str, list[dict[str, float]]] = {"this": [], "base": []}
    spawn = multiprocessing.get_context("spawn")
    workers = {name: ProcessPoolExecutor(1, mp_context=spawn) for name in trees}
    work = Path(tempfile.mkdtemp(prefix="factledger-formats-"))
    try:
        for round_number in range(args.rounds):
            order = list(trees) if round_number % 2 == 0 else list(reversed(trees))
            for name in order:
                folder = work / f"{name}-{round_number}"
                folder.mkdir()
                job = workers[name].submit(
                    one_round, trees[name], str(folder), args.singles, args.batches
                )
                found[name].append(job.result())
    finally:
        for pool in workers.values():
            pool.shutdown()
        shutil.rmtree(work, ignore_errors=True)
    figures: dict[str, Any] = {"base_tree": trees["base"], "rounds": args.rounds}
    for measure in (*MEASURES, "bytes_per_event"):
        mine = statistics.median(r[measure] for r in found["this"])
        base = statistics.median(r[measure] for r in found["base"])
        figures[measure] = {"this": mine, "base": base, "ratio": mine / base}
        print(f"{measure:20} this {mine:12.1f}  base {base:12.1f}  ratio {mine / base:6.2f}")
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
