"""The prompt path's benchmark at two log sizes runs end to end at small sizes, this tree
against itself (no performance is asserted)."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from tests.bench import against, prompt_scale


def test_prompt_scale_prints_each_size_and_tree_p50_and_their_ratios(tmp_path: Path) -> None:
    """`python -m tests.bench.prompt_scale --events A B --base TREE` builds both logs, times
    every call on copies (the built logs stay as they were) and writes each size's wall and
    CPU p50 for both trees, the largest size over the smallest, and this tree over the base."""
    out = tmp_path / "figures.json"
    argv = ["--dir", str(tmp_path), "--events", "600", "300", "--calls", "3", "--rounds", "2"]
    code = prompt_scale.main([*argv, "--base", str(against.HERE), "--json", str(out)])
    figures = json.loads(out.read_text(encoding="utf-8"))
    assert (0, {"300": 300, "600": 600}, 6) == (
        code,
        figures["events"],
        figures["calls_per_size"],
    )
    for clock in ("wall", "cpu"):
        for tree in ("this", "base"):
            assert figures[f"{clock}_p50_ms_{tree}_300"] > 0
            assert figures[f"{clock}_ratio_{tree}_600_over_300"] > 0
        assert figures[f"{clock}_ratio_this_over_base_600"] > 0
    assert ["scale-300.db", "scale-600.db"] == sorted(p.name for p in tmp_path.glob("*.db*"))
    with closing(sqlite3.connect(tmp_path / "scale-300.db")) as built:
        assert (300,) == built.execute("SELECT max(position) FROM fl_events").fetchone()


def test_zipf_tags_query_three_tags_each(tmp_path: Path) -> None:
    """`--zipf-tags` times queries of three tags drawn by the corpus's law, and says so."""
    out = tmp_path / "figures.json"
    argv = ["--dir", str(tmp_path), "--events", "300", "400", "--calls", "2", "--rounds", "1"]
    assert 0 == prompt_scale.main([*argv, "--zipf-tags", "--json", str(out)])
    figures = json.loads(out.read_text(encoding="utf-8"))
    assert "three tags by the corpus's Zipf law" == figures["queries"]
    assert figures["wall_ratio_this_400_over_300"] > 0


@pytest.mark.parametrize("events", [["300", "300"], ["100", "300"]])
def test_two_different_sizes_of_at_least_200_are_required(
    tmp_path: Path, events: list[str]
) -> None:
    """The same size twice, or a size too small for one cycle of the build, is refused."""
    with pytest.raises(SystemExit):
        prompt_scale.main(["--dir", str(tmp_path), "--events", *events])
