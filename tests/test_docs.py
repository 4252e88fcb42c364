"""README is the manual: its commands work, its examples run, every command is documented."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from eventlog import open_log
from eventlog.contract import EVERY_KIND, fact
from projections.environment import SETTINGS
from replay.cli import app

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
BLOCKS = re.findall(r"```(\w*)\n(.*?)```", README, flags=re.DOTALL)
ExportVerifier = Callable[[Path], int]


SPEC = (ROOT / "docs" / "spec" / "format-v2.md").read_text(encoding="utf-8")


def readme_export_verifier(db: Path, export: Path) -> ExportVerifier:
    """The format's offline verifier (docs/spec/format-v2.md, "Verifying an export offline"),
    run as written on an export of `db` it writes to `export`; returns its `verify_export`."""
    section = SPEC[SPEC.index("\n## Verifying an export offline\n") :]
    [code] = re.findall(r"```python\n(.*?)```", section.split("\n## ", 2)[1], flags=re.DOTALL)
    assert '"memory.db"' in code and '"log.jsonl"' in code
    namespace: dict[str, Any] = {}
    code = code.replace('"memory.db"', repr(str(db))).replace('"log.jsonl"', repr(str(export)))
    exec(compile(code, "format-v2.md", "exec"), namespace)
    verify_export: ExportVerifier = namespace["verify_export"]
    return verify_export


def test_readme_opens_with_install_and_run_then_test() -> None:
    """The first block is two commands: install and run the demo, then run the tests."""
    language, first = BLOCKS[0]
    lines = first.strip().splitlines()
    assert ("sh", 2) == (language, len(lines))
    assert "pip install -e '.[dev]'" in lines[0] and lines[0].endswith("factledger demo")
    assert ".venv/bin/python -m pytest" == lines[1]
    assert README.index("```") < README.index("\n## ")


def test_ci_installs_and_tests_exactly_as_readme_says() -> None:
    """.ci/run makes a fresh venv, installs as README says, and runs README's test command."""
    ci = (ROOT / ".ci" / "run").read_text()
    assert "python3 -m venv .venv" in ci
    assert "-m pip install --quiet -e '.[dev]'" in ci
    assert ".venv/bin/python -m pytest" in ci.splitlines()[-1]


def test_ci_first_runs_what_users_install() -> None:
    """Before the suite, .ci/run builds the wheel, installs it (not editable) with its extras
    outside the checkout, and runs the command line, the demo and an MCP round trip there."""
    ci = (ROOT / ".ci" / "run").read_text()
    suite = ci.index("-m pip install --quiet -e '.[dev]'")
    for step in (
        "pip wheel --quiet --no-deps",
        'pip install --quiet "${WHEELS[0]}[postgres,mcp]"',
        'cd "$WORK"',
        "user-env/bin/factledger --version",
        "user-env/bin/factledger demo",
        "user-env/bin/python mcp_round_trip.py",
    ):
        assert ci.index(step) < suite, step
    assert "mktemp -d" in ci and (ROOT / ".ci" / "mcp_round_trip.py").is_file()


@pytest.mark.parametrize("command", sorted(app.commands))
def test_every_command_is_documented(command: str) -> None:
    """Each `factledger` subcommand appears in README's command table and has help text."""
    assert f"| `factledger {command}" in README
    assert app.commands[command].help


def test_the_environment_table_is_the_modules_table() -> None:
    """README's one table of environment variables lists exactly projections.environment's
    settings: their variables in precedence order, defaults and meanings; the Development
    section alone names the test suite's own variables."""
    section = README.split("\n## The environment\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    expected = [
        " | ".join(
            (
                f"| `{setting.variables[0]}`",
                f"`{setting.variables[1]}`" if len(setting.variables) > 1 else "-",
                f"`{setting.default}`" if setting.default else "none",
                f"{setting.meaning} |",
            )
        )
        for setting in SETTINGS
    ]
    assert expected == rows
    product, development = README.split("\n## Development\n", 1)
    named = set(re.findall(r"`((?:FACTLEDGER|BERNSTEIN)_[A-Z_]+)`", product))
    assert {name for setting in SETTINGS for name in setting.variables} == named
    test_suite = set(re.findall(r"`((?:FACTLEDGER|BERNSTEIN)_[A-Z_]+)`", development))
    assert {"FACTLEDGER_TEST_DSN", "FACTLEDGER_REQUIRE_PG"} == test_suite


