"""`python -m tests.bench.against BASE`: a read path's p50, this tree against another.

BASE is another checkout of factledger (say `git worktree add /tmp/base main`). One file of
`--entries` entries is built (as `tests.bench.lineage` builds its plain store: 40 tags, two
per entry, a tenth under an adapter the policy does not trust) and copied once per tree.
Each tree then runs in its own process (spawned, with that tree first on `sys.path`, so it
imports its own `projections`), and the two time the read `--path` names on their copies in
interleaved rounds, alternating which goes first, on the same queries: `prompt` (the
default) is `load_persistent_memory`, receipted; `relevant` is `get_relevant`, unreceipted.
Prints both p50s and their ratio (this tree / BASE), by the wall clock and by the process's
CPU time (the code path alone, without the wait on the disk that each receipt's commit adds).
"""

from __future__ import annotations

import argparse
import gc
import multiprocessing
import random
import shutil
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from tests.bench.results import print_figures
from tests.bench.sampling import percentile

HERE = Path(__file__).resolve().parents[2]
TAGS = [f"tag{i}" for i in range(40)]
WARM_UP = 20
PATHS = ("prompt", "relevant")
RELEVANT_LIMIT = 10
"""The limit of a `relevant` read, as `tests.bench.reads` times it."""


def read_round(
    tree: str, db: str, queries: list[list[str]], durability: str, path: str = "prompt"
) -> list[tuple[float, float]]:
    """In a worker for `tree`: (wall, CPU) milliseconds of one read along `path` per query,
    on `db`. The store's packages are imported here, once `tree` leads `sys.path`, so each
    worker times its own tree's code."""
    if sys.path[0] != tree:
        sys.path.insert(0, tree)
    from projections import MemoryTrustPolicy, SQLiteMemoryStore, load_persistent_memory

    policy = MemoryTrustPolicy(trusted_adapters=frozenset({"claude-code"}))
    timings = []
    with SQLiteMemoryStore(db, durability=durability) as store:  # type: ignore[arg-type]

        def read(tags: list[str]) -> object:
            if path == "relevant":
                return store.get_relevant(tags, limit=RELEVANT_LIMIT)
            return load_persistent_memory(store, tags, trust_policy=policy, task_id="bench")

        for tags in queries[:WARM_UP]:
            read(tags)
        gc.collect()
        for tags in queries:
            wall, cpu = time.perf_counter(), time.process_time()
            read(tags)
            timings.append(((time.perf_counter() - wall) * 1e3, (time.process_time() - cpu) * 1e3))
    return timings


def source_of(tree: str) -> str:
    """Where a worker for `tree` imports `projections` from (to check it is that tree's)."""
    if sys.path[0] != tree:
        sys.path.insert(0, tree)
    import projections

    return str(Path(projections.__file__).resolve().parent.parent)


def measure(
    base: Path,
    entries: int,
    calls: int,
    rounds: int,
    durability: str,
    folder: Path,
    path: str = "prompt",
) -> dict[str, Any]:
    """p50 (ms) of the read `path` for this tree and `base`, on copies of one file: wall
    clock, and the CPU time of the process (the code path without waiting on the disk)."""
    from tests.bench.lineage import build, rows

    built = folder / "corpus.db"
    build(built, rows(entries, 0, seed=17), lineage=False)
    trees = {"base": str(base.resolve()), "this": str(HERE)}
    copies = {name: folder / f"{name}.db" for name in trees}
    for copy in copies.values():
        shutil.copyfile(built, copy)
    spawn = multiprocessing.get_context("spawn")
    workers = {name: ProcessPoolExecutor(1, mp_context=spawn) for name in trees}
    try:
        for name, tree in trees.items():
            imported = workers[name].submit(source_of, tree).result()
            if imported != tree:
                raise SystemExit(f"the {name} worker imports projections from {imported}")
        samples: dict[str, list[tuple[float, float]]] = {name: [] for name in trees}
        rng = random.Random(5)
        for index in range(rounds):
            queries = [rng.sample(TAGS, 2) for _ in range(calls)]
            order = ["base", "this"] if index % 2 == 0 else ["this", "base"]
            for name in order:
                job = workers[name].submit(
                    read_round, trees[name], str(copies[name]), queries, durability, path
                )
                samples[name] += job.result()
    finally:
        for worker in workers.values():
            worker.shutdown()
    figures: dict[str, Any] = {
        "path": path,
        "entries": entries,
        "calls": len(samples["this"]),
        "durability": durability,
        "base_tree": trees["base"],
    }
    for index, clock in enumerate(("wall", "cpu")):
        p50 = {name: percentile([t[index] for t in samples[name]], 50) for name in trees}
        figures[f"{clock}_p50_ms_base"] = round(p50["base"], 4)
        figures[f"{clock}_p50_ms_this"] = round(p50["this"], 4)
        figures[f"{clock}_ratio"] = round(p50["this"] / p50["base"], 4)
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.against", description=__doc__)
    parser.add_argument("base", type=Path, help="another checkout of factledger")
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--calls", type=int, default=200, help="prompt builds per round")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--durability", choices=("full", "fast"), default="full")
    parser.add_argument("--path", choices=PATHS, default="prompt", help="the read to time")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    if not (args.base / "projections" / "__init__.py").is_file():
        parser.error(f"{args.base} is not a checkout of factledger (no projections package)")
    with tempfile.TemporaryDirectory() as folder:
        figures = measure(
            args.base,
            args.entries,
            args.calls,
            args.rounds,
            args.durability,
            Path(folder),
            args.path,
        )
    print_figures(figures, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
