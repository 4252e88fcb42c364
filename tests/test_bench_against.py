"""The before-and-after benchmark runs end to end at a small size, this tree against itself
(no performance is asserted)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.bench import against


@pytest.mark.parametrize("path", against.PATHS)
def test_against_benchmark_prints_both_sides_p50s(tmp_path: Path, path: str) -> None:
    """`python -m tests.bench.against BASE --path PATH` writes the wall and CPU p50 of both
    trees and their ratios, every call counted on each side."""
    out = tmp_path / "against.json"
    code = against.main(
        [str(against.HERE), "--entries", "200", "--calls", "4", "--rounds", "2",
         "--durability", "fast", "--path", path, "--json", str(out)]
    )  # fmt: skip
    figures = json.loads(out.read_text(encoding="utf-8"))
    assert (0, path, 200, 8, str(against.HERE)) == (
        code,
        figures["path"],
        figures["entries"],
        figures["calls"],
        figures["base_tree"],
    )
    for clock in ("wall", "cpu"):
        assert figures[f"{clock}_p50_ms_base"] > 0 < figures[f"{clock}_p50_ms_this"]
        assert figures[f"{clock}_ratio"] > 0


def test_against_refuses_a_folder_that_is_not_a_checkout(tmp_path: Path) -> None:
    """A BASE without the projections package is a usage error, before anything is built."""
    with pytest.raises(SystemExit) as exited:
        against.main([str(tmp_path)])
    assert 2 == exited.value.code
