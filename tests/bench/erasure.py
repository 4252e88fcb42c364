"""`python -m tests.bench.erasure`: what erasing many positions costs.

Builds two identical log files of `--entries` memory entries and facts with an operator key,
then, on one, erases `--erase` positions in one `Ledger.erase` (the texts removed, their
read-model copies blanked, the file's WAL truncated) and, on the other, quarantines the same
positions in one `Ledger.quarantine` (the nearest operation: the same positions covered,
nothing removed): the baseline, measured in the same run on the same disk. Prints both
times, their ratio, and verify's time on each file afterwards (verify holds every absent
text to the erasures in force), and checks that no erased text is left in the file.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from projections import SQLiteMemoryStore
from replay import Ledger, generate_key, read_operator_key

MARK = "erasable-{index:08d}"
BATCH = 5000


def build(path: Path, entries: int, key_path: Path) -> None:
    """`entries` memory entries, each holding a unique mark, then the operator key."""
    with SQLiteMemoryStore(path) as store:
        for start in range(0, entries, BATCH):
            store.add_many(
                [
                    {
                        "type": "learning",
                        "content": MARK.format(index=i) + " " + "x" * 100,
                        "tags": [f"tag{i % 40}"],
                        "source_adapter": "codex" if i % 2 else "claude-code",
                    }
                    for i in range(start, min(entries, start + BATCH))
                ]
            )
    key = read_operator_key(key_path)
    with Ledger.open(path, read_only=False) as ledger:
        ledger.add_operator(key.public, key=key)


def measure(entries: int, erase: int, folder: Path) -> dict[str, Any]:
    key_path = folder / "ops.key"
    generate_key(key_path)
    key = read_operator_key(key_path)
    erased_db, quarantined_db = folder / "erased.db", folder / "quarantined.db"
    build(erased_db, entries, key_path)
    build(quarantined_db, entries, key_path)
    chosen = list(range(1, 2 * erase, 2))[:erase]
    with Ledger.open(quarantined_db, read_only=False) as ledger:
        started = time.perf_counter()
        ledger.quarantine(positions=chosen, reason="bench", key=key)
        quarantine_s = time.perf_counter() - started
    with Ledger.open(erased_db, read_only=False) as ledger:
        started = time.perf_counter()
        done = ledger.erase(chosen, reason="bench", key=key, descendants="none")
        erase_s = time.perf_counter() - started
    timings = {}
    for name, path in (("erased", erased_db), ("quarantined", quarantined_db)):
        with Ledger.open(path) as ledger:
            started = time.perf_counter()
            report = ledger.verify()
            timings[name] = time.perf_counter() - started
            assert report.ok, report.reason
    stored = erased_db.read_bytes()
    left = sum(1 for p in chosen if MARK.format(index=p - 1).encode() in stored)
    return {
        "entries": entries,
        "erased": len(done.erased),
        "erase_s": round(erase_s, 3),
        "quarantine_s": round(quarantine_s, 3),
        "ratio": round(erase_s / quarantine_s, 3),
        "erase_us_per_position": round(erase_s / len(chosen) * 1e6, 1),
        "verify_s_after_erasure": round(timings["erased"], 3),
        "verify_s_after_quarantine": round(timings["quarantined"], 3),
        "erased_texts_left_in_file": left,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.erasure", description=__doc__)
    parser.add_argument("--entries", type=int, default=20_000)
    parser.add_argument("--erase", type=int, default=10_000)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--dir", type=Path, help="scratch folder (default: a temporary one)")
    args = parser.parse_args(argv)
    if not 0 < args.erase <= args.entries // 2:
        parser.error("--erase must be between 1 and half of --entries")
    with tempfile.TemporaryDirectory(dir=args.dir) as scratch:
        figures = measure(args.entries, args.erase, Path(scratch))
    for name, value in figures.items():
        print(f"{name:28} {value}")
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    return 0 if figures["erased_texts_left_in_file"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
