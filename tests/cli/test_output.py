"""What the command line prints: tables that fit the width, values never cut, progress only
on a terminal, logs only on stderr."""

from __future__ import annotations

import io
import logging
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

from replay import InclusionProof, verify
from replay.cli import main
from replay.cli.output import Wrapped, progress, to_text
from tests.cli.conftest import Result

Cli = Callable[..., Result]
HASH = "0123456789abcdef" * 4
LONG_TOKEN = "x" * 250
LONG_TEXT = " ".join(f"word{i}" for i in range(80))
WIDTHS = (40, 60, 100, 160, 400)


def whole(text: str) -> str:
    """`text` with all whitespace removed, so a value folded across lines reads whole."""
    return re.sub(r"\s+", "", text)


def widest_line(text: str) -> int:
    return max(len(line) for line in text.splitlines())


def readings(out: str) -> list[str]:
    """Ways a reader can read `out` back: the whole text, and each table column top to
    bottom (a column starts where its header does), all with whitespace removed."""
    found = [whole(out)]
    for block in out.split("\n\n"):
        lines = block.splitlines()
        for i, line in enumerate(lines):
            if re.fullmatch(r"[a-z_]+( {2,}[a-z_]+)+", line):
                starts = [m.start() for m in re.finditer(r"[a-z_]+", line)]
                ends = [*starts[1:], None]
                found += [
                    whole("".join(row[s:e] for row in lines[i + 1 :]))
                    for s, e in zip(starts, ends, strict=True)
                ]
    return found


def shown_whole(value: str, out: str) -> bool:
    return any(whole(value) in reading for reading in readings(out))


@pytest.fixture
def long_values(cli: Cli) -> Cli:
    cli("share", "token", LONG_TOKEN, "--tag", "long")
    cli("share", "text", LONG_TEXT, "--tag", "long")
    cli("add", LONG_TEXT, "--tag", "long")
    return cli


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize(
    "command",
    [("history",), ("blame",), ("diff", "0", "3"), ("query", "--tag", "long"), ("list",)],
)
def test_long_values_are_shown_whole_within_the_width(
    long_values: Cli, monkeypatch: pytest.MonkeyPatch, width: int, command: tuple[str, ...]
) -> None:
    """Every line fits $COLUMNS; long values and content hashes appear whole (folded at most),
    never cut with an ellipsis."""
    monkeypatch.setenv("COLUMNS", str(width))
    hashes = [f["content_hash"] for f in long_values("query", "--tag", "long", "--json").rows()]
    result = long_values(*command)
    assert (0, "") == (result.code, result.err)
    assert widest_line(result.out) <= width
    assert "…" not in result.out and "..." not in result.out
    assert shown_whole(LONG_TOKEN, result.out) and shown_whole(LONG_TEXT, result.out)
    if command[0] == "history":
        assert all(shown_whole(h, result.out) for h in hashes)
        if width >= 100:
            assert all(h in result.out.split() for h in hashes)


