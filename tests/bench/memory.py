"""Peak memory of verify and rebuild, in a child process, at a small and a large log.

The figure judged is the peak RSS of the process doing the work: the target is that memory
does not grow with the log.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.bench.audit import optional
from tests.bench.context import Context
from tests.bench.results import Result, Target, unavailable

ROOT = Path(__file__).resolve().parents[2]
FLAT = Target("ratio<=", 1.2, "<= 1.2x (flat)")
KIB_PER_MIB = 1024


def measure(operation: str, path: Path) -> dict[str, Any]:
    """Run `operation` on `path` in a fresh interpreter and return what it reported."""
    done = subprocess.run(
        [sys.executable, "-m", "tests.bench.rss_worker", operation, str(path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


def peak_memory(ctx: Context) -> list[Result]:
    """Peak RSS during verify and rebuild at the small and the large log."""
    small, large = ctx.scale.small_log, ctx.scale.large_log
    paths = {small: ctx.log_of(small), large: ctx.log_of(large)}
    results = []
    for operation, module in (("verify", None), ("rebuild", "replay")):
        metric = f"peak_rss.{operation}"
        found = optional(module) if module else None
        if isinstance(found, str):
            results.append(unavailable(metric, "MiB", FLAT, found))
            continue
        reports = {n: measure(operation, path) for n, path in paths.items()}
        results.append(
            Result(
                metric,
                reports[large]["process_peak_kib"] / KIB_PER_MIB,
                "MiB",
                baseline=reports[small]["process_peak_kib"] / KIB_PER_MIB,
                baseline_name=f"the same at {small:,} events",
                target=FLAT,
                note=f"VmHWM of the process running {reports[large]['tool']} at "
                f"{large:,} events vs {small:,}",
                extra={f"events_{n}": r for n, r in reports.items()},
            ).judge()
        )
    return results
