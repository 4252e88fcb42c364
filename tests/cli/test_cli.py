"""The factledger command: each command, its exit codes, --json, and errors for bad input."""

from __future__ import annotations

import importlib.metadata
import logging
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from eventlog.logs import get_logger
from replay.cli.logs import logging_to_stderr
from tests.cli.conftest import Result

Cli = Callable[..., Result]
ROOT = Path(__file__).resolve().parents[2]


def test_share_then_query_round_trip(cli: Cli) -> None:
    """share publishes a fact; query shows it; --json parses back to the fact's fields."""
    shared = cli("share", "users", "{name: str}", "--tag", "api-schema", "--json")
    assert 0 == shared.code
    assert ("api-schema", "users", "project", 1) == tuple(
        shared.json()[k] for k in ("tag", "key", "scope", "position")
    )
    queried = cli("query", "--tag", "api-schema", "--json")
    assert [("users", "{name: str}")] == [(f["key"], f["value"]) for f in queried.rows()]
    assert "users" in cli("query", "--tag", "api-schema").out


def test_query_redacts_by_default_and_raw_shows_verbatim(cli: Cli) -> None:
    """query masks personal data unless --raw, in both text and JSON output."""
    cli("share", "contact", "mail bob@example.com or 555-123-4567", "--tag", "people")
    redacted = cli("query", "--tag", "people", "--json").rows()[0]["value"]
    raw = cli("query", "--tag", "people", "--raw", "--json").rows()[0]["value"]
    assert "mail [REDACTED] or [REDACTED]" == redacted
    assert "mail bob@example.com or 555-123-4567" == raw
    assert "bob@example.com" not in cli("query", "--tag", "people").out


def test_attribution_comes_from_the_environment(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    """Producer, run and adapter come from FACTLEDGER_* variables, else BERNSTEIN_* ones."""
    assert "manual-cli" == cli("share", "k", "v", "--tag", "t", "--json").json()["producer_task_id"]
    monkeypatch.setenv("FACTLEDGER_TASK_ID", "fl-task")
    monkeypatch.setenv("FACTLEDGER_RUN_ID", "fl-run")
    monkeypatch.setenv("FACTLEDGER_ADAPTER", "codex")
    monkeypatch.setenv("BERNSTEIN_ADAPTER", "ignored-because-factledger-wins")
    fact = cli("share", "k", "v2", "--tag", "t", "--json").json()
    assert ("fl-task", "fl-run", "codex") == (
        fact["producer_task_id"],
        fact["run_id"],
        fact["source_adapter"],
    )
    monkeypatch.setenv("BERNSTEIN_TASK_ID", "bern-task")
    monkeypatch.setenv("BERNSTEIN_RUN_ID", "bern-run")
    fact = cli("share", "k", "v3", "--tag", "t", "--json").json()
    assert ("fl-task", "fl-run", "codex") == (
        fact["producer_task_id"],
        fact["run_id"],
        fact["source_adapter"],
    )
    for name in ("FACTLEDGER_TASK_ID", "FACTLEDGER_RUN_ID", "FACTLEDGER_ADAPTER"):
        monkeypatch.delenv(name)
    fact = cli("share", "k", "v4", "--tag", "t", "--json").json()
    assert ("bern-task", "bern-run", "ignored-because-factledger-wins") == (
        fact["producer_task_id"],
        fact["run_id"],
        fact["source_adapter"],
    )


def test_run_scope_uses_the_run_from_the_environment(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--scope run needs a run id; facts are seen only within that run."""
    failed = cli("share", "k", "v", "--tag", "t", "--scope", "run")
    assert (1, "") == (failed.code, failed.out)
    assert "--scope run needs a run id: set FACTLEDGER_RUN_ID" in failed.err
    monkeypatch.setenv("FACTLEDGER_RUN_ID", "run-a")
    cli("share", "k", "in a", "--tag", "t", "--scope", "run")
    monkeypatch.setenv("FACTLEDGER_RUN_ID", "run-b")
    assert [] == cli("query", "--tag", "t", "--scope", "run", "--json").rows()


def test_add_list_remove(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    """add stamps the environment's adapter; list filters; remove hides and reports."""
    monkeypatch.setenv("FACTLEDGER_ADAPTER", "codex")
    assert (
        0 == cli("add", "use ruff", "--type", "convention", "--tag", "python", "--tag", "lint").code
    )
    monkeypatch.delenv("FACTLEDGER_ADAPTER")
    cli("add", "pytest -q", "--tag", "tests")
    entries = cli("list", "--json").rows()
    assert [("pytest -q", None), ("use ruff", "codex")] == [
        (e["content"], e["source_adapter"]) for e in entries
    ]
    assert ["use ruff"] == [e["content"] for e in cli("list", "--tag", "lint", "--json").rows()]
    assert ["use ruff"] == [
        e["content"] for e in cli("list", "--adapter", "codex", "--json").rows()
    ]
    assert 0 == cli("remove", "1").code
    missing = cli("remove", "1")
    assert (1, "factledger: error: no visible entry #1\n") == (missing.code, missing.err)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("share", "k", "v", "--tag", "a,b"), "must not contain ','"),
        (("share", "", "v", "--tag", "t"), "key"),
        (("share", "k", "v"), "--tag"),
        (("share", "k", "v", "--tag", "t", "--scope", "galaxy"), "'galaxy' is not one of"),
        (("add", "x", "--type", "gossip"), "'gossip' is not one of 'convention', 'cross_task'"),
        (("add", "x", "--tag", "%"), None),
        (("add", "x", "--importance", "2"), "between 0.0 and 1.0"),
        (("add", "x", "--importance", "high"), "'high' is not a valid float"),
        (("list", "--limit", "0"), "at least 1"),
        (("remove", "abc"), "'abc' is not a valid integer"),
        (("remove", "0"), "Invalid value for 'ID': must be at least 1, got 0"),
        (("quarantine", "--reason", "r"), "at least one of --adapter, --producer and --position"),
        (("release", "1", "--reason", "r"), "not a quarantine"),
        (("blast-radius",), "needs a selector"),
        (("frobnicate",), "No such command 'frobnicate'"),
    ],
)
def test_bad_input_is_one_line_and_exit_1(
    cli: Cli, args: tuple[str, ...], message: str | None
) -> None:
    """Bad input gives one clear line on stderr and exit code 1, never a traceback; '%' is a tag."""
    cli("share", "seed", "v", "--tag", "t")
    result = cli(*args)
    if message is None:
        assert 0 == result.code
        return
    assert 1 == result.code
    assert 1 == len(result.err.strip().splitlines()), result.err
    assert result.err.startswith("factledger: error:") and message in result.err
    assert "Traceback" not in result.err


