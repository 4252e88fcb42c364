"""Benchmark results: one row per metric, judged against its target, as a table and as JSON."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

Status = Literal["met", "missed", "info", "not available yet", "skipped", "error"]
Check = Literal["ratio>=", "ratio<=", "ours>=", "ours<=", "ours=="]


@dataclass(frozen=True)
class Target:
    """What a metric must reach: a bound on `ours` or on `ratio` (always ours / baseline)."""

    check: Check
    value: float
    text: str

    def met(self, ours: float | None, ratio: float | None) -> bool:
        """Whether the measured values reach this target."""
        subject = ratio if self.check.startswith("ratio") else ours
        if subject is None:
            return False
        if self.check.endswith(">="):
            return subject >= self.value
        if self.check.endswith("<="):
            return subject <= self.value
        return subject == self.value


@dataclass
class Result:
    """One row of the table. `ratio` is always ours / baseline, in the row's unit."""

    metric: str
    ours: float | None
    unit: str
    baseline: float | None = None
    baseline_name: str = ""
    target: Target | None = None
    note: str = ""
    status: Status = "info"
    ratio: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def judge(self) -> Result:
        """Fill `ratio` (unless set) and `status` from the values; return self."""
        if self.ratio is None and self.ours is not None and self.baseline:
            self.ratio = self.ours / self.baseline
        if self.status in ("not available yet", "skipped", "error"):
            return self
        if self.target is not None:
            self.status = "met" if self.target.met(self.ours, self.ratio) else "missed"
        return self


def unavailable(metric: str, unit: str, target: Target | None, why: str) -> Result:
    """A row for a metric whose code does not exist yet."""
    return Result(metric, None, unit, target=target, note=why, status="not available yet")


def skipped(metric: str, unit: str, target: Target | None, why: str) -> Result:
    """A row for a metric this run could not measure (a benchmark-only dependency is missing)."""
    return Result(metric, None, unit, target=target, note=why, status="skipped")


def failed(metric: str, error: BaseException) -> Result:
    """A row for a metric whose measurement raised."""
    return Result(metric, None, "", note=f"{type(error).__name__}: {error}", status="error")


def _number(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit in ("ev/s", "rows/s"):
        return f"{value:,.0f} {unit}"
    if unit == "ms":
        return f"{value:.3f} ms"
    if unit == "MiB":
        return f"{value:.1f} MiB"
    return f"{value:g} {unit}".strip()


def _status(result: Result) -> str:
    return {"met": "yes", "missed": "NO"}.get(result.status, result.status)


COLUMNS = ("metric", "ours", "baseline", "ratio", "target", "met?")


def rows(results: list[Result]) -> list[tuple[str, ...]]:
    """The table's cells, one tuple per result."""
    return [
        (
            r.metric,
            _number(r.ours, r.unit),
            _number(r.baseline, r.unit),
            "-" if r.ratio is None else f"{r.ratio:.2f}x",
            r.target.text if r.target else "-",
            _status(r),
        )
        for r in results
    ]


def table(results: list[Result]) -> str:
    """An aligned plain-text table of the results."""
    cells = [COLUMNS, *rows(results)]
    widths = [max(len(row[i]) for row in cells) for i in range(len(COLUMNS))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(line.rstrip() for line in lines)


def markdown(results: list[Result]) -> str:
    """The same table in Markdown, for the README."""
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(row) + " |" for row in rows(results)]
    return "\n".join(lines)


def write_json(
    path: Path, machine: dict[str, Any], settings: dict[str, Any], results: list[Result]
) -> None:
    """Write the machine, the settings and every result (with its samples) as JSON."""
    document = {
        "machine": machine,
        "settings": settings,
        "results": [asdict(result) for result in results],
    }
    path.write_text(json.dumps(document, indent=2, sort_keys=False) + "\n", encoding="utf-8")


def print_figures(figures: dict[str, Any], path: Path | None) -> None:
    """Print a standalone benchmark's figures as JSON, and write the same to `path` if given."""
    text = json.dumps(figures, indent=2) + "\n"
    sys.stdout.write(text)
    if path is not None:
        path.write_text(text, encoding="utf-8")
