"""Fixtures every MCP test module shares: the async backend, a log and an agent's client."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from mcp.client import Client

from replay.mcp import build_server
from tests.mcp.test_server import AGENT


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
