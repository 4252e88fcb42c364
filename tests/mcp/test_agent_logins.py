"""An agent's MCP server, and an orchestrator's prompt builds, over a log in PostgreSQL
reached as a login `pg add-agent` bound to the agent's adapter, each host with its own
cache: every tool works, and every event names the whole identity it was made for."""

from __future__ import annotations

from contextlib import closing
from pathlib import Path

import pytest
from mcp import Client

from eventlog import MemoryAdded, PermissionDeniedError, RecallRecorded, RecordedEvent, open_log
from projections import (
    AgentIdentity,
    CrossTaskKB,
    SQLiteMemoryStore,
    load_persistent_memory,
)
from replay.mcp import build_server
from tests.mcp.test_server import CALLS, TOOLS, call
from tests.postgres import PgLog

pytest.importorskip("psycopg")
from eventlog.postgres_admin import add_agent
from replay import generate_key, init_postgres

CODEX = AgentIdentity(task_id="review-2", run_id="run-42", adapter="codex")

pytestmark = pytest.mark.anyio


def events(dsn: str) -> list[RecordedEvent]:
    with closing(open_log(dsn, read_only=True)) as log:
        return list(log.read())


@pytest.fixture
def codex_login(pg: PgLog, tmp_path: Path) -> str:
    """The DSN of a login bound to codex, on a log made with its operator key (1) holding an
    operator's entry (2)."""
    generate_key(tmp_path / "operator.key")
    init_postgres(pg.dsn, role_prefix=pg.roles, key=tmp_path / "operator.key")
    add_agent(pg.dsn, f"{pg.roles}_codex", "codex", role_prefix=pg.roles)
    with SQLiteMemoryStore(tmp_path / "operator.db", log=pg.dsn) as operator:
        operator.add("convention", "use httpx", ["schema"])
    return pg.as_role(f"{pg.roles}_codex")


async def test_every_tool_works_through_a_bound_login_and_names_the_whole_identity(
    codex_login: str, tmp_path: Path
) -> None:
    """publish, add, subscribe, recall and history, served through a codex login from this
    host's cache: each appends one event, whose producer, run and adapter (and a receipt's
    task, run and adapter) are the server's."""
    assert TOOLS == set(CALLS)
    whole = ("review-2", "run-42", "codex")
    server = build_server(tmp_path / "agent" / "cache.db", CODEX, log=codex_login)
    async with Client(server, mode="legacy") as client:
        for tool, arguments in CALLS.items():
            before = len(events(codex_login))
            await call(client, tool, **arguments)
            [event] = events(codex_login)[before:]
            assert whole == (event.producer_task_id, event.run_id, event.source_adapter), tool
            if isinstance(event.payload, RecallRecorded):
                receipt = event.payload
                assert whole == (receipt.task_id, receipt.run_id, receipt.adapter), tool
            if isinstance(event.payload, MemoryAdded):
                assert "review-2" == event.payload.task_id


def test_an_orchestrators_prompt_build_through_a_bound_login_is_receipted_under_it(
    codex_login: str, tmp_path: Path
) -> None:
    """A prompt built for a codex agent, through a codex login naming no adapter, and a
    subscribe through it, are receipted under codex; a prompt naming another adapter is
    refused by the database and writes nothing."""
    with SQLiteMemoryStore(tmp_path / "orchestrator.db", log=codex_login) as store:
        text = load_persistent_memory(store, ["schema"], task_id="review-2", run_id="run-42")
        list(CrossTaskKB(store, producer_task_id="review-2").subscribe("schema", scope="project"))
        before = store.event_log.head()
        with pytest.raises(PermissionDeniedError, match="codex"):
            load_persistent_memory(store, ["schema"], task_id="t", adapter="claude-code")
        assert before == store.event_log.head()
    assert "use httpx" in text
    prompt, subscribed = events(codex_login)[-2:]
    for receipt in (prompt, subscribed):
        assert isinstance(receipt.payload, RecallRecorded)
        assert ("codex", "codex") == (receipt.source_adapter, receipt.payload.adapter)


def test_a_store_naming_another_adapter_than_its_login_refuses_to_open(
    codex_login: str, tmp_path: Path
) -> None:
    """A handle writing as claude-code through a codex login could append nothing: it is
    refused when opened, naming both adapters."""
    with pytest.raises(PermissionDeniedError, match=r"bound to adapter 'codex'.*'claude-code'"):
        SQLiteMemoryStore(tmp_path / "cache.db", log=codex_login, source_adapter="claude-code")
