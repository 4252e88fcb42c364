"""The secrets benchmark runs end to end at a small size (no performance is asserted)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.bench import secrets


def test_secrets_benchmark_prints_both_p50s_and_the_ratio(tmp_path: Path) -> None:
    """`python -m tests.bench.secrets` writes, for each durability, the add p50 with the
    detector on and off over 135-byte texts, their ratio and the scan's own p50."""
    out = tmp_path / "secrets.json"
    assert 0 == secrets.main(["--adds", "3", "--rounds", "2", "--json", str(out)])
    figures = json.loads(out.read_text(encoding="utf-8"))
    assert {"full", "fast"} == set(figures)
    for durability, measured in figures.items():
        assert (durability, 135, 6) == (
            measured["durability"],
            measured["content_bytes"],
            measured["adds"],
        )
        assert measured["p50_ms_detector_on"] > 0 < measured["p50_ms_detector_off"]
        assert measured["ratio"] > 0 < measured["p50_ms_scan_alone"]