def test_on_a_wide_console_a_long_value_is_on_one_line(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When the table fits, a long value is on one line, untouched."""
    cli("share", "token", LONG_TOKEN, "--tag", "long")
    monkeypatch.setenv("COLUMNS", "400")
    out = cli("query", "--tag", "long").out
    assert LONG_TOKEN in out.split() and widest_line(out) <= 400


def test_a_table_continues_in_bands_below_when_it_is_too_wide(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """history is one table on a wide terminal; at 80 columns its columns continue in bands
    below, each led by `position`, never one `name  value` line per field."""
    cli("share", "users", "{name: str}", "--tag", "api")
    monkeypatch.setenv("COLUMNS", "300")
    wide = cli("history").out.splitlines()
    rows = wide.index("versions (1):") + 1
    assert ["position", "event_id", "time"] == wide[rows].split()[:3]
    assert "content_hash" in wide[rows].split() and "trust" in wide[rows].split()
    monkeypatch.setenv("COLUMNS", "80")
    narrow = cli("history").out.splitlines()
    rows = narrow.index("versions (1):") + 1
    assert ["position", "event_id", "time"] == narrow[rows].split()[:3]
    bands = [line.split() for line in narrow[rows:] if line.startswith("position")]
    assert len(bands) > 1 and all(["position"] == band[:1] for band in bands[1:])
    assert widest_line("\n".join(narrow)) <= 80
    assert not any(line.startswith("scope  ") for line in narrow)


def drawn(renderable: object, width: int) -> str:
    console = Console(file=io.StringIO(), width=width, highlight=False, markup=False)
    with console.capture() as captured:
        console.print(renderable)
    return captured.get()


def table(cell: Callable[[str], Any], value: str, *, no_wrap: bool) -> Table:
    """A two-column table as `output.rows` builds one, its cells made by `cell`."""
    drawn_table = Table(box=None, padding=(0, 2, 0, 0), pad_edge=False)
    drawn_table.add_column("id", no_wrap=True)
    drawn_table.add_column("content", no_wrap=no_wrap, overflow="fold")
    drawn_table.add_row(cell("12"), cell(value))
    return drawn_table


@settings(max_examples=300, deadline=None)
@given(
    value=st.text(st.characters(blacklist_categories=("Cs",)), max_size=300),
    width=st.integers(min_value=1, max_value=120),
    no_wrap=st.booleans(),
)
def test_a_wrapped_cell_draws_what_a_rich_text_draws(value: str, width: int, no_wrap: bool) -> None:
    """Wrapped lays a value out exactly as rich's Text does, alone and as a table's cell."""
    assert drawn(Text(value), width) == drawn(Wrapped(value), width)
    expected = drawn(table(Text, value, no_wrap=no_wrap), width)
    assert expected == drawn(table(Wrapped, value, no_wrap=no_wrap), width)


def test_a_wrapped_cell_hands_rich_one_line_per_segment() -> None:
    """rich splits a segment holding many lines in time quadratic in its size; a wrapped
    cell never yields a segment holding more than its one line (benchmark: python -m
    tests.bench.tables)."""
    console = Console(file=io.StringIO(), width=80)
    segments = list(console.render(Wrapped("word " * 20_000)))
    newlines = [segment.text.count("\n") for segment in segments]
    assert {0, 1} == set(newlines)
    assert all(
        segment == Segment.line() for segment, n in zip(segments, newlines, strict=True) if n
    )
    assert 1250 == sum(newlines)


class Big(msgspec.Struct):
    id: int
    content: str


@pytest.mark.parametrize("value", ["word " * 200_000, "a\u200b" * 200_000, "x" * 1_000_000])
def test_a_megabyte_value_is_drawn_whole_within_the_width(value: str) -> None:
    """A 1 MB value, in a table and as a `name  value` block, is drawn whole (escaped), every
    line within the width."""
    shown = value.replace("\u200b", "\\u{200B}")
    for drawing in (to_text([{"id": 1, "content": value}], width=100), to_text(Big(1, value))):
        assert widest_line(drawing) <= 100
        assert whole(shown) in whole(drawing)


@pytest.mark.parametrize("width", WIDTHS)
def test_proof_hashes_are_shown_whole(width: int) -> None:
    """A proof's leaf hash and every path hash appear whole, at any width."""
    path = tuple(f"{i:x}".rjust(64, "e") for i in range(12))
    proof = InclusionProof(log_id="log", position=3, size=4096, leaf_hash=HASH, path=path)
    text = to_text(proof, width=width)
    assert widest_line(text) <= width
    for digest in (HASH, *path):
        assert digest in whole(text)
        if width >= 80:
            assert digest in text.split()


def test_prove_prints_whole_hashes(cli: Cli, tmp_path: Path) -> None:
    """`prove` shows the leaf hash and the path hashes whole."""
    for value in ("a", "b", "c"):
        cli("share", value, value, "--tag", "t")
    cp = tmp_path / "cp.txt"
    assert 0 == cli("checkpoint", "--out", str(cp)).code
    proof = cli("prove", "2", "--checkpoint", str(cp), "--json").json()
    text = cli("prove", "2", "--checkpoint", str(cp)).out
    assert len(proof["leaf_hash"]) == 64 and proof["path"]
    for digest in (proof["leaf_hash"], *proof["path"]):
        assert digest in text.split()


def test_progress_shows_only_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """The progress bar draws on a terminal's stderr and writes nothing to a pipe."""

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    for stream, drawn in ((io.StringIO(), False), (Terminal(), True)):
        monkeypatch.setattr("sys.stderr", stream)
        with progress("verified") as report:
            report(5, 10)
        assert drawn == ("verified" in stream.getvalue())
        assert drawn == bool(stream.getvalue())


def test_a_phase_relabels_the_bar(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each `bar.phase(name)` shows the new phase's name on a terminal at once."""

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    stream = Terminal()
    monkeypatch.setattr("sys.stderr", stream)
    with progress("verified") as bar:
        bar(10, 10)
        bar.phase("refolding")
        bar(3, 10)
        bar.phase("comparing")
    drawn = stream.getvalue()
    assert "verified" in drawn and "refolding" in drawn and "comparing" in drawn


def test_logging_goes_to_stderr_and_is_put_back(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    """During a command, warnings go to stderr with their fields; afterwards the logging
    configuration is as it was."""
    root = logging.getLogger()
    before = (root.level, list(root.handlers))
    cli("share", "k", "v1", "--tag", "t")
    monkeypatch.setenv("FACTLEDGER_ADAPTER", "codex")
    result = cli("share", "k", "v2", "--tag", "t", "--json")
    assert 2 == result.json()["position"]
    assert "fact_overwritten" in result.err and "previous_producer=manual-cli" in result.err
    assert before == (root.level, list(root.handlers))


def test_no_command_shows_help_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    """`factledger` alone prints its help to stderr and exits 1; stdout stays empty."""
    assert 1 == main([])
    captured = capsys.readouterr()
    assert "" == captured.out and "Usage: factledger" in captured.err


def test_json_escapes_invisible_characters_and_parses_back(cli: Cli) -> None:
    """--json writes invisible characters as JSON escapes: nothing reaches the terminal raw,
    and the JSON still reads back to the stored value."""
    hostile = "\x1b[2J zero\u200bwidth \u202eevil é 😀"
    cli("share", "k", hostile, "--tag", "t")
    result = cli("query", "--tag", "t", "--raw", "--json")
    assert hostile == result.rows()[0]["value"]
    assert not {"\x1b", "\u200b", "\u202e"} & set(result.out)
    assert "é 😀" in result.out


@pytest.fixture
def demo_log(tmp_path: Path) -> Path:
    """The log `factledger demo` leaves behind: facts, entries, a poisoning, receipts,
    operator actions."""
    kept = tmp_path / "demo"
    assert 0 == main(["demo", "--keep", str(kept)])
    return kept / "memory.db"


WHOLE_TOKEN = r'"((?:fl|op):[0-9a-f]{32}|blake3(?:-keyed)?:[0-9a-f]{64}|[0-9a-f]{64})"'
"""An event id, a content hash or a chain hash, as JSON quotes it."""
AT_80 = (
    ("list", "--all"),
    ("query", "--tag", "api-schema", "--all"),
    ("history", "--all"),
    ("blast-radius", "--adapter", "evil-cli"),
    ("verify", "--deep"),
)


@pytest.mark.parametrize("command", AT_80)
def test_at_80_columns_every_line_fits_and_ids_and_hashes_are_whole(
    demo_log: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    command: tuple[str, ...],
) -> None:
    """At COLUMNS=80 no line is wider than 80, and every event id, content hash and chain
    hash shown is whole on one line (history, blast-radius and verify show every one their
    JSON holds)."""
    capsys.readouterr()
    assert main([*command, "--db", str(demo_log), "--json"]) in (0, 2)
    tokens = set(re.findall(WHOLE_TOKEN, capsys.readouterr().out))
    monkeypatch.setenv("COLUMNS", "80")
    assert main([*command, "--db", str(demo_log)]) in (0, 2)
    out = capsys.readouterr().out
    assert widest_line(out) <= 80
    shown = {token for token in tokens if token in whole(out)}
    assert shown <= set(out.split())
    if command[0] in ("history", "blast-radius", "verify"):
        assert tokens and tokens == shown


def test_blast_radius_at_80_columns_is_short_and_opens_with_its_summary(
    demo_log: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """blast-radius counts events, live, prompts reached, descendants and quarantined
    before its details, and at 80 columns takes a few lines a row, not one per field."""
    capsys.readouterr()
    monkeypatch.setenv("COLUMNS", "80")
    assert 0 == main(["blast-radius", "--adapter", "evil-cli", "--db", str(demo_log)])
    lines = capsys.readouterr().out.splitlines()
    summary = lines.index("summary:")
    counted = dict(line.split() for line in lines[summary + 1 : summary + 6])
    expected = {"events": "2", "live": "0", "prompts_reached": "1", "descendants": "0"}
    assert {**expected, "quarantined": "1"} == counted
    assert summary < lines.index("events (2):")
    assert len(lines) < 70


def test_labels_say_what_they_show(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    """A time shown as ISO 8601 is labelled `time`, never `ts_ns`; JSON keeps `ts_ns` in
    nanoseconds."""
    cli("share", "users", "{name: str}", "--tag", "api")
    monkeypatch.setenv("COLUMNS", "120")
    text = cli("query", "--tag", "api").out
    assert "time" in text.splitlines()[0].split() and "ts_ns" not in text
    assert re.search(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d", text)
    monkeypatch.delenv("COLUMNS")
    assert "ts_ns" not in cli("history").out
    assert isinstance(cli("query", "--tag", "api", "--json").rows()[0]["ts_ns"], int)


def test_piped_output_without_columns_is_tab_separated(cli: Cli) -> None:
    """Piped with no $COLUMNS, a list is a header line and one line per row, cells split by
    tabs, each value whole (a tab or newline in a value shown escaped)."""
    cli("share", "users", "a\tvalue with\nlines and a long " + "x" * 150, "--tag", "api")
    cli("share", "orders", "{id: int}", "--tag", "api")
    facts = cli("query", "--tag", "api", "--raw", "--json").rows()
    lines = cli("query", "--tag", "api", "--raw").out.splitlines()
    header = lines[0].split("\t")
    assert ["key", "value"] == header[:2] and "time" in header
    assert len(facts) + 1 == len(lines)
    for line, fact in zip(lines[1:], facts, strict=True):
        cells = dict(zip(header, line.split("\t"), strict=True))
        assert (fact["key"], str(fact["position"])) == (cells["key"], cells["position"])
    values = [line.split("\t")[1] for line in lines[1:]]
    assert "a\\u{0009}value with\\u{000A}lines and a long " + "x" * 150 in values


def test_json_lists_say_their_limit_and_whether_they_were_cut(cli: Cli) -> None:
    """--json lists are `{"rows": [...], "limit": N, "truncated": bool}`: list and as-of say
    whether --limit cut them; query takes no limit; history and blast-radius add `limit`
    and `truncated` to their report."""
    for text in ("one", "two", "three"):
        cli("add", text)
    assert {"limit": 2, "truncated": True} == _shape(cli("list", "--limit", "2", "--json"), 2)
    assert {"limit": 3, "truncated": False} == _shape(cli("list", "--limit", "3", "--json"), 3)
    cut = _shape(cli("as-of", "--position", "3", "--limit", "2", "--json"), 2)
    assert {"limit": 2, "truncated": True} == cut
    cli("share", "k", "v1", "--tag", "t")
    cli("share", "k", "v2", "--tag", "t")
    assert {"limit": None, "truncated": False} == _shape(cli("query", "--tag", "t", "--json"), 1)
    history = cli("history", "--limit", "1", "--json").json()
    assert (1, True, ["v2"]) == (
        history["limit"],
        history["truncated"],
        [v["value"] for v in history["versions"]],
    )
    whole_history = cli("history", "--json").json()
    assert (100, False) == (whole_history["limit"], whole_history["truncated"])
    radius = cli("blast-radius", "--producer", "manual-cli", "--json").json()
    assert (100, False, 5) == (radius["limit"], radius["truncated"], radius["summary"]["events"])


def _shape(result: Result, rows: int) -> dict[str, object]:
    shown = result.json()
    assert {"rows", "limit", "truncated"} == set(shown) and rows == len(shown["rows"])
    return {"limit": shown["limit"], "truncated": shown["truncated"]}


def test_verify_deep_shows_a_phase_for_the_refold(demo_log: Path) -> None:
    """verify --deep names its refold and its comparison as phases, and reports the
    refold's progress, so its bar never sits at the end of the hashing."""
    seen: list[object] = []
    report = verify(str(demo_log), deep=True, progress=lambda *a: seen.append(a),
                    phase=seen.append)  # fmt: skip
    assert report.ok
    refold = seen.index("refolding")
    assert (11, 11) == seen[refold - 1] and "comparing" in seen[refold:]
    assert (11, 11) in seen[refold : seen.index("comparing")]


@pytest.mark.parametrize(
    ("command", "label"),
    [
        (["verify"], "verified"),
        (["rebuild"], "rebuilt"),
        (["export", "--out", "{dir}/export.jsonl"], "exported"),
        (["checkpoint"], "checkpoint: verified"),
    ],
    ids=["verify", "rebuild", "export", "checkpoint"],
)
def test_long_walks_show_progress_on_a_terminal_only(
    demo_log: Path, monkeypatch: pytest.MonkeyPatch, command: list[str], label: str
) -> None:
    """verify, rebuild, export and checkpoint draw a progress bar on a terminal's stderr,
    and write nothing to stderr that is a pipe; stdout holds the JSON alone."""

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    argv = [a.format(dir=demo_log.parent) for a in command] + ["--db", str(demo_log)]
    for stream, drawn in ((io.StringIO(), False), (Terminal(), True)):
        out = io.StringIO()
        monkeypatch.setattr("sys.stderr", stream)
        monkeypatch.setattr("sys.stdout", out)
        assert 0 == main([*argv, "--json"])
        assert drawn == (label in stream.getvalue())
        assert drawn == bool(stream.getvalue())
        assert isinstance(msgspec.json.decode(out.getvalue()), dict)
