"""The table at scale: one command builds a log shaped like a busy deployment once, outside
the repository, and prints build time, file size, verify, rebuild, checkpoint, as-of early
and late, diff, prove and blast radius, each with its peak RSS:

    python -m tests.bench.scale_table --events 1000000 --dir /var/tmp/scale-table [--reuse]
        [--snapshot-every N [--snapshot-keep K]]

The log: 135-byte memory texts from a few adapters written by `add_many` of 1,000 in the fast
mode, every tenth batch facts under a few tags by `publish_many`, and a prompt built by
`load_persistent_memory` (a receipt each) for every ten writes. `--reuse` keeps a log this
command built for the same `--events` in `--dir`. Every measure runs in a new process
(spawned), timed there from opening the log to the answer; its peak RSS is that process's
VmHWM.

With `--snapshot-every N`, snapshots of the read model are written first (`factledger
snapshot --every N --keep K`, timed in its own process, any old ones removed), their storage
is printed, and as-of late, diff and history --at are measured twice in the same run: from
the snapshots, and from the first event (the snapshot directory moved aside).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import random
import shutil
import sys
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from projections import CrossTaskKB, SQLiteMemoryStore, load_persistent_memory
from projections._snapshots import SUFFIX, listed
from replay import Checkpoint, Ledger, verify_inclusion
from tests.bench.corpus import Corpus
from tests.bench.machine import describe
from tests.bench.quiet import silence_logs
from tests.bench.rss_worker import peak_rss_kib

CONTENT_BYTES = 135
BATCH = 1000
FACT_BATCH_EVERY = 10
WRITES_PER_RECEIPT = 10
FACT_TAGS = ("api-schema", "db-schema", "conventions", "decisions", "deploy")
FACT_KEYS = 200
READ_TAGS = ("backend", "tests", "api", "docs", "security")
READERS = ("claude-code", "codex", "gemini-cli")
SUSPECT = "codex"
KIB_PER_MB = 1024
PROGRESS_EVERY = 100_000
TARGETS = (
    "as-of late within 2x of as-of early",
    "prove under 100 ms",
    "verify at least 200,000 events/s",
    "at most 600 bytes/event",
)


@dataclass
class Row:
    """One line of the table."""

    measure: str
    seconds: float | None
    events_per_s: float | None
    peak_rss_mb: float | None
    detail: str


def content(text: str, serial: int) -> str:
    """A memory text of exactly `CONTENT_BYTES` ASCII characters, unique by `serial`."""
    suffix = f" (note {serial})"
    body = (text + " ") * (CONTENT_BYTES // max(len(text), 1) + 1)
    return body[: CONTENT_BYTES - len(suffix)] + suffix


def build(path: Path, events: int) -> dict[str, Any]:
    """Write a new log of exactly `events` events at `path` through the public API, fast mode:
    per cycle `add_many` (or, every tenth cycle, `publish_many`) of up to 1,000 writes, then
    one `load_persistent_memory` per ten writes, each reader an adapter in turn."""
    corpus, rng = Corpus(seed=28), random.Random(28)
    start = time.perf_counter()
    store = SQLiteMemoryStore(path, durability="fast")
    kb = CrossTaskKB(store, run_id="scale-run", producer_task_id="scale-builder")
    cycle = receipts = 0
    reported = 0
    try:
        while (left := events - store.event_log.head().position) > 0:
            writes = min(BATCH, -(-left * WRITES_PER_RECEIPT // (WRITES_PER_RECEIPT + 1)))
            if cycle % FACT_BATCH_EVERY == FACT_BATCH_EVERY - 1:
                kb.publish_many(corpus.facts(writes, FACT_TAGS, FACT_KEYS), scope="project")
            else:
                rows = [m.row() for m in corpus.memories(writes)]
                for serial, row in enumerate(rows, start=cycle * BATCH):
                    row["content"] = content(str(row["content"]), serial)
                store.add_many(rows)
            for _ in range(min(writes // WRITES_PER_RECEIPT, left - writes)):
                reader = READERS[receipts % len(READERS)]
                tags = rng.sample(READ_TAGS, 2)
                load_persistent_memory(store, tags, task_id=f"task-{receipts}", adapter=reader)
                receipts += 1
            cycle += 1
            if (done := store.event_log.head().position) >= reported + PROGRESS_EVERY:
                reported = done
                rate = done / (time.perf_counter() - start)
                print(f"built {done:,} of {events:,} events, {rate:,.0f}/s", file=sys.stderr)
        head = store.event_log.head().position
    finally:
        store.close()
    return {
        "events": head,
        "receipts": receipts,
        "seconds": round(time.perf_counter() - start, 2),
        "bytes": file_bytes(path),
    }


def file_bytes(path: Path) -> int:
    """The log file's size with its WAL, if one is left (the shared-memory index aside)."""
    return sum(p.stat().st_size for p in (path, _sidecars(path)[0]) if p.exists())


