"""`python -m tests.bench.report`: what an incident report costs as its suspect grows.

For each size (`--sizes`, default 1k, 10k and 100k suspect events) writes the incident of
`tests.bench.incident` into a new log, then times, in the same run, the blast radius alone
(the baseline: what `factledger blast-radius` does) and the whole HTML report (blast radius,
checkpoint, proofs, rendering), and prints both, their ratio and the file's size. The bars
(issue 27): 100k suspect events render in under 10 s into a file under 5 MB.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from replay import Ledger
from tests.bench.incident import SUSPECT, write_incident

SIZES = (1_000, 10_000, 100_000)


def measure(folder: Path, events: int, top: int) -> dict[str, float | int]:
    """Seconds for the blast radius and for the report at one size, and the report's bytes."""
    path = folder / f"incident-{events}.db"
    write_incident(path, events)
    with Ledger.open(path) as ledger:
        started = time.perf_counter()
        ledger.blast_radius(source_adapter=SUSPECT)
        radius = time.perf_counter() - started
    with Ledger.open(path) as ledger:
        started = time.perf_counter()
        page = ledger.report(source_adapter=SUSPECT, top=top)
        report = time.perf_counter() - started
    return {
        "events": events,
        "blast_radius_s": round(radius, 3),
        "report_s": round(report, 3),
        "ratio": round(report / radius, 2) if radius else 0.0,
        "bytes": len(page.encode()),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    parser.add_argument("--top", type=int, default=50)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    options = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        rows = [measure(Path(scratch), events, options.top) for events in options.sizes]
    print(f"{'events':>8} {'blast-radius s':>15} {'report s':>9} {'ratio':>6} {'size':>10}")
    for row in rows:
        print(
            f"{row['events']:>8} {row['blast_radius_s']:>15} {row['report_s']:>9} "
            f"{row['ratio']:>6} {row['bytes'] / 1024:>8.0f}KB"
        )
    if options.json is not None:
        options.json.write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
