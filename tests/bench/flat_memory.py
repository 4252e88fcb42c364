"""Constant memory at scale: the peak RSS of verify, rebuild (kept aside and swapped in),
export to a file and a first checkpoint, at two log sizes in the same run, and the ratio:

    python -m tests.bench.flat_memory --events 100000 1000000 --dir /var/tmp/scale-table

Each log is the one `tests.bench.scale_table` builds for that many events (kept in `--dir`
and reused). Every measure runs in a new spawned process, timed from opening the log to the
answer, with a progress callback that counts its calls; its peak RSS is that process's
VmHWM, and its floor the VmHWM once the package is imported. The swap runs last, as it
replaces the read model in the file (with an equal one).
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from replay import Ledger
from tests.bench.machine import describe
from tests.bench.quiet import silence_logs
from tests.bench.rss_worker import peak_rss_kib
from tests.bench.scale_table import KIB_PER_MB, in_fresh_process, prepare

OPERATIONS = ("verify", "rebuild", "export", "checkpoint", "rebuild --swap")
FLAT_RATIO = 1.1
"""The largest peak-RSS ratio (large log over small) judged flat."""
FLAT_GROWTH_MB = 8.0
"""The largest growth in MB judged flat, whatever the ratio."""


@dataclass
class Measure:
    """One operation on one log."""

    operation: str
    events: int
    seconds: float
    floor_mb: float
    peak_mb: float
    progress_calls: int
    last_progress: tuple[int, int] | None


class Counter:
    """A progress callback that counts its calls and keeps the last."""

    def __init__(self) -> None:
        self.calls = 0
        self.last: tuple[int, int] | None = None

    def __call__(self, done: int, total: int) -> None:
        self.calls += 1
        self.last = (done, total)


def run(operation: str, path: str) -> Measure:
    """`operation` on the log at `path`, in this process (a fresh one: `in_fresh_process`)."""
    silence_logs()
    floor = peak_rss_kib()
    progress = Counter()
    start = time.perf_counter()
    events = _work(operation, path, progress)
    seconds = time.perf_counter() - start
    return Measure(
        operation,
        events,
        seconds,
        floor / KIB_PER_MB,
        peak_rss_kib() / KIB_PER_MB,
        progress.calls,
        progress.last,
    )


def _work(operation: str, path: str, progress: Counter) -> int:
    """Run `operation`; return the events it went through."""
    with Ledger.open(path, read_only=operation != "rebuild --swap") as ledger:
        if operation == "verify":
            report = ledger.verify(progress=progress)
            if not report.ok:
                raise RuntimeError(f"verify failed on an untouched log: {report.reason}")
            return report.checked
        if operation in ("rebuild", "rebuild --swap"):
            rebuilt = ledger.rebuild(swap=operation == "rebuild --swap", progress=progress)
            if not rebuilt.matches:
                raise RuntimeError("rebuild does not match the live read model")
            return rebuilt.events
        if operation == "export":
            out = Path(path).with_suffix(".export.jsonl")
            try:
                with out.open("w", encoding="utf-8") as stream:
                    return ledger.export(stream, progress=progress).events
            finally:
                out.unlink(missing_ok=True)
        if operation == "checkpoint":
            return ledger.checkpoint(progress=progress).size
    raise ValueError(f"unknown operation {operation!r}")


def judged(small: Measure, large: Measure) -> tuple[float, float, bool]:
    """(ratio, growth in MB, flat) of the peak RSS from `small` to `large`."""
    ratio = large.peak_mb / small.peak_mb
    growth = large.peak_mb - small.peak_mb
    return ratio, growth, ratio <= FLAT_RATIO or growth <= FLAT_GROWTH_MB


def markdown(pairs: list[tuple[Measure, Measure]]) -> str:
    """The table for docs/benchmarks.md."""
    small_n, large_n = pairs[0][0].events, pairs[0][1].events
    lines = [
        f"| operation | s at {small_n:,} | peak MB | s at {large_n:,} | peak MB "
        "| growth MB | ratio | flat |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for small, large in pairs:
        ratio, growth, flat = judged(small, large)
        lines.append(
            f"| {small.operation} | {small.seconds:,.2f} | {small.peak_mb:,.0f} "
            f"| {large.seconds:,.2f} | {large.peak_mb:,.0f} | {growth:+,.1f} | {ratio:.2f}x "
            f"| {'yes' if flat else 'NO'} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Build (or reuse) both logs, measure every operation on each, print the table."""
    parser = argparse.ArgumentParser(prog="python -m tests.bench.flat_memory")
    parser.add_argument("--events", type=int, nargs=2, required=True, metavar=("SMALL", "LARGE"))
    parser.add_argument("--dir", type=Path, required=True, help="where the logs are kept")
    parser.add_argument("--json", type=Path, help="also write every figure here")
    args = parser.parse_args(argv)
    small_n, large_n = args.events
    if not 200 <= small_n < large_n:
        parser.error("--events takes SMALL then LARGE, SMALL at least 200")
    silence_logs()
    args.dir.mkdir(parents=True, exist_ok=True)
    machine = describe(args.dir)
    paths = []
    for events in (small_n, large_n):
        path = args.dir / f"scale-{events}.db"
        prepare(path, events, reuse=True)
        paths.append(str(path))
    pairs = [
        (in_fresh_process(run, operation, paths[0]), in_fresh_process(run, operation, paths[1]))
        for operation in OPERATIONS
    ]
    print(markdown(pairs))
    for small, large in pairs:
        print(
            f"- {small.operation}: {large.events / large.seconds:,.0f} events/s at "
            f"{large.events:,}; progress called {large.progress_calls:,} times, "
            f"last {large.last_progress}"
        )
    print(f"\nload average at the end: {describe(args.dir)['load_average_start']}")
    if args.json:
        document = {
            "machine": machine,
            "measures": [[asdict(s), asdict(la)] for s, la in pairs],
        }
        args.json.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
