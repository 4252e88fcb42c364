"""A proof from a fresh process at the large log: through the Merkle index kept beside the
read model, against the walk of the whole log a fresh process made without it.

Each sample runs in a new process (`concurrent.futures` with a spawn context), timed there
from opening the log to the proof checked against the checkpoint; beside them, the wall time
of one `factledger prove` command. Run it alone, at any size, on a log built once:

    python -m tests.bench.fresh_proofs --events 1000000 --dir /var/tmp/factledger-bench
"""

from __future__ import annotations

import argparse
import multiprocessing
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from eventlog import open_log
from replay import Checkpoint, Ledger, Prover, verify_inclusion
from tests.bench.context import Context
from tests.bench.quiet import silence_logs
from tests.bench.results import Result, Target, table
from tests.bench.scale import FULL

METRIC = "inclusion_proof.fresh_process"
FRESH_PROOF_MS = Target("ours<=", 100.0, "<= 100 ms")
WALK = "the same proof from a fresh process without the kept index (walks the whole log)"


def fresh_proofs(ctx: Context) -> list[Result]:
    """Proofs from fresh processes at the large log, with the kept index and by walking."""
    events = ctx.scale.large_log
    path = ctx.log_of(events)
    return [measure(path, ctx.scale.audit_rounds, f"{events:,} events")]


def measure(path: Path, rounds: int, where: str) -> Result:
    """`rounds` fresh-process proofs each way at random positions of the log at `path`."""
    with Ledger.open(path) as ledger:
        taken = ledger.checkpoint()
    text = str(taken)
    rng = random.Random(28)
    positions = [rng.randint(1, taken.size) for _ in range(rounds)]
    kept = [_in_fresh_process(_kept, path, position, text) for position in positions]
    walked = [_in_fresh_process(_walked, path, position, text) for position in positions]
    ours, baseline = statistics.median(kept), statistics.median(walked)
    command = _command_seconds(path, positions[0], taken)
    return Result(
        METRIC,
        ours,
        "ms",
        baseline=baseline,
        baseline_name=WALK,
        target=FRESH_PROOF_MS,
        note=f"{where}; each sample a new process, timed from opening the log to the proof "
        f"checked; one `factledger prove` command took {command:.2f} s wall time, Python's "
        "start and imports included",
        extra={"kept_ms": kept, "walked_ms": walked, "command_seconds": round(command, 3)},
    ).judge()


def _in_fresh_process(
    work: Callable[[str, int, str], float], path: Path, position: int, checkpoint: str
) -> float:
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(work, str(path), position, checkpoint).result()


def _kept(path: str, position: int, checkpoint: str) -> float:
    """Milliseconds to prove through a fresh `Ledger` (its index kept beside the read model)."""
    taken = Checkpoint.parse(checkpoint)
    start = time.perf_counter()
    with Ledger.open(path) as ledger:
        proof = ledger.prove_inclusion(position, taken)
    seconds = time.perf_counter() - start
    if not verify_inclusion(proof, proof.leaf_hash, taken):
        raise RuntimeError("a proof from the kept index does not verify")
    return seconds * 1000


def _walked(path: str, position: int, checkpoint: str) -> float:
    """Milliseconds to prove through a fresh `Prover` with no kept index (a walk)."""
    taken = Checkpoint.parse(checkpoint)
    start = time.perf_counter()
    log = open_log(path, read_only=True)
    try:
        proof = Prover(log).prove_inclusion(position, taken)
    finally:
        log.close()
    seconds = time.perf_counter() - start
    if not verify_inclusion(proof, proof.leaf_hash, taken):
        raise RuntimeError("a proof from the walk does not verify")
    return seconds * 1000


def _command_seconds(path: Path, position: int, taken: Checkpoint) -> float:
    """Wall time of `factledger prove` (as `python -m replay`), with the checkpoint on stdin."""
    start = time.perf_counter()
    command = [sys.executable, "-m", "replay", "--db", str(path), "prove", str(position)]
    subprocess.run(
        [*command, "--checkpoint", "-"],
        input=str(taken),
        text=True,
        capture_output=True,
        check=True,
    )
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    """Build a log of `--events` events in `--dir` once (reused when it is there), then
    print the fresh-process proof times and their ratio."""
    parser = argparse.ArgumentParser(prog="python -m tests.bench.fresh_proofs")
    parser.add_argument("--events", type=int, default=FULL.large_log)
    parser.add_argument("--rounds", type=int, default=FULL.audit_rounds)
    parser.add_argument("--dir", type=Path, required=True, help="where the log is built (kept)")
    args = parser.parse_args(argv)
    silence_logs()
    args.dir.mkdir(parents=True, exist_ok=True)
    ctx = Context(scale=FULL, folder=args.dir)
    path = ctx.path(f"log-{args.events}")
    if not path.exists():
        start = time.perf_counter()
        ctx.log_of(args.events)
        print(f"built {path} in {time.perf_counter() - start:.0f} s", flush=True)
    result = measure(path, args.rounds, f"{args.events:,} events")
    print(table([result]))
    print(result.note)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
