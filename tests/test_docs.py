"""README and docs/ are the manual: their commands work, every code block runs on its own,
every command is documented, and docs/cli.md is the commands' own help."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from eventlog import open_log
from eventlog.contract import EVERY_KIND, fact
from projections._environment import SETTINGS
from replay import export_log
from replay.cli import app
from replay.cli.docs import REGENERATE, reference

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
BLOCKS = re.findall(r"```(\w*)\n(.*?)```", README, flags=re.DOTALL)
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
EXPORT_SPEC = ROOT / "docs" / "spec" / "export.md"
RUN = {"python", "sh"}
"""Blocks that run: python in a fresh namespace, sh with bash and the installed `factledger`,
each in an empty folder of its own."""
NOT_RUN = {
    "console": "commands that install, change a server (createdb, DROP) or run this suite",
    "json": "an MCP client's configuration (tests/mcp/test_server.py checks its flags)",
    "toml": "an MCP client's configuration (tests/mcp/test_server.py checks its flags)",
    "text": "a format's layout, or a command's help (generated)",
}
"""Blocks shown, never run, by their info string."""
PLACEHOLDERS = re.compile(r"^(?:export )?(FACTLEDGER_DSN|ROLES|AGENT_DSN)=")
"""A shell block that opens by naming a server, a role prefix and an agent's login needs
PostgreSQL: the test drops those lines and sets the three variables to a schema of its own."""
EXPECTED_OUTPUT = {("README.md", "Many hosts"): ("https://api.internal", "codex")}
"""What a block's output must show, beyond its commands all exiting 0."""
ExportVerifier = Callable[[Path], list[bytes]]


@dataclass(frozen=True)
class Block:
    """One fenced code block of a document."""

    document: str
    line: int
    section: str
    language: str
    code: str

    def __str__(self) -> str:
        return f"{self.document}:{self.line}"


def blocks_of(path: Path) -> list[Block]:
    """Every fenced block in `path`, with the section it sits in."""
    text = path.read_text(encoding="utf-8")
    name = path.relative_to(ROOT).as_posix()
    found = []
    for match in re.finditer(r"^( *)```(\S*)\n(.*?)^\1```$", text, flags=re.DOTALL | re.M):
        before = text[: match.start()]
        headings = re.findall(r"^#+ (.*)$", before, flags=re.M)
        indent = len(match[1])
        code = "\n".join(line[indent:] for line in match[3].splitlines()) + "\n"
        found.append(
            Block(name, before.count("\n") + 1, headings[-1] if headings else "", match[2], code)
        )
    return found


ALL_BLOCKS = [block for path in DOCUMENTS for block in blocks_of(path)]


def docs_export_verifier() -> ExportVerifier:
    """The offline verifier of docs/spec/export.md: its block's imports, constants and
    functions, as written (the rest of the block, which makes a log to verify, left out)."""
    [block] = [b for b in blocks_of(EXPORT_SPEC) if b.language == "python"]
    tree = ast.parse(block.code)
    tree.body = [
        node
        for node in tree.body
        if isinstance(node, ast.Import | ast.ImportFrom | ast.FunctionDef)
        or (
            isinstance(node, ast.Assign)
            and all(isinstance(t, ast.Name) and t.id.isupper() for t in node.targets)
        )
    ]
    namespace: dict[str, Any] = {}
    exec(compile(tree, str(EXPORT_SPEC), "exec"), namespace)
    verify_export: ExportVerifier = namespace["verify_export"]
    return verify_export


def readme_export_verifier(db: Path, export: Path, *, fields: bool = False) -> ExportVerifier:
    """The offline verifier of docs/spec/export.md, and an export of `db` written to
    `export` for it (with `fields`, each line copying its envelope fields)."""
    with export.open("w", encoding="utf-8") as out:
        export_log(db, out, fields=fields)
    return docs_export_verifier()


def test_every_block_says_whether_it_runs() -> None:
    """Each block's info string is one that runs or one that is shown only, and a few are
    shown only."""
    languages = [block.language for block in ALL_BLOCKS]
    assert set(languages) <= RUN | set(NOT_RUN), [str(b) for b in ALL_BLOCKS]
    ran = sum(language in RUN for language in languages)
    assert ran > sum(language in NOT_RUN for language in languages if language != "text")


