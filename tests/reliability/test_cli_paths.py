"""The command line as a write path and an input surface: poisoning through `add` and
`share`, a bad-input table, and terminal escapes in what it prints."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest

from eventlog import RecallRecorded
from projections import MemoryTrustPolicy, SQLiteMemoryStore, load_persistent_memory
from projections._prompt import visible
from replay.cli import main
from tests.reliability.support import as_reader
from tests.reliability.test_poisoning import ATTACKER, PAYLOADS, fenced_blocks


def run(*args: str) -> int:
    return main(list(args))


@pytest.mark.parametrize("variable", ["FACTLEDGER_ADAPTER", "BERNSTEIN_ADAPTER"])
def test_cli_writes_under_a_foreign_adapter_never_reach_a_default_prompt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    """Every payload written by `add` and `share` under a foreign adapter is kept out of the
    prompt by the default policy, with a receipt naming each one; explicit trust admits them."""
    db = str(tmp_path / "m.db")
    assert 0 == run("add", "Run tests with pytest -q", "--tag", "backend", "--db", db)
    monkeypatch.setenv(variable, ATTACKER)
    for name, payload in PAYLOADS.items():
        assert 0 == run("add", payload, "--tag", "backend", "--db", db)
        assert 0 == run("share", name, payload, "--tag", "backend", "--db", db)
    monkeypatch.delenv(variable)
    with SQLiteMemoryStore(db) as store:
        text = load_persistent_memory(store, ["backend"], limit=100, task_id="victim")
        receipt = list(store.event_log.read())[-1].payload
        assert isinstance(receipt, RecallRecorded)
        assert (1,) == receipt.included
        assert 2 * len(PAYLOADS) == len(receipt.excluded)
        assert {"untrusted_adapter"} == {e.reason for e in receipt.excluded}
        assert ATTACKER not in text and "pytest -q" in text
        for payload in PAYLOADS.values():
            assert payload not in text
        trusting = MemoryTrustPolicy(trusted_adapters=frozenset({ATTACKER}))
        admitted = fenced_blocks(
            load_persistent_memory(store, ["backend"], trust_policy=trusting, limit=100)
        )
    assert {visible(p) for p in PAYLOADS.values()} <= {content for _, content in admitted.values()}
    assert {f"adapter:{ATTACKER}", "operator"} == {source for source, _ in admitted.values()}


def test_factledger_adapter_wins_over_bernstein_adapter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With both variables set, FACTLEDGER_ADAPTER is the one stamped."""
    db = str(tmp_path / "m.db")
    monkeypatch.setenv("FACTLEDGER_ADAPTER", ATTACKER)
    monkeypatch.setenv("BERNSTEIN_ADAPTER", "claude-code")
    assert 0 == run("add", "x", "--db", db)
    with SQLiteMemoryStore(db) as store:
        assert [ATTACKER] == [e.source_adapter for e in store.list()]


def test_writes_without_an_adapter_are_untagged_operator_rows(tmp_path: Path) -> None:
    """The documented gap: with no adapter variable, CLI writes are untagged and trusted."""
    db = str(tmp_path / "m.db")
    assert 0 == run("add", "an operator note", "--tag", "backend", "--db", db)
    with SQLiteMemoryStore(db) as store:
        text = load_persistent_memory(store, ["backend"])
    assert "source=operator" in text and "an operator note" in text


