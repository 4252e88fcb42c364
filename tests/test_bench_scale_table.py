"""The table at scale runs end to end at a small size (no performance is asserted)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.bench import scale_table

MEASURES = [
    "verify",
    "rebuild",
    "checkpoint (first, fresh Ledger)",
    "as-of early (1%)",
    "as-of late (99%)",
    "diff (98% to 99%)",
    "history --at (99%)",
    "prove (fresh process)",
    "blast radius (one adapter)",
]
SNAPSHOTS = ["snapshot (fresh, from the first event)", "snapshot storage"]
PAST = [
    "as-of worst (newest snapshot - 1)",
    "as-of late (99%), from the first event",
    "diff (98% to 99%), from the first event",
    "history --at (99%), from the first event",
]


def test_scale_table_measures_everything_in_fresh_processes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`python -m tests.bench.scale_table` builds a log of exactly the events asked for with
    135-byte texts and a receipt per ten writes, writes snapshots, and prints and writes every
    measure with a positive time and a peak RSS of its own process, the past states also at
    the position the snapshots serve worst and from the first event."""
    out = tmp_path / "table.json"
    code = scale_table.main(
        ["--events", "300", "--dir", str(tmp_path), "--json", str(out), "--snapshot-every", "100"]
    )
    figures = json.loads(out.read_text(encoding="utf-8"))
    rows = {row["measure"]: row for row in figures["rows"]}
    assert (0, 300, 27) == (code, figures["build"]["events"], figures["build"]["receipts"])
    assert ["build", "file size", *SNAPSHOTS, *MEASURES, *PAST] == list(rows)
    assert "3 files" in rows["snapshot storage"]["detail"]
    assert "position 299:" in rows["as-of worst (newest snapshot - 1)"]["detail"]
    timed = [*MEASURES, *PAST]
    assert all(rows[m]["seconds"] > 0 and rows[m]["peak_rss_mb"] > 0 for m in timed)
    assert rows["build"]["seconds"] > 0 < figures["bytes_per_event"]
    assert 4 == len(figures["targets"])
    printed = capsys.readouterr().out
    assert all(f"| {measure} |" in printed for measure in MEASURES)


def test_reuse_keeps_a_log_built_for_the_same_events_only(tmp_path: Path) -> None:
    """`--reuse` keeps the log built for the same `--events`; another count builds anew."""
    path = tmp_path / "scale-300.db"
    first = scale_table.prepare(path, 300, reuse=True)
    again = scale_table.prepare(path, 300, reuse=True)
    other = scale_table.prepare(path, 250, reuse=True)
    assert (False, True, False) == (first["reused"], again["reused"], other["reused"])
    assert (300, 250) == (again["events"], other["events"])


def test_content_is_exactly_135_bytes() -> None:
    """Every memory text is 135 ASCII bytes, short or long source text alike."""
    texts = [scale_table.content(text, serial) for text, serial in (("a", 1), ("b" * 500, 10**6))]
    assert [135, 135] == [len(t.encode()) for t in texts]


def test_too_few_events_are_refused(tmp_path: Path) -> None:
    """Fewer events than one cycle of writes and receipts is a usage error."""
    with pytest.raises(SystemExit):
        scale_table.main(["--events", "10", "--dir", str(tmp_path)])
