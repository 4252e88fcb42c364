"""`python -m tests.bench.tables`: how long the command line takes to draw a table holding one
large value, by the value's size, with cells drawn line by line (`output.Wrapped`, ours) and
as rich `Text` cells (the baseline: how tables were drawn before, measured in the same run).

Two kinds of value: prose (`words`) and text whose every other character is a zero-width
space (`invisible`), which escaping makes 4.5 times longer. Each figure is the median of
`--rounds` draws, ours and the baseline alternating which goes first. Time linear in the
size shows as a per-MiB figure that stays flat as the size doubles.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.text import Text

from replay.cli import output
from tests.bench.results import print_figures

MIB = 1024 * 1024
KINDS: dict[str, Callable[[int], str]] = {
    "words": lambda size: "word " * (size // 5),
    "invisible": lambda size: "a\u200b" * (size // 2),
}


def draw_seconds(value: str, cell: Callable[[str], Any]) -> float:
    """Seconds to draw a one-row table (id, content, tags) holding `value`, each cell made
    by `cell`, as `factledger list` prints it."""
    original = output.Wrapped
    output.Wrapped = cell  # type: ignore[assignment,misc]
    try:
        start = time.perf_counter()
        drawn = output.to_text([{"id": 1, "content": value, "tags": "backend"}])
        elapsed = time.perf_counter() - start
    finally:
        output.Wrapped = original  # type: ignore[misc]
    assert len(drawn) >= len(value) // 2
    return elapsed


def measure(sizes: list[float], rounds: int, baseline_up_to: float) -> list[dict[str, Any]]:
    """One row per kind and size: median seconds for ours and (up to `baseline_up_to` MiB)
    the baseline, and seconds per MiB."""
    figures = []
    for kind, make in KINDS.items():
        for mib in sizes:
            value = make(int(mib * MIB))
            drawers: dict[str, Callable[[str], Any]] = {"ours": output.Wrapped}
            if mib <= baseline_up_to:
                drawers["baseline"] = Text
            samples: dict[str, list[float]] = {name: [] for name in drawers}
            for index in range(rounds):
                order = list(drawers) if index % 2 == 0 else list(reversed(drawers))
                for name in order:
                    samples[name].append(draw_seconds(value, drawers[name]))
            row: dict[str, Any] = {"kind": kind, "mib": mib}
            for name, seconds in samples.items():
                median = statistics.median(seconds)
                row[f"{name}_s"] = round(median, 6)
                row[f"{name}_s_per_mib"] = round(median / mib, 3)
            figures.append(row)
            print(_line(row), file=sys.stderr, flush=True)
    return figures


def _line(row: dict[str, Any]) -> str:
    baseline = (
        f"baseline {row['baseline_s']:7.2f} s ({row['baseline_s_per_mib']:.2f} s/MiB)"
        if "baseline_s" in row
        else "baseline not measured"
    )
    return (
        f"{row['kind']:>9} {row['mib']:>5g} MiB: ours {row['ours_s']:6.2f} s "
        f"({row['ours_s_per_mib']:.2f} s/MiB), {baseline}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.tables", description=__doc__)
    parser.add_argument("--sizes", type=float, nargs="+", default=[1, 2, 4], metavar="MIB")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--baseline-up-to",
        type=float,
        default=4,
        metavar="MIB",
        help="draw the baseline only for sizes up to this (it is quadratic)",
    )
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    figures = measure(args.sizes, args.rounds, args.baseline_up_to)
    print_figures(figures, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
