"""`python -m tests.bench.secrets`: what screening for secrets costs a write.

Opens two stores of the same durability, one with the detector on (`secrets="refuse"`, the
default: every text is scanned) and one with it off (`secrets="allow"`: no scan), and times
`add` of the same 135-byte memory texts (drawn from the bench corpus, two tags each, none
holding a secret) in interleaved rounds, the order alternating. Prints both p50s and their
ratio (the bar: within 1.3x), and the p50 of the scan alone on those texts.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any

from projections import SQLiteMemoryStore
from projections._secrets import SecretsMode, find_secrets
from tests.bench.corpus import Corpus
from tests.bench.results import print_figures
from tests.bench.sampling import latencies_ms, percentile

CONTENT_BYTES = 135


def texts(count: int) -> list[str]:
    """`count` ordinary memory texts of exactly `CONTENT_BYTES` ASCII characters."""
    found = []
    for memory in Corpus(seed=11).memories(count * 2):
        text = memory.content
        if len(text) >= CONTENT_BYTES:
            found.append(text[:CONTENT_BYTES])
    if len(found) < count:
        raise SystemExit("the corpus has too few long texts")
    return found[:count]


def measure(adds: int, rounds: int, durability: str, folder: Path) -> dict[str, Any]:
    """p50 (ms) of `add` with the detector on and off, and of the scan alone."""
    pool = texts(adds)
    assert not any(find_secrets(text) for text in pool), "a corpus text reads as a secret"
    samples: dict[str, list[float]] = {"off": [], "on": []}
    mode: dict[str, SecretsMode] = {"off": "allow", "on": "refuse"}
    stores = {
        name: SQLiteMemoryStore(
            folder / f"{name}-{durability}.db",
            secrets=mode[name],
            durability=durability,  # type: ignore[arg-type]
        )
        for name in samples
    }
    try:
        for name, store in stores.items():
            store.add("learning", f"warm-up of {name}", ["bench"])
        for index in range(rounds):
            for name in ["off", "on"] if index % 2 == 0 else ["on", "off"]:
                store = stores[name]
                pending = iter(pool)
                samples[name] += latencies_ms(
                    adds,
                    lambda store=store, pending=pending: store.add(
                        "learning", next(pending), ["bench", "secrets"]
                    ),
                )
    finally:
        for store in stores.values():
            store.close()
    scans = []
    for _ in range(rounds):
        pending = iter(pool)
        scans += latencies_ms(adds, lambda pending=pending: find_secrets(next(pending)))
    off, on = percentile(samples["off"], 50), percentile(samples["on"], 50)
    return {
        "durability": durability,
        "content_bytes": CONTENT_BYTES,
        "adds": len(samples["on"]),
        "p50_ms_detector_off": round(off, 4),
        "p50_ms_detector_on": round(on, 4),
        "ratio": round(on / off, 4),
        "p50_ms_scan_alone": round(percentile(scans, 50), 4),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.secrets", description=__doc__)
    parser.add_argument("--adds", type=int, default=200, help="adds per round and store")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        figures = {
            durability: measure(args.adds, args.rounds, durability, Path(folder))
            for durability in ("full", "fast")
        }
    print_figures(figures, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