def _sidecars(path: Path) -> tuple[Path, Path]:
    return path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")


# -- each measure: run in a spawned process, returns (seconds, peak KiB, what it found) -------


def _timed(work: Callable[[Ledger], str], path: str) -> tuple[float, int, str]:
    silence_logs()
    start = time.perf_counter()
    with Ledger.open(path) as ledger:
        found = work(ledger)
    return time.perf_counter() - start, peak_rss_kib(), found


def _verify(path: str) -> tuple[float, int, str]:
    def work(ledger: Ledger) -> str:
        report = ledger.verify()
        if not report.ok:
            raise RuntimeError(f"verify failed on an untouched log: {report.reason}")
        return f"{report.checked:,} events checked"

    return _timed(work, path)


def _rebuild(path: str) -> tuple[float, int, str]:
    def work(ledger: Ledger) -> str:
        report = ledger.rebuild(swap=False)
        if not report.matches:
            raise RuntimeError("rebuild does not match the live read model on an untouched log")
        return f"{report.events:,} events folded (swap=False)"

    return _timed(work, path)


def _checkpoint(path: str) -> tuple[float, int, str]:
    return _timed(lambda ledger: str(ledger.checkpoint()), path)


def _as_of(path: str, position: int) -> tuple[float, int, str]:
    def work(ledger: Ledger) -> str:
        view = ledger.as_of(position=position)
        try:
            return f"position {position:,}: {len(view.list(limit=10)):,} newest entries read"
        finally:
            view.close()

    return _timed(work, path)


def _diff(path: str, old: int, new: int) -> tuple[float, int, str]:
    def work(ledger: Ledger) -> str:
        found = ledger.diff(old, new)
        changed = len(found.added) + len(found.changed) + len(found.removed)
        return f"positions {old:,} to {new:,}: {changed:,} facts differ"

    return _timed(work, path)


def _history_at(path: str, position: int) -> tuple[float, int, str]:
    def work(ledger: Ledger) -> str:
        found = ledger.history(tag=FACT_TAGS[0], at=position)
        return f"position {position:,}: {len(found.versions):,} versions under {FACT_TAGS[0]}"

    return _timed(work, path)


def _snapshot(path: str, every: int, keep: int) -> tuple[float, int, str]:
    silence_logs()
    start = time.perf_counter()
    with Ledger.open(path, read_only=False) as ledger:
        taken = ledger.snapshot(every=every, keep=keep)
    return (
        time.perf_counter() - start,
        peak_rss_kib(),
        f"{len(taken.written)} written (every {every:,}, keep {keep}), "
        f"{taken.events_folded:,} events folded",
    )


def snapshot_storage(path: Path) -> Row:
    """What the snapshots beside the log at `path` take on disk."""
    found = listed(snapshot_dir(path))
    sizes = [file.stat().st_size for _, file in found]
    newest = found[0][0] if found else 0
    per_event = sizes[0] / newest if newest else 0.0
    return Row(
        "snapshot storage",
        None,
        None,
        None,
        f"{len(found)} files, {sum(sizes) / 1e6:,.1f} MB in all, newest {sizes[0] / 1e6:,.1f} MB"
        f" ({per_event:,.0f} bytes/event of read model)"
        if found
        else "none",
    )


def snapshot_dir(path: Path) -> Path:
    return path.with_name(path.name + SUFFIX)


