"""The command line under careless use: output files are replaced only when complete,
unreadable inputs get one line, content comes from an argument, standard input or a file,
long outputs are cut and say so, new logs are announced and reads create nothing, and every
message names the flag or variable to change."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from eventlog import MAX_CONTENT_BYTES
from projections import (
    SQLiteMemoryStore,
)
from projections.internal import (
    MEMORY_TYPES,
)
from tests.cli.conftest import Result

Cli = Callable[..., Result]
ROOT = Path(__file__).resolve().parents[2]
BINARY = b"\x89PNG\r\n\x1a\n\x00\xff\xfe" * 8
LIBRARY_NAMES = (
    "source_adapter",
    "producer_task_id",
    "run_id",
    "read_only_from_adapters",
    "entry_id",
    "positions",
    "this facade",
)
"""Parameter names of the library, which no command line message should ask a user for."""


def one_line(result: Result) -> str:
    """The single stderr line of a failed command, checked to be one and to name no library
    parameter."""
    assert 1 == result.code, result
    lines = result.err.strip().splitlines()
    assert 1 == len(lines) and lines[0].startswith("factledger: error:"), result.err
    assert not [name for name in LIBRARY_NAMES if name in lines[0]], lines[0]
    return lines[0]


# -- output files ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "command", [("export", "--out"), ("checkpoint", "--out")], ids=["export", "checkpoint"]
)
def test_a_failed_command_leaves_its_output_file_as_it_was(
    cli: Cli, tmp_path: Path, command: tuple[str, str]
) -> None:
    """`--db` names a file that is not a log: the command fails and `precious.txt` keeps
    every byte; no temporary file is left beside it."""
    precious = tmp_path / "precious.txt"
    precious.write_text("keep me\n")
    not_a_log = tmp_path / "notes.db"
    sqlite3.connect(not_a_log).execute("CREATE TABLE notes (body TEXT)").connection.close()
    one_line(cli(*command, str(precious), db_path=str(not_a_log)))
    assert "keep me\n" == precious.read_text()
    assert ["notes.db", "precious.txt"] == sorted(p.name for p in tmp_path.iterdir())


def test_a_completed_export_replaces_the_file_keeping_its_mode(cli: Cli, tmp_path: Path) -> None:
    """The export is written beside the file and renamed over it once complete."""
    cli("add", "x")
    out = tmp_path / "log.jsonl"
    out.write_text("old\n")
    out.chmod(0o640)
    assert 0 == cli("export", "--out", str(out)).code
    assert 2 == len(out.read_text().splitlines())
    assert 0o640 == out.stat().st_mode & 0o777


# -- unreadable inputs ---------------------------------------------------------------------------


def test_binary_or_unreadable_checkpoint_and_key_files_get_one_line(
    cli: Cli, tmp_path: Path
) -> None:
    """A binary file, a directory or a missing file as --checkpoint, --key or --pub: one
    line, never "internal error"."""
    cli("add", "x")
    binary = tmp_path / "blob.bin"
    binary.write_bytes(BINARY)
    binary.chmod(0o600)
    for args in (
        ("verify", "--checkpoint", str(binary)),
        ("verify", "--checkpoint", str(tmp_path)),
        ("verify", "--checkpoint", str(tmp_path / "missing.txt")),
        ("prove", "1", "--checkpoint", str(binary)),
        ("checkpoint", "--key", str(binary)),
        ("quarantine", "--position", "1", "--reason", "r", "--key", str(binary)),
    ):
        line = one_line(cli(*args))
        assert "internal error" not in line and "Traceback" not in line
    assert "not UTF-8 text" in one_line(cli("verify", "--checkpoint", str(binary)))


def test_a_named_pipe_as_a_key_or_checkpoint_file_gets_one_line_at_once(tmp_path: Path) -> None:
    """A FIFO as --key or --checkpoint, in a real process: one line naming it a pipe, exit 1,
    and no wait for a writer (the process would be killed after 60 s)."""
    db = str(tmp_path / "p.db")
    with SQLiteMemoryStore(db) as store:
        store.add("learning", "x")
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo, 0o600)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for args in (("checkpoint", "--key", str(fifo)), ("verify", "--checkpoint", str(fifo))):
        done = subprocess.run(
            [sys.executable, "-m", "replay", *args, "--db", db],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
            check=False,
        )
        assert 1 == done.returncode and 1 == len(done.stderr.splitlines()), done.stderr
        assert f"{fifo} is a named pipe (FIFO), not a regular file" in done.stderr


def test_an_unsigned_checkpoint_is_reported_as_unsigned(cli: Cli, tmp_path: Path) -> None:
    """--pub on a checkpoint taken without a key says it carries no signature (exit 1), not
    that a signature failed."""
    cli("add", "x")
    key = tmp_path / "op.key"
    cli("keygen", str(key))
    taken = tmp_path / "cp.txt"
    cli("checkpoint", "--out", str(taken))
    line = one_line(cli("verify", "--checkpoint", str(taken), "--pub", f"{key}.pub"))
    assert "carries no signature" in line


# -- content from an argument, standard input or a file ------------------------------------------


def test_content_comes_from_stdin_or_a_file_beyond_one_arguments_limit(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`add -` reads standard input, `add --file PATH` and `share KEY --file PATH` read a
    file: 600 KiB (more than one argument may carry) is stored whole."""
    big = "line of text\n" * (600 * 1024 // 13)
    source = tmp_path / "big.txt"
    source.write_text(big)
    monkeypatch.setattr(sys, "stdin", _Stdin("from stdin\n"))
    assert 0 == cli("add", "-", "--tag", "t").code
    assert 0 == cli("add", "--file", str(source)).code
    assert 0 == cli("share", "doc", "--file", str(source), "--tag", "t").code
    with SQLiteMemoryStore(tmp_path / "cli.db") as store:
        contents = [e.content for e in store.list(limit=10)]
    assert big in contents and "from stdin\n" in contents
    assert big == cli("query", "--tag", "t", "--raw", "--json").json()[0]["value"]


def test_content_over_the_limit_empty_or_blank_is_refused(cli: Cli, tmp_path: Path) -> None:
    """Over 1 MiB, empty and whitespace-only content: one line each, nothing written; naming
    both CONTENT and --file is a usage error."""
    huge = tmp_path / "huge.txt"
    huge.write_bytes(b"x" * (MAX_CONTENT_BYTES + 1))
    blank = tmp_path / "blank.txt"
    blank.write_text(" \n\t\n")
    binary = tmp_path / "blob.bin"
    binary.write_bytes(BINARY)
    for args in (
        ("add", "--file", str(huge)),
        ("add", ""),
        ("add", "   "),
        ("add", "--file", str(blank)),
        ("add", "--file", str(binary)),
        ("add", "--file", str(tmp_path / "missing.txt")),
        ("add",),
        ("add", "x", "--file", str(blank)),
        ("share", "k", "", "--tag", "t"),
        ("share", "k", "--tag", "t"),
    ):
        one_line(cli(*args))
    assert not (tmp_path / "cli.db").exists()
    assert "empty or only whitespace" in one_line(cli("add", " \n "))


class _Stdin:
    def __init__(self, text: str) -> None:
        self.buffer = _Buffer(text.encode())


class _Buffer:
    def __init__(self, data: bytes) -> None:
        self.data = data

    def read(self, size: int = -1) -> bytes:
        return self.data if size < 0 else self.data[:size]


# -- limits ------------------------------------------------------------------------------------


def test_long_outputs_are_cut_at_limit_and_say_so(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """history, blast-radius, diff and list show at most --limit rows per list, and say on
    stderr what they cut and how to see more; JSON is cut alike."""
    for n in range(5):
        cli("share", "k", f"v{n}", "--tag", "t")
    monkeypatch.setenv("FACTLEDGER_ADAPTER", "evil-cli")
    for n in range(3):
        cli("add", f"note {n}", "--tag", "t")
        cli("share", f"e{n}", "x", "--tag", "t")
    monkeypatch.delenv("FACTLEDGER_ADAPTER")
    history = cli("history", "--tag", "t", "--limit", "2", "--json")
    assert [9, 11] == [v["position"] for v in history.json()["versions"]]
    assert "showing the newest 2 of 8 versions (--limit N shows more)" in history.err
    radius = cli("blast-radius", "--adapter", "evil-cli", "--limit", "2", "--json")
    assert 2 == len(radius.json()["events"]) and "the first 2 of 6 events" in radius.err
    changes = cli("diff", "0", "11", "--limit", "1", "--json")
    assert 1 == len(changes.json()["added"]) and "the first 1 of 4 added" in changes.err
    listed = cli("list", "--limit", "3", "--json")
    assert 3 == len(listed.json()) and "showing the newest 3 entries" in listed.err
    assert "" == cli("list", "--limit", "50").err
    for args in (("history", "--limit", "0"), ("diff", "0", "1", "--limit", "-1")):
        assert "--limit" in one_line(cli(*args))


# -- new logs are announced; reads create nothing ------------------------------------------------


def test_a_write_that_starts_a_log_says_so_and_reads_create_nothing(
    cli: Cli, tmp_path: Path
) -> None:
    """A mistyped --db on a write is noticed on stderr; every read of a missing file fails
    and creates nothing, and a read of an existing file that is not a log writes nothing."""
    typo = tmp_path / "memroy.db"
    first = cli("add", "x", db_path=str(typo))
    assert (0, f"factledger: created a new factledger log at {typo}\n") == (first.code, first.err)
    assert "" == cli("add", "y", db_path=str(typo)).err
    missing = tmp_path / "absent" / "x.db"
    for args in (
        ("query", "--tag", "t"),
        ("list",),
        ("history",),
        ("blame",),
        ("diff", "0", "1"),
        ("as-of", "--position", "1"),
        ("verify",),
        ("checkpoint",),
        ("blast-radius", "--adapter", "x"),
        ("export",),
        ("remove", "1"),
    ):
        assert "no database at" in one_line(cli(*args, db_path=str(missing)))
    assert not missing.parent.exists()
    empty = tmp_path / "empty.db"
    empty.touch()
    for args in (("query", "--tag", "t"), ("list",), ("remove", "1"), ("history",)):
        assert "holds no factledger log" in one_line(cli(*args, db_path=str(empty)))
    assert 0 == empty.stat().st_size


# -- messages name flags and variables ----------------------------------------------------------


@pytest.mark.parametrize(
    ("variable", "value", "args"),
    [
        ("FACTLEDGER_ADAPTER", "claude\u200bcode", ("add", "x")),
        ("BERNSTEIN_ADAPTER", "\u0441laude-code", ("share", "k", "v", "--tag", "t")),
        ("FACTLEDGER_TASK_ID", "task 1", ("add", "x")),
        ("FACTLEDGER_RUN_ID", "run\u20101", ("share", "k", "v", "--tag", "t")),
        ("FACTLEDGER_ADAPTER", "co\u200bdex", ("query", "--tag", "t")),
        ("FACTLEDGER_ADAPTER", "co\u200bdex", ("quarantine", "--adapter", "x", "--reason", "r")),
        ("FACTLEDGER_TRUST_ADAPTERS", "codex,bad\nname", ("list",)),
    ],
    ids=["adapter", "bernstein-adapter", "task", "run", "reader", "quarantine", "trust-list"],
)
def test_a_bad_environment_value_is_named_by_its_variable(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, variable: str, value: str, args: tuple[str, ...]
) -> None:
    """A lookalike or malformed value from the environment is refused under the name of the
    variable that set it, and the log is left as it was."""
    cli("add", "seed")
    monkeypatch.setenv(variable, value)
    assert variable in one_line(cli(*args))
    monkeypatch.delenv(variable)
    assert 1 == len(cli("list", "--json").json())


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (("add", "x", "--task-id", "t\u200b1"), "'--task-id'"),
        (("add", "x", "--tag", "api\u200b"), "'--tag'"),
        (("share", "k", "v", "--tag", "\u3164"), "'--tag'"),
        (("share", "k", "v", "--tag", "t", "--scope", "run"), "FACTLEDGER_RUN_ID"),
        (("list", "--adapter", ""), "'--adapter'"),
        (("remove", "0"), "'ID'"),
        (("blast-radius",), "--adapter, --producer and --position"),
        (("quarantine", "--reason", "r"), "--adapter, --producer and --position"),
        (("history", "--run", "r\x01"), "'--run'"),
    ],
    ids=["task-id", "tag", "tag-filler", "run-scope", "adapter", "id", "selector", "q-sel", "run"],
)
def test_a_bad_argument_is_named_by_its_flag(cli: Cli, args: tuple[str, ...], flag: str) -> None:
    """The message names what the user typed, never a library parameter."""
    cli("add", "seed")
    assert flag in one_line(cli(*args))


def test_help_lists_the_valid_types_and_scopes(cli: Cli) -> None:
    """`add --help` and `list --help` list every memory type; `share` and `query` the scopes."""
    for command in ("add", "list"):
        text = " ".join(cli(command, "--help", db_path=None).out.split())
        assert all(kind in text for kind in MEMORY_TYPES), text
    for command in ("share", "query"):
        assert "[project|run]" in cli(command, "--help", db_path=None).out


def test_a_real_process_reads_content_from_a_pipe(tmp_path: Path) -> None:
    """`echo ... | factledger add -` in a real process."""
    db = str(tmp_path / "p.db")
    done = subprocess.run(
        [sys.executable, "-m", "replay", "add", "-", "--db", db],
        input="piped note\n",
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert 0 == done.returncode, done.stderr
    with SQLiteMemoryStore(db) as store:
        assert ["piped note\n"] == [e.content for e in store.list()]
