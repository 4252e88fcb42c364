"""The lineage benchmark runs end to end at a small size (no performance is asserted)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.bench import lineage


def test_lineage_benchmark_prints_both_paths(tmp_path: Path) -> None:
    """`python -m tests.bench.lineage` writes both p50s, the ratio and the edge count of the
    prompt path, and of the write path both p50s, the ratio, each write's sources (every
    distinct position its reader recalled) and the one lineage row a write stores."""
    out = tmp_path / "lineage.json"
    code = lineage.main(
        [
            *("--entries", "300", "--edges", "30", "--calls", "3", "--rounds", "2"),
            *("--recalls", "4", "--recall-limit", "5", "--adds", "3"),
            *("--json", str(out)),
        ]
    )
    figures = json.loads(out.read_text(encoding="utf-8"))
    prompt, writes = figures["prompt"], figures["writes"]
    assert (0, 300, 30, 12) == (
        code,
        prompt["entries"],
        prompt["lineage_edges"],
        prompt["calls"] * 2,
    )
    assert prompt["p50_ms_with_lineage"] > 0 < prompt["p50_ms_without_lineage"]
    assert (6, 20, 1) == (
        writes["adds"],
        writes["sources_per_write"],
        writes["lineage_rows_per_write"],
    )
    assert writes["p50_ms_add_after_recalls"] > 0 < writes["p50_ms_add_without_recalls"]
