"""`factledger mcp` over stdio, answering every line it is sent.

The SDK's stdio transport drops a line it cannot read as a JSON-RPC message without a word,
so an agent whose request held a lone surrogate (`"\\ud800"`, valid JSON syntax but not
Unicode text) waited for a reply that never came. Here such a line gets a JSON-RPC error:
a parse error (-32700) for text that is not JSON or not Unicode, an invalid request (-32600)
for JSON that is not a message, addressed to the request's id when one can be read (else
null, as JSON-RPC 2.0 says). The reply never quotes what the line held.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
from mcp.server.lowlevel.server import Server
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp_types import INVALID_REQUEST, PARSE_ERROR, ErrorData, JSONRPCError
from pydantic import ValidationError

NOT_UNICODE = (
    "Parse error: a string holds a lone surrogate escape (\\ud800 to \\udfff outside a "
    "pair), which is not Unicode text"
)
NOT_JSON = "Parse error: the line is not JSON"
NOT_A_MESSAGE = "Invalid request: not a JSON-RPC 2.0 request, notification or response"


async def serve_stdio(protocol: Server[Any]) -> None:
    """Serve `protocol` (an MCP server's protocol layer) on standard input and output until
    input ends, answering each line it cannot read with a JSON-RPC error."""
    async with stdio_server() as (read_stream, write_stream):
        send, receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)

        async def relay() -> None:
            async with send:
                async for item in read_stream:
                    if isinstance(item, Exception):
                        await write_stream.send(SessionMessage(refusal(item)))
                    else:
                        await send.send(item)

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(relay)
            await protocol.run(receive, write_stream, protocol.create_initialization_options())


def refusal(problem: Exception) -> JSONRPCError:
    """The JSON-RPC error answering a line the transport could not read (`problem`)."""
    errors = problem.errors(include_url=False) if isinstance(problem, ValidationError) else []
    if not errors:
        return _error(None, PARSE_ERROR, NOT_JSON)
    first = errors[0]
    if first["type"] != "json_invalid":
        return _error(_request_id(first["input"]), INVALID_REQUEST, NOT_A_MESSAGE)
    try:
        message = json.loads(first["input"])
    except (TypeError, ValueError, RecursionError):
        return _error(None, PARSE_ERROR, NOT_JSON)
    try:
        json.dumps(message, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return _error(_request_id(message), PARSE_ERROR, NOT_UNICODE)
    return _error(_request_id(message), PARSE_ERROR, NOT_JSON)


def _request_id(message: object) -> int | str | None:
    """The id of a request that could be read as a JSON object, if it has a usable one."""
    if not isinstance(message, dict) or "method" not in message:
        return None
    found = message.get("id")
    if isinstance(found, str) or (isinstance(found, int) and not isinstance(found, bool)):
        return found
    return None


def _error(request_id: int | str | None, code: int, message: str) -> JSONRPCError:
    return JSONRPCError(jsonrpc="2.0", id=request_id, error=ErrorData(code=code, message=message))
