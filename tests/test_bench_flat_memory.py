"""The constant-memory benchmark runs end to end at small sizes (no figure is asserted)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.bench import flat_memory


def test_flat_memory_measures_every_operation_at_both_sizes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`python -m tests.bench.flat_memory` runs verify, rebuild, export, checkpoint and
    rebuild --swap on a log of each size in fresh processes, each with a peak RSS, a
    progress callback called up to the head, and prints the table with the ratio."""
    out = tmp_path / "flat.json"
    code = flat_memory.main(["--events", "200", "300", "--dir", str(tmp_path), "--json", str(out)])
    measures = json.loads(out.read_text(encoding="utf-8"))["measures"]
    assert 0 == code
    assert list(flat_memory.OPERATIONS) == [small["operation"] for small, _ in measures]
    for pair in measures:
        for measure, events in zip(pair, (200, 300), strict=True):
            assert events == measure["events"]
            assert measure["peak_mb"] >= measure["floor_mb"] > 0
            assert measure["progress_calls"] >= 1
            assert [events, events] == measure["last_progress"]
    printed = capsys.readouterr().out
    assert all(f"| {operation} |" in printed for operation in flat_memory.OPERATIONS)


def test_flat_memory_refuses_sizes_out_of_order(tmp_path: Path) -> None:
    """SMALL must be at least 200 and below LARGE."""
    with pytest.raises(SystemExit):
        flat_memory.main(["--events", "300", "200", "--dir", str(tmp_path)])
