"""`python -m tests.bench.prompt_scale --dir DIR`: the prompt path's p50 at two log sizes.

Builds (or, with `--reuse`, keeps) the scale table's logs (`tests.bench.scale_table`) of
`--events` events each, 100,000 and 500,000 by default, in `--dir`, and copies each (a
prompt build appends its receipt). Then times `load_persistent_memory` on every copy in
interleaved rounds, the sizes alternating which goes first, on the queries the table's build
makes (two of its five read tags, its three readers in turn, the store's own policy and
limit, fast durability). Prints each size's p50, by the wall clock and by the process's CPU
time, and the ratio of the largest to the smallest: 1.0 is a prompt path flat in the log's
size.

With `--zipf-tags`, each query is three tags drawn by the corpus's Zipf law over its 1,000
tags (as `python -m tests.bench` draws its reads'), a common one with rarer `module-NNN`
ones as often as not: the queries where few entries share every tag.

With `--base TREE` (another checkout: `git worktree add TREE main`), that tree times the
same queries on its own copies in the same rounds, and each size's p50 is printed for both
trees with their ratio (this tree / base), as `tests.bench.against` does on a smaller log.
Every tree runs in its own spawned process with that tree first on `sys.path`.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import multiprocessing
import random
import shutil
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from tests.bench.against import HERE, source_of
from tests.bench.results import print_figures
from tests.bench.sampling import percentile

SIZES = (100_000, 500_000)
WARM_UP = 20
Query = tuple[list[str], str]
"""Two read tags, and the adapter that reads them."""


def read_round(tree: str, db: str, queries: list[Query]) -> list[tuple[float, float]]:
    """In a worker for `tree`: (wall, CPU) milliseconds of one prompt build per query on `db`,
    after `WARM_UP` untimed builds. The store is imported here, once `tree` leads
    `sys.path`, so each worker times its own tree's code."""
    if sys.path[0] != tree:
        sys.path.insert(0, tree)
    from projections import SQLiteMemoryStore, load_persistent_memory
    from tests.bench.quiet import silence_logs

    silence_logs()
    timings = []
    with SQLiteMemoryStore(db, durability="fast") as store:
        for index, (tags, reader) in enumerate(queries[:WARM_UP]):
            load_persistent_memory(store, tags, task_id=f"warm-{index}", adapter=reader)
        gc.collect()
        for index, (tags, reader) in enumerate(queries):
            wall, cpu = time.perf_counter(), time.process_time()
            load_persistent_memory(store, tags, task_id=f"bench-{index}", adapter=reader)
            timings.append(((time.perf_counter() - wall) * 1e3, (time.process_time() - cpu) * 1e3))
    return timings


def measure(
    folder: Path,
    sizes: list[int],
    calls: int,
    rounds: int,
    reuse: bool,
    base: Path | None,
    zipf: bool = False,
) -> dict[str, Any]:
    """Each size's p50 (ms, wall and CPU) for this tree (and `base`), with the ratios."""
    # Imported here, not at the top: they import `eventlog` and `projections`, which a
    # worker for `base` must import from that tree, after it leads `sys.path`.
    from tests.bench.corpus import Corpus
    from tests.bench.scale_table import READ_TAGS, READERS, prepare

    trees = {"this": str(HERE)} | ({} if base is None else {"base": str(base.resolve())})
    built = {size: prepare(folder / f"scale-{size}.db", size, reuse) for size in sizes}
    copies = {(size, name): folder / f"prompt-{size}-{name}.db" for size in sizes for name in trees}
    for (size, _), copy in copies.items():
        _remove(copy)
        shutil.copyfile(folder / f"scale-{size}.db", copy)
    spawn = multiprocessing.get_context("spawn")
    workers = {name: ProcessPoolExecutor(1, mp_context=spawn) for name in trees}
    samples: dict[tuple[int, str], list[tuple[float, float]]] = {key: [] for key in copies}
    try:
        for name, tree in trees.items():
            imported = workers[name].submit(source_of, tree).result()
            if imported != tree:
                raise SystemExit(f"the {name} worker imports projections from {imported}")
        rng, corpus = random.Random(28), Corpus(seed=5)
        for index in range(rounds):
            queries = [
                (list(corpus.draw_tags(3)) if zipf else rng.sample(READ_TAGS, 2), reader)
                for reader in itertools.islice(itertools.cycle(READERS), calls)
            ]
            for size in sizes if index % 2 == 0 else sizes[::-1]:
                for name in trees if index % 2 == 0 else list(trees)[::-1]:
                    job = workers[name].submit(
                        read_round, trees[name], str(copies[size, name]), queries
                    )
                    samples[size, name] += job.result()
    finally:
        for worker in workers.values():
            worker.shutdown()
        for copy in copies.values():
            _remove(copy)
    figures: dict[str, Any] = {
        "events": {size: built[size]["events"] for size in sizes},
        "queries": "three tags by the corpus's Zipf law" if zipf else "two of the read tags",
        "calls_per_size": calls * rounds,
    }
    if base is not None:
        figures["base_tree"] = trees["base"]
    smallest, largest = min(sizes), max(sizes)
    for index, clock in enumerate(("wall", "cpu")):
        p50 = {key: percentile([t[index] for t in found], 50) for key, found in samples.items()}
        for name in trees:
            for size in sizes:
                figures[f"{clock}_p50_ms_{name}_{size}"] = round(p50[size, name], 4)
            ratio = p50[largest, name] / p50[smallest, name]
            figures[f"{clock}_ratio_{name}_{largest}_over_{smallest}"] = round(ratio, 4)
        if base is not None:
            for size in sizes:
                ratio = p50[size, "this"] / p50[size, "base"]
                figures[f"{clock}_ratio_this_over_base_{size}"] = round(ratio, 4)
    return figures


def _remove(path: Path) -> None:
    """Remove a database file and its WAL sidecars, if any."""
    for old in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        old.unlink(missing_ok=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.prompt_scale", description=__doc__)
    parser.add_argument("--dir", type=Path, required=True, help="where the logs are built (kept)")
    parser.add_argument("--events", type=int, nargs=2, default=list(SIZES), metavar="N")
    parser.add_argument("--reuse", action="store_true", help="keep logs built for these sizes")
    parser.add_argument("--calls", type=int, default=200, help="prompt builds per round")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--zipf-tags", action="store_true", help="three tags by Zipf's law")
    parser.add_argument("--base", type=Path, help="another checkout of factledger")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    if min(args.events) < 200 or args.events[0] == args.events[1]:
        parser.error("--events takes two different sizes of at least 200")
    if args.base is not None and not (args.base / "projections" / "__init__.py").is_file():
        parser.error(f"{args.base} is not a checkout of factledger (no projections package)")
    args.dir.mkdir(parents=True, exist_ok=True)
    sizes = sorted(args.events)
    figures = measure(
        args.dir, sizes, args.calls, args.rounds, args.reuse, args.base, args.zipf_tags
    )
    print_figures(figures, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
