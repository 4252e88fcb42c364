"""The lineage benchmark runs end to end at a small size (no performance is asserted)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.bench import lineage


def test_lineage_benchmark_prints_both_p50s(tmp_path: Path) -> None:
    """`python -m tests.bench.lineage` writes both p50s, the ratio and the edge count."""
    out = tmp_path / "lineage.json"
    code = lineage.main(
        ["--entries", "300", "--edges", "30", "--calls", "3", "--rounds", "2", "--json", str(out)]
    )
    figures = json.loads(out.read_text(encoding="utf-8"))
    assert (0, 300, 30, 12) == (
        code,
        figures["entries"],
        figures["lineage_edges"],
        figures["calls"] * 2,
    )
    assert figures["p50_ms_with_lineage"] > 0 < figures["p50_ms_without_lineage"]
