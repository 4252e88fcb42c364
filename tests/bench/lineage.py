"""`python -m tests.bench.lineage`: what lineage costs reads and writes.

The prompt path: builds two stores of the same entries (same content, tags, importance and
adapters); in one, `--edges` of them declare a source (`derived_from`) among earlier entries,
a tenth of those under a foreign adapter, so prompt candidates walk their ancestry and some
are tainted. Then times `load_persistent_memory` on both, in interleaved rounds, and prints
both p50s and their ratio (the bar: lineage within 1.5x).

The write path: in one store, a reader (adapter, task, run) makes `--recalls` recalls of
`--recall-limit` entries each, every one of a different tag, so `recalls x limit` distinct
positions reach it (the issue's case: 200 recalls of 100). Then times `add` by that reader
and by a task that recalled nothing, in interleaved rounds, and prints both p50s, their
ratio (the bar: within 1.5x), how many sources each of the reader's writes has, and how many
lineage rows a write stores.
"""

from __future__ import annotations

import argparse
import random
import tempfile
from pathlib import Path
from typing import Any

from projections import MemoryTrustPolicy, SQLiteMemoryStore, load_persistent_memory, recall_memory
from projections._lineage import parents
from tests.bench.results import print_figures
from tests.bench.sampling import latencies_ms, percentile

TAGS = [f"tag{i}" for i in range(40)]
POLICY = MemoryTrustPolicy(trusted_adapters=frozenset({"claude-code"}))
BATCH = 5000


def batch_size(entries: int) -> int:
    """Entries added per transaction: a source must be written before the batch naming it."""
    return max(1, min(BATCH, entries // 10))


def rows(entries: int, edges: int, *, seed: int) -> list[dict[str, Any]]:
    """The entries to add, in order; `edges` of them (after the first batch) declare one
    entry of an earlier batch as a source."""
    rng = random.Random(seed)
    size = batch_size(entries)
    derived = set(rng.sample(range(size, entries), min(edges, entries - size)))
    made = []
    for index in range(entries):
        row: dict[str, Any] = {
            "type": "learning",
            "content": f"entry {index}: " + "x" * rng.randint(20, 200),
            "tags": rng.sample(TAGS, 2),
            "importance": round(rng.random(), 3),
            "source_adapter": "codex" if rng.random() < 0.1 else "claude-code",
        }
        if index in derived:
            row["derived_from"] = [rng.randint(1, index // size * size)]
        made.append(row)
    return made


def build(path: Path, made: list[dict[str, Any]], *, lineage: bool) -> None:
    with SQLiteMemoryStore(path) as store:
        size = batch_size(len(made))
        for start in range(0, len(made), size):
            chunk = made[start : start + size]
            if not lineage:
                chunk = [{k: v for k, v in r.items() if k != "derived_from"} for r in chunk]
            store.add_many(chunk)


def measure(entries: int, edges: int, calls: int, rounds: int, folder: Path) -> dict[str, Any]:
    """p50 (ms) of the prompt path on a store with and without `edges` lineage edges."""
    made = rows(entries, edges, seed=17)
    plain, linked = folder / "plain.db", folder / "lineage.db"
    build(plain, made, lineage=False)
    build(linked, made, lineage=True)
    samples: dict[str, list[float]] = {"without": [], "with": []}
    rng = random.Random(5)
    with SQLiteMemoryStore(plain) as without, SQLiteMemoryStore(linked) as with_:
        stores = {"without": without, "with": with_}
        for index in range(rounds):
            order = ["without", "with"] if index % 2 == 0 else ["with", "without"]
            queries = [rng.sample(TAGS, 2) for _ in range(calls)]
            for name in order:
                store = stores[name]
                pending = iter(queries)
                samples[name] += latencies_ms(
                    calls,
                    lambda store=store, pending=pending: load_persistent_memory(
                        store, next(pending), trust_policy=POLICY, task_id="bench"
                    ),
                )
        with with_.snapshot() as snap:
            counted = snap.execute("SELECT count(*) FROM fl_lineage_source WHERE via IS NULL")[0][0]
    without_p50 = percentile(samples["without"], 50)
    with_p50 = percentile(samples["with"], 50)
    return {
        "entries": entries,
        "lineage_edges": counted,
        "calls": len(samples["with"]),
        "p50_ms_without_lineage": round(without_p50, 4),
        "p50_ms_with_lineage": round(with_p50, 4),
        "ratio": round(with_p50 / without_p50, 4),
    }


def measure_adds(
    recalls: int, recall_limit: int, adds: int, rounds: int, folder: Path
) -> dict[str, Any]:
    """p50 (ms) of `add` by a reader after `recalls` recalls of `recall_limit` distinct
    entries each, and by a task that recalled nothing, in one store, interleaved."""
    path = folder / "writes.db"
    tags = [f"recall{i}" for i in range(recalls)]
    with SQLiteMemoryStore(path) as store:
        store.add_many(
            [
                {"type": "learning", "content": f"entry {i}", "tags": [tags[i % recalls]]}
                for i in range(recalls * recall_limit)
            ]
        )
    samples: dict[str, list[float]] = {"none": [], "after": []}
    task = {"none": "fresh-task", "after": "reader-task"}
    with SQLiteMemoryStore(path, run_id="bench", source_adapter="claude-code") as store:
        for tag in tags:
            recall_memory(
                store,
                [tag],
                trust_policy=POLICY,
                limit=recall_limit,
                task_id=task["after"],
                run_id="bench",
                adapter="claude-code",
            )
        for index in range(rounds):
            for name in ["none", "after"] if index % 2 == 0 else ["after", "none"]:
                samples[name] += latencies_ms(
                    adds,
                    lambda name=name: store.add("learning", "a write", ["out"], task_id=task[name]),
                )
        last = store.add("learning", "the last write", ["out"], task_id=task["after"])
        with store.snapshot() as snap:
            sources = len(parents(snap, [last]))
            rows = snap.execute("SELECT count(*) FROM fl_lineage_write WHERE position = ?", (last,))
    none_p50 = percentile(samples["none"], 50)
    after_p50 = percentile(samples["after"], 50)
    return {
        "recalls": recalls,
        "recall_limit": recall_limit,
        "adds": len(samples["after"]),
        "sources_per_write": sources,
        "lineage_rows_per_write": rows[0][0],
        "p50_ms_add_without_recalls": round(none_p50, 4),
        "p50_ms_add_after_recalls": round(after_p50, 4),
        "ratio": round(after_p50 / none_p50, 4),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.lineage", description=__doc__)
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--edges", type=int, default=10_000)
    parser.add_argument("--calls", type=int, default=200, help="prompt builds per round")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--recalls", type=int, default=200, help="the reader's recalls")
    parser.add_argument("--recall-limit", type=int, default=100, help="entries per recall")
    parser.add_argument("--adds", type=int, default=50, help="adds per round and writer")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        figures = {
            "prompt": measure(args.entries, args.edges, args.calls, args.rounds, Path(folder)),
            "writes": measure_adds(
                args.recalls, args.recall_limit, args.adds, args.rounds, Path(folder)
            ),
        }
    print_figures(figures, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
