"""`factledger mcp` as its clients meet it: a named log, plain one-sentence errors, the
prompt text itself from `recall`, and a `tags` tool that lists what to ask for."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from mcp import Client

from eventlog import RecallRecorded
from projections import AgentIdentity, CrossTaskKB, SQLiteMemoryStore
from replay.cli import main
from replay.cli.agents import UNNAMED_DB
from replay.mcp import build_server
from tests.mcp.test_server import AGENT, ATTACKER, POISON, call, events, refused, text_of

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "memory.db"


@pytest.fixture
async def agent(db: Path) -> AsyncIterator[Client]:
    async with Client(build_server(db, AGENT), mode="legacy") as client:
        yield client


@pytest.fixture
def shared(db: Path) -> Path:
    """api-schema/users and /orders by the operator, api-schema/evil and a note by the
    attacker, a note by the agent's own adapter."""
    with SQLiteMemoryStore(db) as store:
        kb = CrossTaskKB(store, producer_task_id="setup")
        kb.publish("api-schema", "users", "id int", scope="project")
        kb.publish("api-schema", "orders", "id int", scope="project")
        CrossTaskKB(store, producer_task_id="x", source_adapter=ATTACKER.adapter).publish(
            "api-schema", 'evil" key', POISON, scope="project"
        )
        store.add("learning", POISON, ["deploy"], source_adapter=ATTACKER.adapter)
        store.add("learning", "deploys go through CI", ["deploy"], source_adapter="claude-code")
    return db


# -- the log must be named --------------------------------------------------------------


@pytest.mark.parametrize("dsn", [False, True], ids=["file", "with-dsn"])
def test_the_server_refuses_to_start_without_a_named_log(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    dsn: bool,
) -> None:
    """Neither --db nor FACTLEDGER_DB: one line says how to name the log, exit 1, and
    nothing is created in the directory the client started it in."""
    monkeypatch.chdir(tmp_path)
    if dsn:
        monkeypatch.setenv("FACTLEDGER_DSN", "postgresql://nobody@127.0.0.1:1/none")
    monkeypatch.setenv("FACTLEDGER_DB", "  ")
    assert 1 == main(["mcp", "--task-id", "t1", "--adapter", "codex"])
    out, err = capsys.readouterr()
    assert ("", 1) == (out, len(err.splitlines()))
    assert UNNAMED_DB in err and "--db" in err and "FACTLEDGER_DB" in err
    assert [] == list(tmp_path.iterdir())


def test_factledger_db_names_the_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """FACTLEDGER_DB names it as --db does (the server then starts: stdin is empty, so it
    ends at once)."""
    monkeypatch.setenv("FACTLEDGER_DB", str(tmp_path / "named.db"))
    monkeypatch.setattr("sys.stdin", open(__file__))  # noqa: SIM115 - closed by the server
    main(["mcp", "--task-id", "t1", "--adapter", "codex"])
    assert UNNAMED_DB not in capsys.readouterr().err
    assert (tmp_path / "named.db").exists()


# -- errors are one plain sentence --------------------------------------------------------


@pytest.mark.parametrize(
    ("tool", "arguments", "sentence"),
    [
        ("recall", {"tags": ["a"], "limit": 10_000}, "The argument 'limit' is invalid: "),
        ("recall", {}, "The argument 'tags' is required."),
        ("history", {"tag": "t", "key": "k", "limit": "x" * 100_000}, "'limit' is invalid"),
        ("subscribe", {"tag": "t", "scope": "everything"}, "'scope' is invalid"),
        ("publish", {"tag": "t", "key": "k", "value": 3}, "'value' is invalid"),
        ("add", {"content": "x", "tags": "not-a-list"}, "'tags' is invalid"),
        ("tags", {"scope": 7}, "'scope' is invalid"),
    ],
)
async def test_bad_arguments_are_one_plain_sentence(
    agent: Client, db: Path, tool: str, arguments: dict[str, object], sentence: str
) -> None:
    """No pydantic report, no link, no echo of the input: one sentence naming the argument,
    and nothing written."""
    text = await refused(agent, tool, **arguments)
    assert sentence in text
    assert text.endswith(".") and "\n" not in text
    for noise in ("pydantic", "http", "type=", "input_value", "Arguments", "xxxxxxxx"):
        assert noise not in text
    assert len(text) < 300
    assert not db.exists() or [] == events(db)