def _prove(path: str, position: int, checkpoint: str) -> tuple[float, int, str]:
    taken = Checkpoint.parse(checkpoint)

    def work(ledger: Ledger) -> str:
        proof = ledger.prove_inclusion(position, taken)
        if not verify_inclusion(proof, proof.leaf_hash, taken):
            raise RuntimeError("a proof from the kept index does not verify")
        return f"position {position:,}, {len(proof.path)} hashes, checked"

    return _timed(work, path)


def _blast_radius(path: str) -> tuple[float, int, str]:
    def work(ledger: Ledger) -> str:
        found = ledger.blast_radius(source_adapter=SUSPECT)
        summary = found.summary
        return f"adapter {SUSPECT}: {summary.events:,} events, {summary.prompts_reached:,} prompts"

    return _timed(work, path)


def in_fresh_process(work: Callable[..., tuple[float, int, str]], *args: Any) -> Any:
    """`work(*args)` in a new spawned interpreter."""
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(work, *args).result()


def measure(path: Path, events: int) -> list[Row]:
    """Every measure at the log at `path` of `events` events, each in its own process; with
    snapshots beside it, as-of at the position a snapshot serves worst (the one before the
    newest snapshot: a whole interval folded from the one before), and the past states also
    from the first event (snapshots moved aside)."""
    where = str(path)
    late, before = events * 99 // 100, events * 98 // 100
    rows = _measure(path, events)
    kept = snapshot_dir(path)
    newest = max((position for position, _ in listed(kept)), default=0)
    if newest > 1:
        worst = newest - 1
        rows.append(_row("as-of worst (newest snapshot - 1)", _in(_as_of, where, worst), worst))
    if kept.is_dir():
        aside = kept.with_name(kept.name + ".aside")
        kept.rename(aside)
        try:
            rows += [
                _row("as-of late (99%), from the first event", _in(_as_of, where, late), late),
                _row("diff (98% to 99%), from the first event", _in(_diff, where, before, late)),
                _row("history --at (99%), from the first event", _in(_history_at, where, late)),
            ]
        finally:
            aside.rename(kept)
    return rows


def _row(name: str, done: tuple[float, int, str], folded: int | None = None) -> Row:
    """One measured line, also printed to stderr at once (a 10M table runs for an hour)."""
    seconds, peak_kib, detail = done
    rate = folded / seconds if folded else None
    print(f"{name}: {seconds:,.3f} s, {peak_kib / KIB_PER_MB:,.0f} MB, {detail}", file=sys.stderr)
    return Row(name, seconds, rate, peak_kib / KIB_PER_MB, detail)


def _in(work: Callable[..., tuple[float, int, str]], *args: Any) -> tuple[float, int, str]:
    return in_fresh_process(work, *args)  # type: ignore[no-any-return]


