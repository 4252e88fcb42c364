"""`python -m tests.bench.lineage`: the prompt path's p50 with and without lineage.

Builds two stores of the same entries (same content, tags, importance and adapters); in one,
`--edges` of them declare a source (`derived_from`) among earlier entries, a tenth of those
under a foreign adapter, so prompt candidates walk their ancestry and some are tainted.
Then times `load_persistent_memory` on both, in interleaved rounds, and prints both p50s and
their ratio (the issue's bar: lineage within 1.5x).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from pathlib import Path
from typing import Any

from projections import MemoryTrustPolicy, SQLiteMemoryStore, load_persistent_memory
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.lineage", description=__doc__)
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--edges", type=int, default=10_000)
    parser.add_argument("--calls", type=int, default=200, help="prompt builds per round")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        figures = measure(args.entries, args.edges, args.calls, args.rounds, Path(folder))
    text = json.dumps(figures, indent=2)
    sys.stdout.write(text + "\n")
    if args.json:
        args.json.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
