"""Running the `factledger` command in-process, with a clean environment."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from replay.cli import main

RICH_ENV = ("COLUMNS", "FORCE_COLOR", "NO_COLOR", "TTY_COMPATIBLE")
"""The variables that change how rich draws (tests/conftest.py clears factledger's own)."""


class Result(NamedTuple):
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)

    def rows(self) -> list[Any]:
        """The rows of a list command's JSON (`{"rows": [...], "limit": N, "truncated": b}`)."""
        rows: list[Any] = self.json()["rows"]
        return rows


@pytest.fixture(autouse=True)
def plain_terminal_in_tmp_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    for name in RICH_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    yield


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> Callable[..., Result]:
    db = str(tmp_path / "cli.db")

    def run(*args: str, db_path: str | None = db) -> Result:
        argv = [*args, "--db", db_path] if db_path is not None else list(args)
        code = main(argv)
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return run


def log_with_codex_login(cli: Callable[..., Result], pg: Any, tmp_path: Path) -> str:
    """Make `pg`'s log with an operator key (position 1) and bind a login `<prefix>_codex` to
    codex, through the command line; returns the login's name."""
    key = str(tmp_path / "operator.key")
    assert 0 == cli("keygen", key, db_path=None).code
    made = cli(
        "pg", "init", "--operator-key", key, "--dsn", pg.dsn, "--role-prefix", pg.roles,
        db_path=None,
    )  # fmt: skip
    assert 0 == made.code, made.err
    login = f"{pg.roles}_codex"
    bound = cli(
        "pg", "add-agent", login, "--adapter", "codex", "--dsn", pg.dsn,
        "--role-prefix", pg.roles, db_path=None,
    )  # fmt: skip
    assert 0 == bound.code, bound.err
    return login