@pytest.mark.parametrize("block", [b for b in ALL_BLOCKS if b.language == "python"], ids=str)
def test_every_python_block_runs_on_its_own(
    block: Block, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A python block runs alone, in a fresh namespace, in an empty folder."""
    monkeypatch.chdir(tmp_path)
    exec(compile(block.code, str(block), "exec"), {"__name__": "__doc_block__"})


@pytest.mark.parametrize("block", [b for b in ALL_BLOCKS if b.language == "sh"], ids=str)
def test_every_shell_block_runs_on_its_own(
    block: Block, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """A shell block runs with bash, stopping at the first command that fails, with the
    installed `factledger`, in an empty folder that is also its home; one that names a
    PostgreSQL server runs against a schema of its own (and fails, not skips, under
    FACTLEDGER_REQUIRE_PG=1)."""
    lines = block.code.splitlines()
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("FACTLEDGER_", "BERNSTEIN_"))
    }
    env.update(PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}")
    env.update(HOME=str(tmp_path))
    if any(PLACEHOLDERS.match(line) for line in lines):
        pg = request.getfixturevalue("pg")
        lines = [line for line in lines if not PLACEHOLDERS.match(line)]
        env.update(FACTLEDGER_DSN=pg.dsn, ROLES=pg.roles, AGENT_DSN=pg.as_role(f"{pg.roles}_codex"))
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", "\n".join(lines)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert 0 == done.returncode, done.stderr
    for shown in EXPECTED_OUTPUT.get((block.document, block.section), ()):
        assert shown in done.stdout


def test_the_command_reference_is_the_commands_help() -> None:
    """docs/cli.md is what `python -m replay.cli.docs` writes from the commands now."""
    written = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    assert reference() == written, f"docs/cli.md is out of date: run `{REGENERATE}`"


def test_the_command_reference_lists_every_command() -> None:
    """Each command and subcommand has a section of docs/cli.md."""
    written = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    for name, command in app.commands.items():
        assert f"\n## factledger {name}\n" in written
        for sub in getattr(command, "commands", {}):
            assert f"\n## factledger {name} {sub}\n" in written


def test_readme_is_a_page_for_users() -> None:
    """README is at most 400 lines, and its links to docs/ name files that exist."""
    assert len(README.splitlines()) <= 400
    for document in DOCUMENTS:
        text = document.read_text(encoding="utf-8")
        for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", text):
            assert (document.parent / target).exists(), (document.name, target)


def test_readme_opens_with_install_and_run_then_test() -> None:
    """The first block is two commands: install and run the demo, then run the tests."""
    language, first = BLOCKS[0]
    lines = first.strip().splitlines()
    assert ("console", 2) == (language, len(lines))
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
    """README's one table of environment variables lists exactly projections._environment's
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


@pytest.fixture
def exported(tmp_path: Path) -> tuple[ExportVerifier, list[str]]:
    """A log holding every event kind, exported; the documented verifier, and the export's
    lines."""
    db, export = tmp_path / "memory.db", tmp_path / "log.jsonl"
    log = open_log(db)
    log.append_many([*EVERY_KIND, fact("k", "naïve café 日本語", source_adapter="codex")])
    log.close()
    verify_export = readme_export_verifier(db, export, fields=True)
    lines = export.read_text(encoding="utf-8").splitlines()
    assert len(EVERY_KIND) + 1 == len(verify_export(export))
    return verify_export, lines


def rewritten(line: str, field: str, value: object) -> str:
    """An export line with one top-level field (or a copied field, `fields.NAME`) rewritten."""
    event = json.loads(line)
    if field.startswith("fields."):
        event["fields"][field.removeprefix("fields.")] = value
    else:
        event[field] = value
    return json.dumps(event)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("fields.source_adapter", "operator"),
        ("fields.source_adapter", None),
        ("fields.producer_task_id", "backend-7"),
        ("fields.run_id", "run-9"),
        ("fields.event_id", "op:forged"),
        ("fields.kind", "memory_added"),
        ("fields.ts_ns", 1),
        ("fields.position", 3),
        ("fields.trusted", True),
        ("text", "POISON"),
        ("salt", "00" * 32),
        ("text_state", "mismatch"),
        ("source_adapter", "operator"),
        ("trusted", True),
    ],
)
def test_the_offline_verifier_refuses_a_rewritten_top_level_field(
    exported: tuple[ExportVerifier, list[str]], tmp_path: Path, field: str, value: object
) -> None:
    """Only `body` is hashed: a line whose copied fields say other than its `body` (another
    adapter, task, run, id, kind, time or position, or a field `body` lacks), whose text or
    salt does not give its `content_hash`, or that adds a key no export writes, is refused
    by the documented verifier, though its chain still re-hashes."""
    verify_export, lines = exported
    tampered = tmp_path / "tampered.jsonl"
    lines[2] = rewritten(lines[2], field, value)
    tampered.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(AssertionError):
        verify_export(tampered)


@pytest.mark.parametrize(
    ("line", "prefix"), [(0, '{"events":0,'), (2, '{"chain_hash":"' + "0" * 64 + '",')]
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
