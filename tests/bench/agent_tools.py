"""Agent tools: `publish` and `recall` tool calls through `factledger mcp`, in-process and over
stdio, each timed against the same library call made directly in the same run."""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters, stdio_client

from projections import AgentIdentity, CrossTaskKB, MemoryTrustPolicy, SQLiteMemoryStore, recall
from replay.mcp import build_server
from tests.bench.context import FACT_KEYS, FACT_TAGS, Context
from tests.bench.results import Result
from tests.bench.sampling import spread

ROOT = Path(__file__).resolve().parents[2]
AGENT = AgentIdentity(task_id="bench-agent", run_id="bench-run", adapter="claude-code")
AGENT_FLAGS = ("--adapter", "claude-code", "--task-id", "bench-agent", "--run-id", "bench-run")
POLICY = MemoryTrustPolicy()
"""Operator rows and the agent's own adapter are trusted; every other adapter is refused."""
STDIO_ENV = {"FACTLEDGER_TRUST_POLICY": "on", "FACTLEDGER_TRUST_ADAPTERS": ""}
"""The same policy, for the server process."""
LIMIT = 10

Call = Callable[[int], Awaitable[object]]
Direct = Callable[[int], object]


def agent_tools(ctx: Context) -> list[Result]:
    """p50 of publish and recall tool calls on a copy of the benchmark's log of
    `relevant_entries` events (100k in a full run), in-process and over stdio."""
    entries = ctx.scale.relevant_entries
    path = ctx.path("agent-tools")
    shutil.copyfile(ctx.log_of(entries), path)
    calls = ctx.scale.relevant_calls
    queries = ctx.corpus.queries(calls)
    facts = ctx.corpus.facts(calls * 4, FACT_TAGS, FACT_KEYS)
    with SQLiteMemoryStore(path, source_adapter=AGENT.adapter) as store:
        kb = CrossTaskKB(
            store, run_id=AGENT.run_id, producer_task_id=AGENT.task_id, source_adapter=AGENT.adapter
        )

        def publish_direct(i: int) -> object:
            tag, key, value = facts[i]
            return kb.publish(tag, key, value, scope="project")

        def recall_direct(i: int) -> object:
            return recall(store, AGENT, list(queries[i]), limit=LIMIT, trust_policy=POLICY)

        timed = anyio.run(_measure, path, calls, facts, queries, publish_direct, recall_direct)
    note = f"{entries} events ({entries // 10} of them facts), durable mode, {calls} calls each"
    return [
        _result(f"mcp.{tool}.p50.{transport}", samples, note, direct)
        for (tool, transport), (samples, direct) in timed.items()
    ]


async def _measure(
    path: Path,
    calls: int,
    facts: Sequence[tuple[str, str, str]],
    queries: Sequence[Sequence[str]],
    publish_direct: Direct,
    recall_direct: Direct,
) -> dict[tuple[str, str], tuple[list[float], list[float]]]:
    timed: dict[tuple[str, str], tuple[list[float], list[float]]] = {}
    in_process = Client(build_server(path, AGENT, trust_policy=POLICY), mode="legacy")
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "replay", "mcp", *AGENT_FLAGS, "--db", str(path)],
        env=STDIO_ENV,
        cwd=ROOT,
    )
    with open(os.devnull, "w", encoding="utf-8") as errlog:
        for transport, client in (
            ("in_process", in_process),
            ("stdio", Client(stdio_client(server, errlog=errlog))),
        ):
            offset = 0 if transport == "in_process" else 2 * calls
            async with client:
                publish = _tool(client, "publish", lambda i: _fact(facts[i]))
                recalled = _tool(client, "recall", lambda i: _recall(queries[i]))
                timed["publish", transport] = await _paired(
                    calls, publish, publish_direct, first=offset, stride=2, shift=1
                )
                timed["recall", transport] = await _paired(
                    calls, recalled, recall_direct, first=0, stride=1, shift=0
                )
    return timed


def _fact(fact: tuple[str, str, str]) -> dict[str, Any]:
    tag, key, value = fact
    return {"tag": tag, "key": key, "value": value}


def _recall(tags: Sequence[str]) -> dict[str, Any]:
    return {"tags": list(tags), "limit": LIMIT}


def _tool(client: Client, name: str, arguments: Callable[[int], dict[str, Any]]) -> Call:
    async def call(i: int) -> object:
        result = await client.call_tool(name, arguments(i))
        if result.is_error:
            raise RuntimeError(f"{name} failed: {result.content}")
        return result

    return call


async def _paired(
    calls: int, ours: Call, direct: Direct, *, first: int, stride: int, shift: int
) -> tuple[list[float], list[float]]:
    """Latencies in ms of `calls` tool calls and as many direct calls, alternating which goes
    first. Call n of ours uses data item `first + stride * n`; the direct call beside it the
    item `shift` after (publishes write distinct facts; recalls ask the same question)."""
    mine: list[float] = []
    base: list[float] = []
    for n in range(calls):
        i = first + stride * n
        j = i + shift
        if n % 2:
            mine.append(await _timed(ours, i))
            base.append(_timed_direct(direct, j))
        else:
            base.append(_timed_direct(direct, j))
            mine.append(await _timed(ours, i))
    return mine, base


async def _timed(call: Call, i: int) -> float:
    start = time.perf_counter()
    await call(i)
    return (time.perf_counter() - start) * 1000


def _timed_direct(call: Direct, i: int) -> float:
    start = time.perf_counter()
    call(i)
    return (time.perf_counter() - start) * 1000


def _result(metric: str, samples: list[float], note: str, direct: list[float]) -> Result:
    tool, transport = metric.split(".")[1], metric.split(".")[3]
    how = "in-process MCP client (the SDK's in-memory transport, JSON-RPC framed)"
    if transport == "stdio":
        how = "`python -m replay mcp` over stdio, started by the SDK's stdio client"
    return Result(
        metric,
        statistics.median(samples),
        "ms",
        baseline=statistics.median(direct),
        baseline_name=f"the same library call made directly ({_direct_name(tool)})",
        note=f"{how}; {note}",
        extra={"ours": spread(samples), "direct": spread(direct)},
    ).judge()


def _direct_name(tool: str) -> str:
    return "CrossTaskKB.publish" if tool == "publish" else "projections.recall, with its receipt"
