"""`python -m tests.bench [--quick | --smoke] [--json PATH] [--only METRIC ...]`.

Prints a table (metric, ours, baseline, ratio, target, met?) and writes the same as JSON.
The ratio is always ours / baseline, where the baseline was measured in the same run, on
the same disk, with the pragmas read back from our own connection.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tests.bench import (
    agent_tools,
    audit,
    concurrency,
    fresh_proofs,
    machine,
    memory,
    peer,
    reads,
    writes,
)
from tests.bench.context import Context
from tests.bench.quiet import silence_logs
from tests.bench.results import Result, failed, markdown, table, write_json
from tests.bench.scale import FULL, QUICK, SMOKE, Scale


@dataclass(frozen=True)
class Group:
    """Metrics measured together (they share data or a setup)."""

    name: str
    metrics: tuple[str, ...]
    run: Callable[[Context], list[Result]]


GROUPS = (
    Group("single", ("add.durable", "publish.durable", "add.fast", "publish.fast"), writes.single),
    Group(
        "batched",
        (
            "add_many.vs_executemany",
            "add_many.events_per_s",
            "publish_many.vs_executemany",
            "publish_many.events_per_s",
        ),
        writes.batched,
    ),
    Group("peer", peer.METRICS, peer.peer),
    Group(
        "subscribe",
        ("subscribe.p50.v1", "subscribe.p50.v100", "subscribe.p50.v1000", "subscribe.flatness"),
        reads.subscribe,
    ),
    Group("relevant", ("get_relevant.p50", "load_persistent_memory.p50"), reads.relevant),
    Group(
        "agent_tools",
        (
            "mcp.publish.p50.in_process",
            "mcp.recall.p50.in_process",
            "mcp.publish.p50.stdio",
            "mcp.recall.p50.stdio",
        ),
        agent_tools.agent_tools,
    ),
    Group("concurrent", ("concurrent.throughput", "concurrent.lost"), concurrency.concurrent),
    Group(
        "audit",
        (
            "verify_chain.events_per_s",
            "verify.events_per_s",
            "verify.workers.events_per_s",
            "rebuild.events_per_s",
            "inclusion_proof.p50",
        ),
        audit.audit,
    ),
    Group("fresh_proofs", (fresh_proofs.METRIC,), fresh_proofs.fresh_proofs),
    Group("memory", ("peak_rss.verify", "peak_rss.rebuild"), memory.peak_memory),
)
METRICS = tuple(metric for group in GROUPS for metric in group.metrics)


def parse(argv: list[str]) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(prog="python -m tests.bench", description=__doc__)
    size = parser.add_mutually_exclusive_group()
    size.add_argument(
        "--quick",
        action="store_true",
        help="small smoke run (under about a minute) that CI may execute",
    )
    size.add_argument(
        "--smoke",
        action="store_true",
        help="the smallest run, for the test suite; its figures mean nothing",
    )
    parser.add_argument(
        "--json",
        type=Path,
        default=Path("bench-results.json"),
        help="where to write the results (default: bench-results.json)",
    )
    parser.add_argument(
        "--only",
        nargs="+",
        metavar="METRIC",
        default=None,
        help="metrics or groups to run: " + ", ".join(g.name for g in GROUPS),
    )
    parser.add_argument(
        "--dir",
        type=Path,
        default=None,
        help="folder for the scratch databases (default: a temporary folder "
        "under the system temp dir); it decides which disk is measured",
    )
    parser.add_argument("--keep", action="store_true", help="keep the scratch databases")
    parser.add_argument(
        "--markdown", action="store_true", help="also print the table in Markdown (for the README)"
    )
    return parser.parse_args(argv)


def selected(only: list[str] | None) -> list[tuple[Group, tuple[str, ...]]]:
    """The groups to run and which of their metrics to report."""
    if not only:
        return [(group, group.metrics) for group in GROUPS]
    unknown = [
        name for name in only if name not in METRICS and name not in {g.name for g in GROUPS}
    ]
    if unknown:
        raise SystemExit(
            f"unknown metric or group: {', '.join(unknown)}; known: {', '.join(METRICS)}"
        )
    chosen = []
    for group in GROUPS:
        wanted = (
            group.metrics if group.name in only else tuple(m for m in group.metrics if m in only)
        )
        if wanted:
            chosen.append((group, wanted))
    return chosen


def run_group(ctx: Context, group: Group, wanted: tuple[str, ...]) -> list[Result]:
    """Run one group; a group that raises reports an error row for each of its metrics."""
    start = time.perf_counter()
    try:
        results = group.run(ctx)
    except Exception as exc:
        traceback.print_exc(file=sys.stderr)
        results = [failed(metric, exc) for metric in group.metrics]
    print(f"  {group.name}: {time.perf_counter() - start:.1f} s", file=sys.stderr, flush=True)
    return [r for r in results if r.metric in wanted]


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; exit 1 if a measurement raised (a missed target is not an error)."""
    args = parse(sys.argv[1:] if argv is None else argv)
    silence_logs()
    scale: Scale = SMOKE if args.smoke else QUICK if args.quick else FULL
    plan = selected(args.only)
    if args.dir is not None:
        args.dir.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="factledger-bench-", dir=args.dir))
    described = machine.describe(folder)
    print(f"factledger benchmark, {scale.name} run, scratch folder {folder}", file=sys.stderr)
    ctx = Context(scale=scale, folder=folder)
    start = time.perf_counter()
    results: list[Result] = []
    try:
        for group, wanted in plan:
            results += run_group(ctx, group, wanted)
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)
    described["load_average_end"] = machine.load_average()
    settings = {
        "mode": scale.name,
        "scale": scale.__dict__,
        "seconds": round(time.perf_counter() - start, 1),
        "logs_built": ctx.builds,
        "ratio": "ours / baseline, in the row's unit; throughput figures are medians over "
        "rounds, the ratio the median of per-round ratios (rounds alternate which goes first)",
    }
    write_json(args.json, described, settings, results)
    print(table(results))
    if args.markdown:
        print()
        print(markdown(results))
    print(f"\n{scale.name} run, {settings['seconds']} s; wrote {args.json}", file=sys.stderr)
    return 1 if any(r.status == "error" for r in results) else 0
