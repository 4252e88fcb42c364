"""The benchmark program runs end to end in its smallest mode (no performance is asserted)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.bench.cli import METRICS

ROOT = Path(__file__).resolve().parents[1]


def test_benchmark_smoke_run_writes_every_metric(tmp_path: Path) -> None:
    """`python -m tests.bench --smoke` exits 0 and writes valid JSON naming every metric."""
    out = tmp_path / "bench.json"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.bench",
            "--smoke",
            "--json",
            str(out),
            "--dir",
            str(tmp_path / "scratch"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert 0 == done.returncode, done.stderr
    document = json.loads(out.read_text(encoding="utf-8"))
    assert set(METRICS) == {result["metric"] for result in document["results"]}
    assert {"met", "missed", "info", "not available yet"} >= {
        result["status"] for result in document["results"]
    }
    assert {"uname", "cpu", "disk"} <= set(document["machine"])
