"""The format benchmark runs end to end at a small size, this tree against itself (no
performance is asserted)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.bench import formats


def test_formats_benchmark_prints_every_measure_for_both_sides(tmp_path: Path) -> None:
    """`python -m tests.bench.formats BASE` writes each measure's median on both sides and
    their ratio."""
    out = tmp_path / "formats.json"
    code = formats.main(
        [str(formats.HERE), "--singles", "3", "--batches", "1", "--rounds", "1",
         "--json", str(out)]
    )  # fmt: skip
    figures = json.loads(out.read_text(encoding="utf-8"))
    assert (0, str(formats.HERE), 1) == (code, figures["base_tree"], figures["rounds"])
    for measure in (*formats.MEASURES, "bytes_per_event"):
        both = figures[measure]
        assert both["this"] > 0 and both["base"] > 0, measure
        assert abs(both["ratio"] - both["this"] / both["base"]) < 1e-9