@pytest.mark.parametrize(
    "args",
    [
        ("add", "x", "--type", ""),
        ("add", "x", "--tag", ""),
        ("add", "x", "--tag", "a\x01"),
        ("add", "x", "--tag", "t" * 201),
        ("add", "x", *[arg for i in range(65) for arg in ("--tag", f"t{i}")]),
        ("add", "x", "--importance", "nan"),
        ("add", "x", "--importance", "inf"),
        ("add", "x", "--importance", "-0.1"),
        ("add", "x", "--importance", "1e400"),
        ("add", "x", "--task-id", "t\x01"),
        ("add", "\udcff"),
        ("share", "k", "v", "--tag", ""),
        ("share", "k", "\udcff", "--tag", "t"),
        ("add", ""),
        ("add", " \n\t "),
        ("add",),
        ("add", "x", "--tag", "api\u200b"),
        ("add", "x", "--tag", "\u3164"),
        ("add", "x", "--task-id", "claude\u200bcode"),
        ("add", "x", "--task-id", "\u0441laude-code"),
        ("add", "x", "--task-id", "t" * 129),
        ("share", "k", "", "--tag", "t"),
        ("share", "k\u200b", "v", "--tag", "t"),
        ("share", "k\ufe0f", "v", "--tag", "t"),
        ("share", "k", "v", "--tag", "t\u2028"),
        ("share", "k", "v", "--tag", "t", "--scope", "run"),
        ("share", "k", "--file", "missing.txt", "--tag", "t"),
        ("history", "--limit", "0"),
        ("history", "--tag", "t\u200b"),
        ("blast-radius", "--adapter", "x", "--limit", "0"),
        ("blast-radius",),
        ("diff", "0", "1", "--limit", "0"),
        ("list", "--limit", "-1"),
        ("list", "--limit", "99999999999999999999"),
        ("list", "--type", "bogus"),
        ("list", "--adapter", ""),
        ("remove", "-1"),
        ("remove", "99999999999999999999"),
        ("diff", "3", "1"),
        ("diff", "-1", "2"),
        ("as-of", "--position", "-1"),
        ("as-of", "--at", "99999999999999999999999"),
        ("verify", "--checkpoint", "."),
        ("verify", "--checkpoint", "missing.txt"),
        ("prove", "0", "--checkpoint", "missing.txt"),
        ("checkpoint", "--key", "."),
        ("quarantine", "--position", "0", "--reason", "r"),
        ("quarantine", "--adapter", "nobody", "--reason", "r"),
        ("quarantine", "--adapter", "x", "--reason", ""),
        ("quarantine", "--adapter", "x", "--reason", "r" * 2001),
        ("release", "0", "--reason", "r"),
        ("export", "--out", "."),
        ("import-legacy", "."),
    ],
    ids=lambda args: " ".join(a[:12].encode("unicode_escape").decode() for a in args)[:60],
)
def test_bad_cli_input_is_one_line_exit_1_and_changes_nothing(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    args: tuple[str, ...],
) -> None:
    """Each bad argument: exit 1, one line on stderr, no traceback, the log head unchanged."""
    monkeypatch.chdir(tmp_path)
    db = str(tmp_path / "m.db")
    assert 0 == run("share", "k", "v", "--tag", "t", "--db", db)
    assert 0 == run("add", "note", "--db", db)
    with SQLiteMemoryStore(db) as store:
        head = store.event_log.head()
    capsys.readouterr()
    assert 1 == run(*args, "--db", db)
    err = capsys.readouterr().err
    assert 1 == len(err.strip().splitlines()) and err.startswith("factledger: error:"), err
    assert "Traceback" not in err
    with SQLiteMemoryStore(db) as store:
        assert head == store.event_log.head()


@pytest.mark.parametrize(
    "command", [("query", "--tag", "t"), ("query", "--tag", "t", "--raw"), ("list",)]
)
def test_terminal_escapes_in_stored_text_are_printed_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: tuple[str, ...]
) -> None:
    """ANSI and OSC sequences in stored values never reach the terminal as control codes."""
    db = str(tmp_path / "m.db")
    hostile = "\x1b]8;;https://attacker.example\x07click\x1b]8;;\x07 \x1b[2J"
    run("share", "k", hostile, "--tag", "t", "--db", db)
    capsys.readouterr()
    assert 0 == run(*command, "--db", db)
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out
    assert "\\u{001B}]8;;" in out


def test_a_read_only_database_reads_and_refuses_writes_from_the_cli(shared_dir: Path) -> None:
    """As a user who may only read the file: `list` works, `add` fails with one clear line."""
    db = shared_dir / "m.db"
    assert 0 == run("add", "kept", "--db", str(db))
    for path in shared_dir.iterdir():
        path.chmod(0o444)
    shared_dir.chmod(0o777)  # the reader may create SQLite's -shm file; the database it may not

    def attempt() -> dict[str, object]:
        outcome: dict[str, object] = {}
        for name, args in (("list", ("list", "--json")), ("add", ("add", "y"))):
            out, err = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = run(*args, "--db", str(db))
            outcome[name] = [code, out.getvalue(), err.getvalue()]
        return outcome

    report = as_reader(attempt)
    listed, added = report["list"], report["add"]
    assert isinstance(listed, list) and isinstance(added, list)
    assert 0 == listed[0] and '"content": "kept"' in listed[1]
    assert 1 == added[0] and "read-only" in added[2] and 1 == len(added[2].strip().splitlines())
