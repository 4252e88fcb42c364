"""Secrets at the door of the agent tools: `add` and `publish` refuse a secret by default
with an error naming the detector and offset, never the secret, and store it redacted when
the server's environment says FACTLEDGER_SECRETS=redact."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp.client import Client

from projections import SQLiteMemoryStore
from replay.mcp import build_server
from tests.mcp.test_server import AGENT, call, refused
from tests.projections.test_secrets import GITHUB, SECRETS

pytestmark = pytest.mark.anyio
OPENAI = SECRETS["openai-key"]


async def test_add_and_publish_refuse_a_secret_and_write_nothing(
    agent: Client, db: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The tool error names the detector and the offset; it holds no byte of the secret,
    nor do the logs, and nothing is written."""
    added = await refused(agent, "add", content=f"the token is {GITHUB}")
    published = await refused(agent, "publish", tag="keys", key="openai", value=OPENAI)
    assert "content holds a secret (github-token) at character 13" in added
    assert "value holds a secret (openai-key) at character 0" in published
    for shown in (added, published, caplog.text):
        assert GITHUB not in shown and OPENAI not in shown
    with SQLiteMemoryStore(db, secrets="allow") as store:
        assert [] == store.list()


async def test_redact_in_the_servers_environment_stores_the_marker(
    db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under FACTLEDGER_SECRETS=redact the tools store `[REDACTED:<type>]` in its place."""
    monkeypatch.setenv("FACTLEDGER_SECRETS", "redact")
    async with Client(build_server(db, AGENT), mode="legacy") as client:
        await call(client, "add", content=f"the token is {GITHUB}")
        await call(client, "publish", tag="keys", key="openai", value=f"key {OPENAI}")
    with SQLiteMemoryStore(db, secrets="allow") as store:
        assert {"the token is [REDACTED:github-token]", "key [REDACTED:openai-key]"} == {
            entry.content for entry in store.list()
        }
