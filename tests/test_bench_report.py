"""The report benchmark runs end to end at small sizes (no performance is asserted)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.bench import report


def test_report_benchmark_prints_time_and_size_per_size(tmp_path: Path) -> None:
    """`python -m tests.bench.report` writes, per size, both timings, their ratio and the
    report's bytes."""
    out = tmp_path / "report.json"
    assert 0 == report.main(["--sizes", "20", "40", "--top", "5", "--json", str(out)])
    rows = json.loads(out.read_text(encoding="utf-8"))
    assert [20, 40] == [row["events"] for row in rows]
    assert all(row["bytes"] > 0 and row["report_s"] > 0 for row in rows)
