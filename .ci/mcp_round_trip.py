"""One MCP round trip over stdio against the installed `factledger mcp`, as an agent's client
makes it: list the tools, publish a fact, read it back. Run by `.ci/run` with the Python of the
environment the wheel was installed into, from outside the checkout."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters, stdio_client

EXPECTED_TOOLS = {"publish", "subscribe", "add", "recall", "history", "tags"}


async def round_trip(db: Path) -> None:
    command = shutil.which("factledger", path=str(Path(sys.executable).parent))
    if command is None:
        raise SystemExit(f"no factledger command beside {sys.executable}")
    server = StdioServerParameters(
        command=command,
        args=["mcp", "--adapter", "claude-code", "--task-id", "ci-1", "--db", str(db)],
    )
    async with Client(stdio_client(server)) as client:
        tools = {tool.name for tool in (await client.list_tools()).tools}
        if not EXPECTED_TOOLS <= tools:
            raise SystemExit(f"tools missing: {sorted(EXPECTED_TOOLS - tools)}")
        published = await client.call_tool(
            "publish", {"tag": "api", "key": "users", "value": "id int"}
        )
        read = await client.call_tool("subscribe", {"tag": "api"})
        if published.is_error or read.is_error:
            raise SystemExit(f"a tool failed: {published.content} {read.content}")
        facts = (read.structured_content or {}).get("facts", [])
        if [("users", "id int")] != [(fact["key"], fact["value"]) for fact in facts]:
            raise SystemExit(f"subscribe returned {facts!r}")
        listed = await client.call_tool("tags", {})
        recalled = await client.call_tool("recall", {"tags": ["api"]})
        tags = (listed.structured_content or {}).get("tags", [])
        if [("api", ["users"])] != [(tag["tag"], tag["keys"]) for tag in tags]:
            raise SystemExit(f"tags returned {tags!r}")
        prompt = " ".join(getattr(block, "text", "") for block in recalled.content)
        if 'fact position=1 scope=project tag="api" key="users"' not in prompt:
            raise SystemExit(f"recall returned {prompt!r}")
        print(
            f"mcp round trip: {client.server_info.name} {client.server_info.version}, "
            f"{len(tools)} tools, published, listed, recalled and read back api/users"
        )


if __name__ == "__main__":
    anyio.run(round_trip, Path(sys.argv[1]))
