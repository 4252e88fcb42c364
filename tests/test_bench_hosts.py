"""The many-hosts benchmark runs end to end in its smallest size (no performance is asserted)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_hosts_benchmark_runs_against_a_sqlite_stand_in(tmp_path: Path) -> None:
    """`python -m tests.bench.hosts --sqlite` exits 0 and writes every figure, dense and
    verified."""
    out = tmp_path / "hosts.json"
    command = ["-m", "tests.bench.hosts", "--sqlite", "--events", "5", "--adds", "3"]
    done = subprocess.run(
        [sys.executable, *command, "--json", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert 0 == done.returncode, done.stderr
    figures = json.loads(out.read_text(encoding="utf-8"))
    assert {"p50_ms", "p99_ms", "max_ms", "events"} <= set(figures["tail_lag"])
    for run in (figures["one_writer"], figures["four_writers_two_hosts"]):
        assert (True, True) == (run["dense"], run["chain_ok"])
    assert (4, 2) == (
        figures["four_writers_two_hosts"]["processes"],
        figures["four_writers_two_hosts"]["hosts"],
    )
