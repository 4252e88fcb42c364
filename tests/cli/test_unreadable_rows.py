"""A row of a kind this version does not know, written into the file by hand with a correct
SHA-256 link: every command reads on, and verify and history name it with its position and
the writer its body claims."""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

from tests.cli.conftest import Result

Cli = Callable[..., Result]


def insert_unknown_kind(db: Path) -> int:
    """Append, with sqlite3 alone, a correctly chained row of the kind `mystery`."""
    with closing(sqlite3.connect(db)) as raw:
        position, previous = raw.execute(
            "SELECT position, chain_hash FROM fl_events ORDER BY position DESC LIMIT 1"
        ).fetchone()
        position += 1
        body = (
            f'{{"position":{position},"event_id":"hand-1","ts_ns":1,'
            '"producer_task_id":"intruder-7","run_id":null,"source_adapter":"evil-cli",'
            '"content_hash":"","payload":{"kind":"mystery","blob":"x"}}'
        ).encode()
        leaf = hashlib.sha256(b"\x00" + body).digest()
        chain = hashlib.sha256(b"\x02" + previous + leaf).digest()
        raw.execute(
            "INSERT INTO fl_events (position, event_id, body, chain_hash) VALUES (?, ?, ?, ?)",
            (position, "hand-1", body, chain),
        )
        raw.commit()
    return int(position)


def test_every_command_reads_on_and_verify_and_history_name_the_row(
    cli: Cli, tmp_path: Path
) -> None:
    assert 0 == cli("add", "Run tests with pytest -q", "--tag", "backend").code
    assert 0 == cli("share", "users", "{name: str}", "--tag", "api-schema").code
    position = insert_unknown_kind(tmp_path / "cli.db")
    for command in (
        ("list",),
        ("query", "--tag", "backend"),
        ("add", "written after it", "--tag", "backend"),
    ):
        result = cli(*command)
        assert 0 == result.code, (command, result.err)
    listed = cli("list", "--json").json()
    assert {"Run tests with pytest -q", "written after it"} <= {e["content"] for e in listed}
    verified = cli("verify", "--json")
    assert (0, True, position + 1) == (
        verified.code,
        verified.json()["ok"],
        verified.json()["checked"],
    )
    assert [(position, "unreadable", "evil-cli", "intruder-7")] == [
        (f["position"], f["problem"], f["source_adapter"], f["producer_task_id"])
        for f in verified.json()["findings"]
    ]
    assert "mystery" in verified.json()["findings"][0]["reason"]
    history = cli("history", "--json")
    assert 0 == history.code
    assert [(position, "mystery", "evil-cli", "intruder-7")] == [
        (u["position"], u["claimed_kind"], u["source_adapter"], u["producer_task_id"])
        for u in history.json()["unreadable"]
    ]
