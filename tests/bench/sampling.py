"""Timing on a noisy machine: interleaved paired rounds, medians, percentiles."""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

Round = Callable[[], float]
"""Runs one round of work and returns its rate (operations per second)."""


@dataclass(frozen=True)
class Paired:
    """Rates from rounds where the baseline and ours ran back to back, order alternating."""

    baseline: list[float]
    ours: list[float]

    @property
    def ratios(self) -> list[float]:
        """ours / baseline, per round: each pair shared the machine's conditions."""
        return [o / b for o, b in zip(self.ours, self.baseline, strict=True)]

    def summary(self) -> tuple[float, float, float]:
        """Median baseline rate, median rate of ours, median of the per-round ratios."""
        return (
            statistics.median(self.baseline),
            statistics.median(self.ours),
            statistics.median(self.ratios),
        )

    def samples(self) -> dict[str, Any]:
        """Every round's figures, for the JSON."""
        return {
            "baseline_rates": [round(x, 1) for x in self.baseline],
            "our_rates": [round(x, 1) for x in self.ours],
            "round_ratios": [round(x, 4) for x in self.ratios],
            "ratio_of_total_times": round(
                sum(1 / x for x in self.baseline) / sum(1 / x for x in self.ours), 4
            ),
        }


def rate(count: int, work: Callable[[], object]) -> float:
    """Run `work` once (it does `count` operations) and return operations per second."""
    gc.collect()
    start = time.perf_counter()
    work()
    return count / (time.perf_counter() - start)


def paired(rounds: int, baseline: Round, ours: Round) -> Paired:
    """Run `rounds` rounds of both, alternating which goes first (ABBA), and keep the rates."""
    base: list[float] = []
    mine: list[float] = []
    for index in range(rounds):
        if index % 2 == 0:
            base.append(baseline())
            mine.append(ours())
        else:
            mine.append(ours())
            base.append(baseline())
    return Paired(base, mine)


def rotated(rounds: int, works: Sequence[Round]) -> list[list[float]]:
    """Run `rounds` rounds of every work, each round starting one further along the list, so
    each goes first, second, ... equally often; return each work's rates."""
    rates: list[list[float]] = [[] for _ in works]
    for index in range(rounds):
        for offset in range(len(works)):
            which = (index + offset) % len(works)
            rates[which].append(works[which]())
    return rates


def latencies_ms(calls: int, work: Callable[[], object]) -> list[float]:
    """Time `calls` calls of `work` one by one, in milliseconds."""
    gc.collect()
    samples = []
    for _ in range(calls):
        start = time.perf_counter()
        work()
        samples.append((time.perf_counter() - start) * 1000)
    return samples


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0..100) by nearest rank."""
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def spread(values: list[float]) -> dict[str, float]:
    """p50, p90, p99 and max of latency samples, for the JSON."""
    return {
        "p50": round(percentile(values, 50), 4),
        "p90": round(percentile(values, 90), 4),
        "p99": round(percentile(values, 99), 4),
        "max": round(max(values), 4),
        "n": len(values),
    }
