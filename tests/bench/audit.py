"""Audit over a large log: verify, rebuild and inclusion proofs, against a raw table scan.

`replay` is being written; a metric whose module does not import yet is reported as
"not available yet". `eventlog.verify_chain`, the primitive verify is built on, is always
measured, so the speed of the log walk itself is known before `replay.audit` lands.
"""

from __future__ import annotations

import importlib
import random
import statistics
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from types import ModuleType

from eventlog import open_log, verify_chain
from projections.internal import (
    default_projectors,
)
from tests.bench import raw
from tests.bench.context import Context
from tests.bench.results import Result, Target, unavailable
from tests.bench.sampling import Paired, latencies_ms, paired, spread

SCAN = "SELECT position, event_id, body, chain_hash FROM fl_events ORDER BY position"
SCAN_NAME = "plain sqlite3 full table scan of the same log table (rows/s)"
VERIFY_RATE = Target("ours>=", 300_000, ">= 300,000 ev/s")
REBUILD_RATE = Target("ours>=", 150_000, ">= 150,000 ev/s")
WORKERS_RATE = Target("ours>=", 200_000, ">= 200,000 ev/s on 2 cores (issue 28)")
PROOF_P50 = Target("ours<=", 1.0, "p50 <= 1 ms")


def optional(module: str) -> ModuleType | str:
    """The module, or a note saying why it cannot be used yet."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        return f"not available yet: {module} does not import ({exc})"


def audit(ctx: Context) -> list[Result]:
    """verify_chain, verify, rebuild and inclusion proofs over the large log."""
    events = ctx.scale.large_log
    path = ctx.log_of(events)
    log = open_log(path, read_only=True)
    try:
        pragmas = raw.pragmas_of(log)
    finally:
        log.close()
    conn = raw.connect(path, pragmas, read_only=True)
    try:

        def scan() -> float:
            start = time.perf_counter()
            rows = raw.scan(conn, SCAN)
            return rows / (time.perf_counter() - start)

        scan()
        where = f"{events:,} events ({ctx.builds[f'log-{events}']['method']})"
        return [
            _rate(
                "verify_chain.events_per_s",
                ctx,
                scan,
                lambda: _walk(path),
                VERIFY_RATE,
                where + "; eventlog.verify_chain over open_log(read_only=True), the "
                "primitive Ledger.verify builds on",
            ),
            _verify(ctx, scan, path, where),
            _verify_workers(ctx, path, where),
            _rebuild(ctx, scan, path, where),
            _proofs(ctx, path, events, where),
        ]
    finally:
        conn.close()


def _rate(
    metric: str,
    ctx: Context,
    scan: Callable[[], float],
    ours: Callable[[], float],
    target: Target,
    note: str,
) -> Result:
    runs: Paired = paired(ctx.scale.audit_rounds, scan, ours)
    base, mine, ratio = runs.summary()
    return Result(
        metric,
        mine,
        "ev/s",
        baseline=base,
        baseline_name=SCAN_NAME,
        target=target,
        ratio=ratio,
        note=note,
        extra=runs.samples(),
    ).judge()


def _walk(path: Path) -> float:
    log = open_log(path, read_only=True)
    try:
        start = time.perf_counter()
        report = verify_chain(log)
        seconds = time.perf_counter() - start
    finally:
        log.close()
    if not report.ok:
        raise RuntimeError(f"verify_chain failed on an untouched log: {report.reason}")
    return report.checked / seconds


def _verify(ctx: Context, scan: Callable[[], float], path: Path, where: str) -> Result:
    module = optional("replay")
    if isinstance(module, str):
        return unavailable("verify.events_per_s", "ev/s", VERIFY_RATE, module)

    def run() -> float:
        start = time.perf_counter()
        report = module.verify(path)
        seconds = time.perf_counter() - start
        if not report.ok:
            raise RuntimeError(f"verify failed on an untouched log: {report.reason}")
        return int(report.checked) / seconds

    return _rate("verify.events_per_s", ctx, scan, run, VERIFY_RATE, where + "; replay.verify")


def _verify_workers(ctx: Context, path: Path, where: str) -> Result:
    """verify as it runs (one process per core, for a log of 200k events or more) against
    verify in one process, back to back in each round."""
    module = optional("replay")
    if isinstance(module, str):
        return unavailable("verify.workers.events_per_s", "ev/s", WORKERS_RATE, module)

    def run(workers: int | None) -> float:
        start = time.perf_counter()
        report = module.verify(path, workers=workers)
        seconds = time.perf_counter() - start
        if not report.ok:
            raise RuntimeError(f"verify failed on an untouched log: {report.reason}")
        return int(report.checked) / seconds

    runs = paired(ctx.scale.audit_rounds, partial(run, 1), partial(run, None))
    base, mine, ratio = runs.summary()
    return Result(
        "verify.workers.events_per_s",
        mine,
        "ev/s",
        baseline=base,
        baseline_name="replay.verify(workers=1): the same walk in one process",
        target=WORKERS_RATE,
        ratio=ratio,
        note=where + "; replay.verify with its default workers (one per core, at most 4, "
        "from 200,000 events)",
        extra=runs.samples(),
    ).judge()


def _rebuild(ctx: Context, scan: Callable[[], float], path: Path, where: str) -> Result:
    module = optional("replay")
    if isinstance(module, str):
        return unavailable("rebuild.events_per_s", "ev/s", REBUILD_RATE, module)
    events = 0

    def run() -> float:
        nonlocal events
        start = time.perf_counter()
        report = module.rebuild(path, swap=False)
        seconds = time.perf_counter() - start
        if not report.matches:
            raise RuntimeError("rebuild does not match the live read model on an untouched log")
        events = int(report.events)
        return events / seconds

    result = _rate(
        "rebuild.events_per_s", ctx, scan, run, REBUILD_RATE, where + "; rebuild(swap=False)"
    )
    tables = [t for p in default_projectors("any log: table names are fixed") for t in p.tables]
    floor_seconds = raw.row_work_seconds(path, path.with_name("row-work.db"), tables)
    floor_seconds += events / scan()
    floor = events / floor_seconds
    result.extra["row_work_floor_events_per_s"] = round(floor, 1)
    result.note += (
        f"; floor: plain sqlite3 reading every live table, inserting its rows into a scratch "
        f"file and reading them back, plus one log scan, runs at {floor:,.0f} ev/s"
    )
    return result


def _proofs(ctx: Context, path: Path, events: int, where: str) -> Result:
    """Inclusion proofs through one kept `replay.Ledger` (its `Prover`); beside them, what
    its first checkpoint (a walk of the log) and a one-call `replay.prove_inclusion(path,
    ...)` (the Merkle index kept beside the read model) cost."""
    replay = optional("replay")
    if isinstance(replay, str):
        return unavailable("inclusion_proof.p50", "ms", PROOF_P50, replay)
    rng = random.Random(11)
    positions = [rng.randint(1, events) for _ in range(ctx.scale.proofs)]
    with replay.Ledger.open(path) as ledger:
        start = time.perf_counter()
        checkpoint = ledger.checkpoint()
        first_checkpoint_s = time.perf_counter() - start
        samples: list[float] = []
        for position in positions:
            samples += latencies_ms(1, partial(ledger.prove_inclusion, position, checkpoint))
    one_call = [
        latencies_ms(1, partial(replay.prove_inclusion, path, position, checkpoint))[0] / 1000
        for position in positions[: ctx.scale.audit_rounds]
    ]
    return Result(
        "inclusion_proof.p50",
        statistics.median(samples),
        "ms",
        target=PROOF_P50,
        note=f"{where}; {len(positions)} random positions through one kept replay.Ledger; "
        f"its first checkpoint walked the log in {first_checkpoint_s:.1f} s, and "
        f"replay.prove_inclusion(path, ...), which opens a Ledger and proves from the index "
        f"kept beside the read model, took {statistics.median(one_call):.3f} s",
        extra={
            **spread(samples),
            "first_checkpoint_seconds": round(first_checkpoint_s, 3),
            "one_call_seconds": [round(s, 3) for s in one_call],
        },
    ).judge()
