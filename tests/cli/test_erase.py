"""`factledger erase`: texts written through the command line and through an agent's MCP
tools are erased for good; the command says what it did; bad requests write nothing."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from mcp.client import Client

from replay.mcp import build_server
from tests.cli.conftest import Result
from tests.mcp.test_server import AGENT, call
from tests.replay.test_erasure import SECRET, on_disk

Cli = Callable[..., Result]


def operator(cli: Cli, tmp_path: Path) -> str:
    key = str(tmp_path / "ops.key")
    assert 0 == cli("keygen", key, db_path=None).code
    assert 0 == cli("operator", "add", key + ".pub", "--key", key).code
    return key


def test_erase_what_the_command_line_wrote(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """share and add under an adapter, then `erase --adapter`: no byte of the text stays in
    the file, the report says what was erased and by which key, and verify passes."""
    monkeypatch.setenv("FACTLEDGER_ADAPTER", "codex")
    assert 0 == cli("share", "launch", f"code {SECRET}", "--tag", "ops").code
    assert 0 == cli("add", f"remember {SECRET}", "--tag", "ops").code
    monkeypatch.delenv("FACTLEDGER_ADAPTER")
    key = operator(cli, tmp_path)
    db = tmp_path / "cli.db"
    assert SECRET.encode() in on_disk(db)
    done = cli("erase", "--adapter", "codex", "--reason", "a launch code", "--key", key)
    assert 0 == done.code, done.err
    assert done.out.startswith("erased the texts at 2 positions: 1, 2\n")
    assert "erasure recorded at position 4, signed by key" in done.out
    assert 0 == on_disk(db).count(SECRET.encode())
    verified = cli("verify", "--json").json()
    assert (True, [1, 2]) == (verified["ok"], verified["erasures"][0]["positions"])
    again = cli("erase", "1", "--reason", "again", "--key", key)
    assert 1 == again.code
    assert "every chosen position was erased already (at [4])" in again.err


def test_erase_json_lists_everything(cli: Cli, tmp_path: Path) -> None:
    """--json prints the whole result, descendants included."""
    assert 0 == cli("add", SECRET, "--tag", "ops").code
    key = operator(cli, tmp_path)
    shown = cli("erase", "1", "--reason", "leak", "--key", key, "--json").json()
    assert ([1], [], "quarantine", None) == (
        shown["erased"],
        shown["descendants"],
        shown["descendants_action"],
        shown["quarantine_position"],
    )


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (("1", "--reason", "x"), "erase needs an operator key of the log"),
        (("--reason", "x", "--key", "KEY"), "exactly one selector"),
        (("1", "--adapter", "codex", "--reason", "x", "--key", "KEY"), "exactly one selector"),
        (("2", "--reason", "x", "--key", "KEY"), "writes no text"),
    ],
)
def test_bad_requests_write_nothing(
    cli: Cli, tmp_path: Path, arguments: tuple[str, ...], message: str
) -> None:
    assert 0 == cli("add", SECRET, "--tag", "ops").code
    key = operator(cli, tmp_path)
    given = [key if a == "KEY" else a for a in arguments]
    refused = cli("erase", *given)
    assert 1 == refused.code
    assert message in refused.err
    assert SECRET.encode() in on_disk(tmp_path / "cli.db")
    assert 3 == len(cli("export").out.splitlines())  # the header and two events


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_erase_what_an_agent_wrote_through_its_tools(cli: Cli, tmp_path: Path) -> None:
    """An agent publishes and adds the text through the MCP server; the operator erases its
    adapter's writes; the agent's own reads no longer find it."""
    db = tmp_path / "cli.db"
    async with Client(build_server(db, AGENT), mode="legacy") as agent:
        await call(agent, "publish", tag="ops", key="launch", value=f"code {SECRET}")
        await call(agent, "add", content=f"remember {SECRET}", tags=["ops"])
    key = operator(cli, tmp_path)
    done = cli("erase", "--adapter", "claude-code", "--reason", "leak", "--key", key, "--json")
    assert (0, 2) == (done.code, len(done.json()["erased"]))
    assert 0 == on_disk(db).count(SECRET.encode())
    async with Client(build_server(db, AGENT), mode="legacy") as agent:
        found = await call(agent, "subscribe", tag="ops")
        recalled = await call(agent, "recall", tags=["ops"])
    assert SECRET not in str(found) and SECRET not in str(recalled)
