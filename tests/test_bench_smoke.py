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


def test_peer_group_without_eventsourcing_skips_only_the_recorder_with_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the benchmark-only dependency, the recorder's rows are reported as skipped,
    with the command that installs it; ours and the floor are still measured, against the
    floor's targets, with the detector as chosen and without it."""
    monkeypatch.setattr(peer, "available", lambda: False)
    monkeypatch.delenv("FACTLEDGER_SECRETS", raising=False)
    results = peer.peer(Context(scale=SMOKE, folder=tmp_path))
    assert list(peer.METRICS) == [result.metric for result in results]
    recorder = [r for r in results if r.metric.startswith("peer.recorder.")]
    measured = [r for r in results if not r.metric.startswith("peer.recorder.")]
    assert 3 == len(recorder)
    assert {"skipped"} == {result.status for result in recorder}
    assert all(peer.INSTALL in result.note for result in recorder)
    assert all(r.ours and r.baseline and r.baseline_name == peer.FLOOR for r in measured)
    assert [0.9, 0.8, 0.7] == [r.target.value for r in measured if r.target is not None]
    assert all("secrets detector on (FACTLEDGER_SECRETS=refuse)" in r.note for r in measured[:3])
    assert not any(path.name.startswith("peer-theirs") for path in tmp_path.iterdir())