async def test_an_unknown_argument_with_a_hostile_name_is_named_safely(agent: Client) -> None:
    """An argument named with control characters, or at length, is quoted escaped and cut."""
    text = await refused(agent, "tags", **{"\x1b[2J" + "k" * 5000: 1})
    assert "\x1b" not in text and "\\u{001B}[2J" in text and len(text) < 200


# -- recall returns the prompt text itself -----------------------------------------------


async def test_recall_returns_the_prompt_text_itself(shared: Path, agent: Client) -> None:
    """The content is the Markdown section as the agent should read it (not JSON), holding
    the agent's own adapter's note; the structured result carries the receipt."""
    result = await agent.call_tool("recall", {"tags": ["deploy"]})
    assert not result.is_error
    text = text_of(result)
    assert text.startswith("## Persistent Memory\n")
    assert "deploys go through CI" in text and POISON not in text
    assert "source=adapter:claude-code" in text
    structured = result.structured_content
    assert structured is not None and text == structured["text"]
    receipt = events(shared)[structured["receipt_position"] - 1].payload
    assert isinstance(receipt, RecallRecorded)
    assert ["untrusted_adapter"] == [e["reason"] for e in structured["excluded"]]


async def test_a_recall_that_kept_out_everything_says_so(shared: Path) -> None:
    """An agent that trusts nothing that matched reads a sentence saying so, not ''."""
    other = AgentIdentity(task_id="t9", adapter="gemini-cli")
    async with Client(build_server(shared, other), mode="legacy") as client:
        result = await client.call_tool("recall", {"tags": ["deploy"]})
    assert "Nothing trusted is remembered under these tags: 2 entries were kept out" in (
        text_of(result)
    )


# -- tags -------------------------------------------------------------------------------


async def test_tags_lists_trusted_tags_and_keys_with_counts(shared: Path, agent: Client) -> None:
    """The agent sees api-schema's trusted keys (not the attacker's), and the deploy note it
    may read; the listing is receipted under its identity."""
    listing = await call(agent, "tags")
    assert [
        {"tag": "api-schema", "facts": 2, "entries": 0, "keys": ["orders", "users"]},
        {"tag": "deploy", "facts": 0, "entries": 1, "keys": []},
    ] == listing["tags"]
    assert (2, False) == (listing["kept_out"], listing["truncated"])
    receipt = events(shared)[listing["receipt_position"] - 1]
    assert isinstance(receipt.payload, RecallRecorded)
    assert ("task-b", "claude-code") == (receipt.payload.task_id, receipt.payload.adapter)


async def test_tags_and_the_command_line_list_the_same(
    shared: Path,
    agent: Client,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`factledger tags --json` as the same agent lists what the tool lists (one function)."""
    listing = await call(agent, "tags")
    monkeypatch.setenv("FACTLEDGER_ADAPTER", "claude-code")
    monkeypatch.setenv("FACTLEDGER_TASK_ID", "task-b")
    assert 0 == main(["tags", "--db", str(shared), "--json"])
    shown = json.loads(capsys.readouterr().out)
    assert (listing["tags"], listing["kept_out"]) == (shown["tags"], shown["kept_out"])


async def test_run_scoped_tags_need_a_run(db: Path) -> None:
    no_run = AgentIdentity(task_id="t1", adapter="codex")
    async with Client(build_server(db, no_run), mode="legacy") as client:
        assert "needs a run" in await refused(client, "tags", scope="run")
