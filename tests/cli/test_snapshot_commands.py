"""Snapshots from the shell: `snapshot`, `snapshot --check`, `checkpoint --snapshot`, and the
past states that fold from them (`as-of`, `history --at`, `blast-radius --at`)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.cli.conftest import Result

Cli = Callable[..., Result]


@pytest.fixture
def ten(cli: Cli) -> Cli:
    """A log of ten events: entries and versions of one fact."""
    for i in range(5):
        cli("add", f"note {i}", "--tag", "backend")
        cli("share", "users", f"v{i}", "--tag", "api-schema")
    return cli


def snapshots(tmp_path: Path) -> list[str]:
    return sorted(p.name for p in (tmp_path / "cli.db.snapshots").glob("at-*.sqlite"))


def test_snapshot_writes_the_newest_multiples_and_past_states_read_the_same(
    ten: Cli, tmp_path: Path
) -> None:
    """`snapshot --every 3 --keep 2` writes at 6 and 9; as-of, history --at and
    blast-radius --at answer as they did without them."""
    before = [
        ten("--json", "as-of", "--position", "8").json(),
        ten("--json", "history", "--at", "7").json(),
        ten("--json", "blast-radius", "--producer", "manual-cli", "--at", "8").json(),
    ]
    taken = ten("--json", "snapshot", "--every", "3", "--keep", "2")
    assert (0, [6, 9], 10) == (taken.code, taken.json()["written"], taken.json()["head"])
    assert ["at-000000000006.sqlite", "at-000000000009.sqlite"] == snapshots(tmp_path)
    after = [
        ten("--json", "as-of", "--position", "8").json(),
        ten("--json", "history", "--at", "7").json(),
        ten("--json", "blast-radius", "--producer", "manual-cli", "--at", "8").json(),
    ]
    assert before == after
    assert (7, 3) == (after[1]["at_position"], len(after[1]["versions"]))
    assert 8 == after[2]["summary"]["events"]


def test_snapshot_check_exits_2_on_an_edited_snapshot(ten: Cli, tmp_path: Path) -> None:
    """--check exits 0 while every snapshot matches the log refolded, 2 once a row of one
    was edited, naming the table."""
    ten("snapshot", "--every", "5")
    assert 0 == ten("snapshot", "--check").code
    with sqlite3.connect(tmp_path / "cli.db.snapshots" / "at-000000000010.sqlite") as conn:
        conn.execute("UPDATE fl_fact SET value = 'forged'")
    conn.close()
    found = ten("--json", "snapshot", "--check")
    assert 2 == found.code
    assert [(5, True, []), (10, False, ["fl_fact"])] == [
        (c["position"], c["matches"], c["differing"]) for c in found.json()
    ]


def test_checkpoint_snapshot_writes_one_at_the_head(ten: Cli, tmp_path: Path) -> None:
    """`checkpoint --snapshot` writes a snapshot at the head; a plain checkpoint writes none."""
    assert 0 == ten("checkpoint").code
    assert [] == snapshots(tmp_path)
    assert 0 == ten("checkpoint", "--snapshot").code
    assert ["at-000000000010.sqlite"] == snapshots(tmp_path)


@pytest.mark.parametrize(
    "args",
    [
        ("snapshot", "--every", "0"),
        ("snapshot", "--keep", "0"),
        ("snapshot", "--every", "x"),
        ("history", "--at", "-1"),
    ],
)
def test_bad_counts_and_positions_are_usage_errors(ten: Cli, args: tuple[str, ...]) -> None:
    """A count below 1 or a negative position is refused before anything is written."""
    found = ten(*args)
    assert found.code != 0 and found.err
    assert not Path("cli.db.snapshots").exists()


def test_past_the_head_is_an_error(ten: Cli) -> None:
    """history --at and blast-radius --at past the head exit 1, naming the head."""
    radius = ("blast-radius", "--producer", "manual-cli", "--at", "11")
    for args in (("history", "--at", "11"), radius):
        found = ten(*args)
        assert (1, True) == (found.code, "past the log head 10" in found.err)
