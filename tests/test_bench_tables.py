"""The table-drawing benchmark runs end to end at a small size (no performance is asserted)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.bench import tables


def test_tables_benchmark_reports_ours_and_the_baseline_per_size(tmp_path: Path) -> None:
    """`python -m tests.bench.tables` writes, per kind and size, our median and the
    baseline's up to the size it is asked for."""
    out = tmp_path / "tables.json"
    code = tables.main(
        ["--sizes", "0.01", "0.02", "--rounds", "1", "--baseline-up-to", "0.01", "--json", str(out)]
    )
    figures = json.loads(out.read_text(encoding="utf-8"))
    assert 0 == code
    assert [(kind, mib) for kind in tables.KINDS for mib in (0.01, 0.02)] == [
        (row["kind"], row["mib"]) for row in figures
    ]
    assert all(row["ours_s"] > 0 for row in figures)
    assert [True, False, True, False] == ["baseline_s" in row for row in figures]
