"""Every command that shows stored text masks personal data alike, in its table and its
JSON, unless --raw; what is stored, and what `export` writes, stays verbatim."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from replay.cli.app import app
from tests.cli.conftest import Result

Cli = Callable[..., Result]

TAG = "alice@example.com"
KEY = "jos\u00e9@example.com"
VALUE = (
    "mail alice@ex\u00e4mple.com card 4111  1111  1111  1111 card 4111.1111/1111_1111 "
    "ssn 123\u201145\u20116789 tel +44 (0)20 7946 0958 card 4111\t1111\n1111\t1111"
)
MASKED_VALUE = (
    "mail [REDACTED] card [REDACTED] card [REDACTED] ssn [REDACTED] tel [REDACTED] card [REDACTED]"
)
CONTENT = "reach jos\u00e9@example.com"
PERSONAL = (
    "alice",
    "jos\u00e9",
    "ex\u00e4mple",
    "4111",
    "6789",
    "7946",
    "0958",
)
"""Pieces of the personal data above short enough that no table wraps inside one."""
PRODUCT_VALUES = re.compile(
    r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[0-9a-f]{32,}|\d{9,}(?:\.\d+)?"
)
"""What the product prints that may hold such a piece by chance: ids, hashes, epoch times in
seconds or nanoseconds (every card above has separators, so a leaked one is no such run)."""


def leaked(out: str) -> list[str]:
    """The pieces of personal data in `out`, outside the product's own ids and hashes."""
    scrubbed = PRODUCT_VALUES.sub(" ", out)
    return [piece for piece in PERSONAL if piece in scrubbed]


SHOWING = (
    ("list",),
    ("query", "--tag", TAG),
    ("history",),
    ("history", "--tag", TAG, "--key", KEY),
    ("blame",),
    ("as-of", "--position", "2"),
    ("as-of", "--position", "2", "--tag", TAG),
    ("diff", "0", "2"),
    ("tags",),
    ("receipts",),
    ("blast-radius", "--producer", "manual-cli"),
)
"""Each command that shows stored text, with what it needs to show the rows above."""


@pytest.fixture
def written(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> Cli:
    """A log holding a fact and an entry full of personal data, read once by an agent (so
    `receipts` has a receipt naming the tag)."""
    assert 0 == cli("share", KEY, VALUE, "--tag", TAG).code
    assert 0 == cli("add", CONTENT, "--tag", TAG).code
    monkeypatch.setenv("FACTLEDGER_ADAPTER", "codex")
    assert 0 == cli("query", "--tag", TAG).code
    monkeypatch.delenv("FACTLEDGER_ADAPTER")
    return cli


@pytest.mark.parametrize("command", SHOWING, ids=" ".join)
def test_every_command_masks_its_table_and_its_json(written: Cli, command: tuple[str, ...]) -> None:
    """No piece of the personal data shows, in the table or the JSON; the mask does."""
    for args in (command, (*command, "--json")):
        shown = written(*args)
        assert 0 == shown.code, shown.err
        assert [] == leaked(shown.out)
        assert "[REDACTED]" in shown.out


@pytest.mark.parametrize("command", SHOWING, ids=" ".join)
def test_raw_shows_stored_text_verbatim(written: Cli, command: tuple[str, ...]) -> None:
    """With --raw the JSON holds the stored tag (and key or text) exactly as written."""
    shown = written(*command, "--raw", "--json")
    assert 0 == shown.code, shown.err
    assert TAG in shown.out
    assert "[REDACTED]" not in shown.out


@pytest.mark.parametrize(
    ("command", "field", "stored", "masked"),
    [
        (("query", "--tag", TAG), "value", VALUE, MASKED_VALUE),
        (("as-of", "--position", "2", "--tag", TAG), "value", VALUE, MASKED_VALUE),
        (("list",), "content", CONTENT, "reach [REDACTED]"),
    ],
)
def test_each_piece_is_masked_whole_and_raw_is_verbatim(
    written: Cli, command: tuple[str, ...], field: str, stored: str, masked: str
) -> None:
    """Each piece of personal data becomes one [REDACTED]; --raw gives the stored text, its
    non-ASCII characters, tabs and newlines included."""
    assert stored == written(*command, "--raw", "--json").rows()[0][field]
    assert masked == written(*command, "--json").rows()[0][field]


def test_the_commands_that_mask_are_the_ones_with_raw() -> None:
    """The same flag, from one helper, on exactly the commands that show stored text."""
    with_raw = {
        name
        for name, command in app.commands.items()
        if any(param.name == "raw" for param in command.params)
    }
    assert {command[0] for command in SHOWING} == with_raw


def test_masking_never_changes_what_is_stored(written: Cli, tmp_path: Path) -> None:
    """After every command has shown masked rows, the log and the export hold the text
    verbatim: masking is display only, and export is data, not display."""
    for command in SHOWING:
        written(*command)
    exported = tmp_path / "log.jsonl"
    assert 0 == written("export", "--out", str(exported)).code
    lines = [json.loads(line) for line in exported.read_text(encoding="utf-8").splitlines()]
    assert [VALUE, CONTENT] == [line["text"] for line in lines if "text" in line]
    assert VALUE == written("query", "--tag", TAG, "--raw", "--json").rows()[0]["value"]


def test_invisible_characters_inside_an_address_are_masked_with_it(cli: Cli) -> None:
    """A zero-width space and a bidi override inside an address do not split it: the table
    shows one mask and no escape of them."""
    cli("share", "k", "x ali\u200bce@exa\u202emple.com y", "--tag", "t")
    table = cli("query", "--tag", "t").out
    assert "x [REDACTED] y" in table
    assert "\\u{" not in table