def _measure(path: Path, events: int) -> list[Row]:
    where = str(path)
    early, late, before = max(1, events // 100), events * 99 // 100, events * 98 // 100

    taken = in_fresh_process(_checkpoint, where)
    rows = [
        _row("verify", in_fresh_process(_verify, where), events),
        _row("rebuild", in_fresh_process(_rebuild, where), events),
        _row("checkpoint (first, fresh Ledger)", taken, events),
        _row("as-of early (1%)", in_fresh_process(_as_of, where, early), early),
        _row("as-of late (99%)", in_fresh_process(_as_of, where, late), late),
        _row("diff (98% to 99%)", in_fresh_process(_diff, where, before, late), None),
        _row("history --at (99%)", in_fresh_process(_history_at, where, late), None),
        _row("prove (fresh process)", in_fresh_process(_prove, where, late, taken[2]), None),
        _row("blast radius (one adapter)", in_fresh_process(_blast_radius, where), None),
    ]
    rows[2].detail = f"{events:,} leaves"
    return rows


def judged(rows: list[Row], bytes_per_event: float) -> list[tuple[str, str, bool]]:
    """Issue 28's targets: (target, what was measured, met)."""
    found = {r.measure: r for r in rows}
    early = found["as-of early (1%)"].seconds or 0.0
    late = found["as-of late (99%)"].seconds or 0.0
    prove_ms = (found["prove (fresh process)"].seconds or 0.0) * 1000
    verify_rate = found["verify"].events_per_s or 0.0
    return list(
        zip(
            TARGETS,
            (
                f"{late / early:.1f}x",
                f"{prove_ms:.1f} ms",
                f"{verify_rate:,.0f} events/s",
                f"{bytes_per_event:,.0f} bytes/event",
            ),
            (late <= 2 * early, prove_ms < 100, verify_rate >= 200_000, bytes_per_event <= 600),
            strict=True,
        )
    )


def markdown(rows: list[Row]) -> str:
    """The table for docs/benchmarks.md."""
    lines = ["| measure | seconds | events/s | peak RSS MB | detail |", "|---|---|---|---|---|"]
    for r in rows:
        rate = "-" if r.events_per_s is None else f"{r.events_per_s:,.0f}"
        rss = "-" if r.peak_rss_mb is None else f"{r.peak_rss_mb:,.0f}"
        seconds = "-" if r.seconds is None else f"{r.seconds:,.3f}"
        lines.append(f"| {r.measure} | {seconds} | {rate} | {rss} | {r.detail} |")
    return "\n".join(lines)


def prepare(path: Path, events: int, reuse: bool) -> dict[str, Any]:
    """The build record of the log at `path`: the one kept beside it when `reuse` and it was
    built for `events`, else a new build (any old file removed first)."""
    record = path.with_suffix(".json")
    if reuse and path.exists() and record.exists():
        kept: dict[str, Any] = json.loads(record.read_text(encoding="utf-8"))
        if kept.get("events") == events:
            return {**kept, "reused": True}
    for old in (path, *_sidecars(path), record):
        old.unlink(missing_ok=True)
    shutil.rmtree(snapshot_dir(path), ignore_errors=True)
    built = build(path, events)
    record.write_text(json.dumps(built) + "\n", encoding="utf-8")
    return {**built, "reused": False}


def main(argv: list[str] | None = None) -> int:
    """Build (or reuse) the log, measure, print the Markdown table and the targets."""
    parser = argparse.ArgumentParser(prog="python -m tests.bench.scale_table")
    parser.add_argument("--events", type=int, required=True)
    parser.add_argument("--dir", type=Path, required=True, help="where the log is built (kept)")
    parser.add_argument("--reuse", action="store_true", help="keep a log built for --events")
    parser.add_argument("--json", type=Path, help="also write every figure here")
    parser.add_argument(
        "--snapshot-every", type=int, help="write snapshots every N events before measuring"
    )
    parser.add_argument("--snapshot-keep", type=int, default=4, help="snapshots kept (newest)")
    args = parser.parse_args(argv)
    if args.events < 2 * BATCH // 10:
        parser.error("--events must be at least 200")
    if args.snapshot_every is not None and (args.snapshot_every < 1 or args.snapshot_keep < 1):
        parser.error("--snapshot-every and --snapshot-keep must be at least 1")
    silence_logs()
    args.dir.mkdir(parents=True, exist_ok=True)
    machine = describe(args.dir)
    path = args.dir / f"scale-{args.events}.db"
    built = prepare(path, args.events, args.reuse)
    size = file_bytes(path)
    per_event = size / built["events"]
    rows = [
        Row(
            "build",
            built["seconds"],
            built["events"] / built["seconds"],
            None,
            ("reused; " if built["reused"] else "")
            + f"{built['events']:,} events, {built['receipts']:,} receipts",
        ),
        Row("file size", None, None, None, f"{size / 1e6:,.1f} MB, {per_event:,.0f} bytes/event"),
    ]
    shutil.rmtree(snapshot_dir(path), ignore_errors=True)
    if args.snapshot_every is not None:
        every, keep = args.snapshot_every, args.snapshot_keep
        taken = in_fresh_process(_snapshot, str(path), every, keep)
        rows += [_row("snapshot (fresh, from the first event)", taken), snapshot_storage(path)]
    rows += measure(path, built["events"])
    targets = judged(rows, per_event)
    print(markdown(rows))
    print()
    for target, value, met in targets:
        print(f"- {target}: {value}, {'met' if met else 'missed'}")
    print(f"\nload average at the end: {describe(args.dir)['load_average_start']}")
    if args.json:
        document = {
            "machine": machine,
            "build": built,
            "file_bytes": size,
            "bytes_per_event": per_event,
            "rows": [asdict(r) for r in rows],
            "targets": [{"target": t, "measured": v, "met": m} for t, v, m in targets],
        }
        args.json.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
