"""`factledger report`: the file it writes, Markdown on stdout, and what it refuses."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.bench.incident import write_incident
from tests.cli.conftest import Result

Cli = Callable[..., Result]


def test_report_writes_the_html_file_it_is_given(cli: Cli, tmp_path: Path) -> None:
    """`--out` gets one HTML document naming the suspect; stdout says where it went."""
    write_incident(tmp_path / "cli.db", 5)
    done = cli("report", "--run", "run-2", "--depth", "1", "--out", "report.html")
    assert (0, "wrote report.html\n") == (done.code, done.out)
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and "--run run-2" in page


def test_report_writes_markdown_to_stdout(cli: Cli, tmp_path: Path) -> None:
    """`--format md` without `--out` prints the Markdown report."""
    write_incident(tmp_path / "cli.db", 5)
    done = cli("report", "--task", "backend-1", "--format", "md", "--top", "3")
    assert 0 == done.code
    assert done.out.startswith("# Incident report: --task backend-1\n")


def test_report_refuses_no_suspect_and_writes_nothing(cli: Cli, tmp_path: Path) -> None:
    """No selector, or both a checkpoint and a key: one line on stderr, exit 1, no file."""
    write_incident(tmp_path / "cli.db", 5)
    refused = cli("report", "--out", "report.html")
    assert 1 == refused.code and "needs a selector" in refused.err
    both = cli("report", "--adapter", "evil", "--checkpoint", "c.txt", "--key", "k")
    assert 0 != both.code and "not both" in both.err
    assert not (tmp_path / "report.html").exists()


def test_blast_radius_takes_a_run(cli: Cli, tmp_path: Path) -> None:
    """`blast-radius --run R` selects the events written in run R."""
    write_incident(tmp_path / "cli.db", 5)
    found = cli("blast-radius", "--run", "run-bad", "--json").json()
    assert [2] == [e["position"] for e in found["events"]]
    assert "run-bad" == found["run_id"]
