"""README is the manual: its commands work, its examples run, every command is documented."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from projections.environment import SETTINGS
from replay.cli import app

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
BLOCKS = re.findall(r"```(\w*)\n(.*?)```", README, flags=re.DOTALL)


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
        exec(compile(code, "README.md", "exec"), namespace)
    assert (tmp_path / "log.jsonl").exists()
