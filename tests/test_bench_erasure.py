"""The erasure benchmark runs end to end at a small size (no performance is asserted)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.bench import erasure


def test_erasure_benchmark_prints_both_times_and_leaves_no_text(tmp_path: Path) -> None:
    """`python -m tests.bench.erasure` erases and quarantines the same positions, prints both
    times, their ratio and verify's time after each, and finds no erased text in the file."""
    out = tmp_path / "erasure.json"
    code = erasure.main(["--entries", "200", "--erase", "50", "--json", str(out)])
    figures = json.loads(out.read_text(encoding="utf-8"))
    assert (0, 200, 50, 0) == (
        code,
        figures["entries"],
        figures["erased"],
        figures["erased_texts_left_in_file"],
    )
    assert figures["erase_s"] > 0 < figures["quarantine_s"]
    assert figures["verify_s_after_erasure"] > 0 < figures["verify_s_after_quarantine"]
