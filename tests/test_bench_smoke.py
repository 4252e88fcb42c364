"""The benchmark program runs end to end in its smallest mode (no performance is asserted)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.bench import peer
from tests.bench.cli import METRICS
from tests.bench.context import Context
from tests.bench.scale import SMOKE

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
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
    assert {"met", "missed", "info", "not available yet", "skipped"} >= {
        result["status"] for result in document["results"]
    }
    assert {"uname", "cpu", "disk"} <= set(document["machine"])


def test_peer_group_without_eventsourcing_is_skipped_with_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the benchmark-only dependency, every peer metric is reported as skipped, with
    the command that installs it; nothing is measured."""
    monkeypatch.setattr(peer, "available", lambda: False)
    results = peer.peer(Context(scale=SMOKE, folder=tmp_path))
    assert list(peer.METRICS) == [result.metric for result in results]
    assert {"skipped"} == {result.status for result in results}
    assert all(peer.INSTALL in result.note for result in results)
    assert [] == list(tmp_path.iterdir())
