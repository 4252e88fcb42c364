"""The command line on a format-v1 log (a copy of tests/data/v1/v1.db): reads, verify and
export exit 0; a write exits 1 with one line naming `factledger migrate`, writing nothing."""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Callable
from pathlib import Path

from tests.cli.conftest import Result

Cli = Callable[..., Result]

DATA = Path(__file__).resolve().parents[1] / "data" / "v1"


def test_reads_work_and_writes_name_migrate(cli: Cli, tmp_path: Path) -> None:
    db = tmp_path / "v1.db"
    shutil.copyfile(DATA / "v1.db", db)
    shutil.copyfile(DATA / "checkpoint.txt", tmp_path / "checkpoint.txt")
    for command in (
        ("list",),
        ("query", "--tag", "backend"),
        ("verify", "--checkpoint", str(tmp_path / "checkpoint.txt")),
        ("history",),
        ("export", "--out", str(tmp_path / "log.jsonl")),
    ):
        result = cli(*command, db_path=str(db))
        assert 0 == result.code, (command, result.err)
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    refused = cli("add", "a new note", "--tag", "backend", db_path=str(db))
    assert 1 == refused.code
    assert "factledger migrate" in refused.err and 1 == len(refused.err.splitlines())
    assert before == hashlib.sha256(db.read_bytes()).hexdigest()