def test_python_examples_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every python block in README runs, in order, in one namespace, in an empty folder."""
    for name in (
        "FACTLEDGER_TRUST_POLICY",
        "FACTLEDGER_TRUST_ADAPTERS",
        "BERNSTEIN_MEMORY_TRUST_POLICY",
        "BERNSTEIN_MEMORY_TRUST_ADAPTERS",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {}
    examples = [code for language, code in BLOCKS if language == "python"]
    assert len(examples) >= 3
    for code in examples:
        exec(compile(code, "format-v2.md", "exec"), namespace)
    assert (tmp_path / "log.jsonl").exists()


@pytest.fixture
def exported(tmp_path: Path) -> tuple[ExportVerifier, list[str]]:
    """A log holding every event kind, exported; README's verifier, and the export's lines."""
    db, export = tmp_path / "memory.db", tmp_path / "log.jsonl"
    log = open_log(db)
    log.append_many([*EVERY_KIND, fact("k", "naïve café 日本語", source_adapter="codex")])
    log.close()
    verify_export = readme_export_verifier(db, export)
    lines = export.read_text(encoding="utf-8").splitlines()
    assert len(EVERY_KIND) + 1 == verify_export(export)
    return verify_export, lines


def rewritten(line: str, field: str, value: object) -> str:
    """An export line with one top-level field (or a payload field, `payload.NAME`) rewritten."""
    event = json.loads(line)
    if field.startswith("payload."):
        event["payload"][field.removeprefix("payload.")] = value
    else:
        event[field] = value
    return json.dumps(event)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("source_adapter", "operator"),
        ("source_adapter", None),
        ("producer_task_id", "backend-7"),
        ("run_id", "run-9"),
        ("event_id", "op:forged"),
        ("kind", "memory_added"),
        ("ts_ns", 1),
        ("position", 3),
        ("content_hash", "blake3:" + "0" * 64),
        ("payload.value", "POISON"),
        ("payload.key", "admins"),
        ("payload.scope", 1),
        ("trusted", True),
    ],
)
def test_the_offline_verifier_refuses_a_rewritten_top_level_field(
    exported: tuple[ExportVerifier, list[str]], tmp_path: Path, field: str, value: object
) -> None:
    """Only `body` is hashed: a line whose readable fields say other than its `body` (another
    adapter, task, run, id, kind, time, position, hash or payload, or a field `body` lacks)
    is refused by README's verifier, though its chain still re-hashes."""
    verify_export, lines = exported
    tampered = tmp_path / "tampered.jsonl"
    lines[2] = rewritten(lines[2], field, value)
    tampered.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(AssertionError):
        verify_export(tampered)


@pytest.mark.parametrize(
    ("line", "prefix"), [(0, '{"events":0,'), (2, '{"source_adapter":"operator",')]
)
def test_the_offline_verifier_refuses_a_key_that_reads_two_ways(
    exported: tuple[ExportVerifier, list[str]], tmp_path: Path, line: int, prefix: str
) -> None:
    """A repeated key (the first read by one tool, the last by another) is refused."""
    verify_export, lines = exported
    lines[line] = prefix + lines[line][1:]
    tampered = tmp_path / "tampered.jsonl"
    tampered.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(AssertionError):
        verify_export(tampered)


@pytest.mark.parametrize(
    ("field", "value"),
    [("events", 99), ("format", "factledger-export/9"), ("head_chain_hash", "0" * 64)],
)
def test_the_offline_verifier_refuses_a_rewritten_header(
    exported: tuple[ExportVerifier, list[str]], tmp_path: Path, field: str, value: object
) -> None:
    """A header that miscounts the events, names another format or another head is refused."""
    verify_export, lines = exported
    lines[0] = rewritten(lines[0], field, value)
    tampered = tmp_path / "tampered.jsonl"
    tampered.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(AssertionError):
        verify_export(tampered)