def test_reading_a_missing_database_does_not_create_it(cli: Cli, tmp_path: Path) -> None:
    """Read commands on a missing database fail clearly and create nothing."""
    missing = tmp_path / "nowhere" / "x.db"
    for command in (("query", "--tag", "t"), ("list",), ("verify",), ("export",)):
        result = cli(*command, db_path=str(missing))
        assert 1 == result.code and "no database at" in result.err
    assert not missing.exists()


def test_default_database_path(cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without --db the database is $FACTLEDGER_DB, else .sdd/memory/memory.db."""
    assert 0 == cli("add", "x", db_path=None).code
    assert (tmp_path / ".sdd" / "memory" / "memory.db").exists()
    monkeypatch.setenv("FACTLEDGER_DB", str(tmp_path / "env.db"))
    assert 0 == cli("add", "y", db_path=None).code
    assert (tmp_path / "env.db").exists()


def test_forensics_commands(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    """blast-radius, quarantine and release work from the shell, with --json."""
    cli("share", "users", "good", "--tag", "api")
    monkeypatch.setenv("FACTLEDGER_ADAPTER", "evil")
    cli("share", "users", "POISON", "--tag", "api")
    monkeypatch.delenv("FACTLEDGER_ADAPTER")
    radius = cli("blast-radius", "--adapter", "evil", "--json").json()
    assert ([2], [1]) == (
        [e["position"] for e in radius["events"]],
        [r["other_position"] for r in radius["overwritten"]],
    )
    held = cli("quarantine", "--adapter", "evil", "--reason", "poisoned", "--json").json()
    assert ["good"] == [f["value"] for f in cli("query", "--tag", "api", "--json").rows()]
    cli("release", str(held["quarantine_position"]), "--reason", "false alarm")
    assert ["POISON"] == [f["value"] for f in cli("query", "--tag", "api", "--json").rows()]


def test_export_and_import_legacy(cli: Cli, tmp_path: Path) -> None:
    """export writes JSON Lines; import-legacy imports a legacy file once."""
    from tests.projections.test_legacy import ROWS, legacy_file

    legacy = tmp_path / "legacy.db"
    legacy_file(legacy, ROWS)
    first = cli("import-legacy", str(legacy), "--json").json()
    again = cli("import-legacy", str(legacy), "--json").json()
    assert (3, 0) == (first["imported"], again["imported"])
    out = tmp_path / "log.jsonl"
    assert 0 == cli("export", "--out", str(out)).code
    assert 4 == len(out.read_text().splitlines())
    assert 4 == len(cli("export").out.splitlines())


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    """--version prints the installed distribution's version, which every package exports."""
    import eventlog
    import projections
    import replay
    from replay.cli import main

    installed = importlib.metadata.version("factledger")
    assert 0 == main(["--version"])
    assert f"factledger {installed}\n" == capsys.readouterr().out
    assert [installed] * 3 == [eventlog.__version__, projections.__version__, replay.__version__]


def test_every_command_has_help(capsys: pytest.CaptureFixture[str]) -> None:
    """Each subcommand prints help text that names what it does, and exits 0."""
    from replay.cli import app, main

    for name, command in app.commands.items():
        assert command.help
        assert 0 == main([name, "--help"])
        out = " ".join(capsys.readouterr().out.split())
        assert f"Usage: factledger {name}" in out and " ".join(command.help.split()) in out


@pytest.mark.parametrize("group", [[], ["operator"], ["pg"], ["policy"]], ids=str)
def test_command_lists_show_each_summary_whole(
    group: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """The command list of the tool and of each command group cuts no summary short: each
    is its help's first paragraph, whole (wrapped, never ending in "...")."""
    from replay.cli import app, main

    assert 0 == main([*group, "--help"])
    out = " ".join(capsys.readouterr().out.split())
    parent = app
    for name in group:
        parent = parent.commands[name]  # type: ignore[attr-defined]
    for command in parent.commands.values():  # type: ignore[attr-defined]
        assert " ".join((command.help or "").split("\n\n")[0].split()) in out
    assert "..." not in out.split("Commands:")[1]


def _run(
    *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        args,
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
    )


def test_console_script_and_python_m_replay(tmp_path: Path) -> None:
    """`factledger` and `python -m replay` run the same command line, in real processes."""
    db = str(tmp_path / "p.db")
    script = Path(sys.executable).with_name("factledger")
    shared = _run(str(script), "share", "k", "v", "--tag", "t", "--db", db)
    assert (0, f"factledger: created a new factledger log at {db}\n") == (
        shared.returncode,
        shared.stderr,
    )
    queried = _run(sys.executable, "-m", "replay", "query", "--tag", "t", "--db", db, "--json")
    assert 0 == queried.returncode and '"value": "v"' in queried.stdout
    bad = _run(sys.executable, "-m", "replay", "share", "k", "v", "--tag", "a,b", "--db", db)
    assert 1 == bad.returncode and "Traceback" not in bad.stderr


def test_library_warnings_go_to_stderr_not_stdout(tmp_path: Path) -> None:
    """An overwrite warning (another adapter replacing a fact) is logged to stderr, with its
    fields, and never mixes into --json output on stdout."""
    db = str(tmp_path / "w.db")
    _run(sys.executable, "-m", "replay", "share", "k", "v1", "--tag", "t", "--db", db)
    second = _run(
        sys.executable,
        "-m",
        "replay",
        "share",
        "k",
        "v2",
        "--tag",
        "t",
        "--db",
        db,
        "--json",
        env={"FACTLEDGER_ADAPTER": "codex"},
    )
    assert "previous_position=1" in second.stderr
    assert '"position": 2' in second.stdout and "fact_overwritten" not in second.stdout
    assert "fact_overwritten" in second.stderr


def test_db_and_json_go_before_or_after_the_command(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`factledger --db X add ...` works as `factledger add --db X ...`; after the command
    wins when both are given; leaving them out after the command keeps what came before."""
    first, second = str(tmp_path / "first.db"), str(tmp_path / "second.db")
    assert 0 == cli("--db", first, "add", "before", db_path=None).code
    assert 0 == cli("--db", first, "add", "both", "--db", second, db_path=None).code
    listed = cli("--db", first, "--json", "list", db_path=None).rows()
    assert ["before"] == [entry["content"] for entry in listed]
    assert ["both"] == [entry["content"] for entry in cli("list", "--json", db_path=second).rows()]
    monkeypatch.setenv("FACTLEDGER_DB", first)
    assert "before" in cli("list", db_path=None).out


def test_other_libraries_reach_stderr_only_at_error_as_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """While a command runs, another library's warning prints nothing and its error prints
    one line naming its logger, traceback left out; factledger's own warnings keep their
    fields; after the command, logging is as it was."""
    root, own = logging.getLogger(), logging.getLogger("factledger")
    before = (list(root.handlers), list(own.handlers), own.level, own.propagate, root.level)
    other = logging.getLogger("some.driver")
    with logging_to_stderr():
        other.warning("housekeeping you need not see")
        try:
            raise ValueError("inner")
        except ValueError:
            other.exception("the driver failed\nwith a second line")
        get_logger("factledger.test").warning("own_warning", position=7)
    err = capsys.readouterr().err
    assert "housekeeping" not in err
    assert "some.driver: the driver failed" in err.splitlines()
    assert "second line" not in err and "Traceback" not in err and "inner" not in err
    assert "own_warning" in err and "position=7" in err
    assert 1 == err.count("own_warning")
    assert before == (list(root.handlers), list(own.handlers), own.level, own.propagate, root.level)


def test_an_output_that_is_a_pipe_is_written_in_place_not_replaced(
    cli: Cli, tmp_path: Path
) -> None:
    """`--out` naming a FIFO (or a device such as /dev/null) is written as a shell's `>`
    writes it: replacing it would leave a regular file where the pipe or device was (as
    root, `export --out /dev/null` once replaced /dev/null)."""
    import stat
    import threading

    assert 0 == cli("add", "a note", "--tag", "t").code
    fifo = tmp_path / "out.pipe"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()), daemon=True)
    reader.start()
    assert 0 == cli("export", "--out", str(fifo)).code
    reader.join(timeout=30)
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    assert 2 == len(received[0].decode().splitlines())
    assert [fifo.name] == [p.name for p in tmp_path.iterdir() if p.name.startswith((".out", "out"))]
