"""Crashes: a writer killed with SIGKILL at random moments loses nothing it acknowledged,
leaves no partial batch, and leaves a read model that is exactly the log refolded."""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import time
from collections import defaultdict
from pathlib import Path

import pytest

from eventlog import (
    FactPublished,
    MemoryAdded,
    RecallRecorded,
    RecordedEvent,
    open_log,
    verify_chain,
)
from projections import CrossTaskKB, SQLiteMemoryStore
from tests.reliability.support import (
    assert_read_model_is_the_log_refolded,
    complete_lines,
    spawn_worker,
    written_text,
)
from tests.reliability.workers import CRASH_BATCH, CRASH_RUN, CRASH_TAG

KILLS = 50
SEED = int(os.environ.get("FACTLEDGER_CRASH_SEED", "20261129"))
"""Seeds the kill timings; set FACTLEDGER_CRASH_SEED to replay or vary them."""


def _kill_at_random_moment(db_path: Path, name: str, rng: random.Random) -> list[str]:
    """Start a writer, SIGKILL it at a seeded moment, and return the lines it wrote whole.

    One kill in five lands while the child is still starting or opening the store; the others
    land a random moment after its first acknowledged batch, inside the write loop.
    """
    worker = spawn_worker("crash", str(db_path), name)
    assert worker.stdout is not None
    if rng.random() < 0.2:
        time.sleep(rng.uniform(0.0, 0.25))
        first = ""
    else:
        first = worker.stdout.readline()
        time.sleep(rng.uniform(0.0, 0.01))
    worker.send_signal(signal.SIGKILL)
    rest, errors = worker.communicate()
    assert -signal.SIGKILL == worker.returncode, f"writer died on its own: {errors}"
    return complete_lines(first + rest)


def _checkpoints(db_path: Path) -> dict[str, tuple[int, str]]:
    raw = sqlite3.connect(db_path)
    try:
        rows = raw.execute("SELECT name, position, chain_hash FROM fl_projector_checkpoint")
        return {name: (position, chain_hash) for name, position, chain_hash in rows}
    except sqlite3.OperationalError:
        return {}
    finally:
        raw.close()


def _check_acknowledged(
    by_position: dict[int, RecordedEvent], acks: list[str], context: str
) -> None:
    """Every acknowledged batch is in the log, whole, with the contents the writer sent."""
    for line in acks:
        _, kind, name, batch, positions = line.split()
        expected_kind = MemoryAdded if kind == "add" else FactPublished
        for i, position in enumerate(int(p) for p in positions.split(",")):
            record = by_position.get(position)
            assert record is not None, f"{context}: acknowledged {line!r} lost position {position}"
            assert isinstance(record.payload, expected_kind), f"{context}: {line!r}"
            assert f"{name}:{batch}:{i}" == written_text(record), f"{context}: {line!r}"
            assert name == record.producer_task_id, f"{context}: {line!r}"


def _check_batches_whole(records: list[RecordedEvent], context: str) -> None:
    """Each batch in the log has all its events, at consecutive positions (one transaction).
    The writers' events only: the receipts of this test's own subscribes are no batch."""
    batches: dict[tuple[str, str, str], list[int]] = defaultdict(list)
    for record in records:
        if isinstance(record.payload, RecallRecorded):
            continue
        name, batch, _ = written_text(record).split(":")
        batches[(record.kind, name, batch)].append(record.position)
    for identity, positions in batches.items():
        start = positions[0]
        assert list(range(start, start + CRASH_BATCH)) == positions, (
            f"{context}: partial or split batch {identity}: positions {positions}"
        )


def _check_current_facts(store: SQLiteMemoryStore, records: list[RecordedEvent]) -> None:
    """subscribe returns, per key and scope, the version with the highest position."""
    newest: dict[tuple[str, str], int] = {}
    for record in records:
        if isinstance(record.payload, FactPublished):
            newest[(record.payload.scope, record.payload.key)] = record.position
    kb = CrossTaskKB(store, run_id=CRASH_RUN)
    for scope in ("run", "project"):
        expected = sorted(
            ((key, position) for (s, key), position in newest.items() if s == scope),
            key=lambda item: -item[1],
        )
        actual = [(fact.key, fact.position) for fact in kb.subscribe(CRASH_TAG, scope=scope)]
        assert expected == actual


@pytest.mark.slow
def test_sigkilled_writer_loses_no_acknowledged_write_and_leaves_no_partial_batch(
    tmp_path: Path,
) -> None:
    """50 writers SIGKILLed at seeded random moments: after each, every acknowledged batch is
    present and whole, no partial batch exists, checkpoints match the head, the chain verifies,
    and the read model is exactly a refold of the log."""
    rng = random.Random(SEED)
    db_path = tmp_path / "crash.db"
    acknowledged: list[str] = []
    heads: list[int] = []
    for kill in range(KILLS):
        context = f"seed {SEED}, kill {kill}"
        lines = _kill_at_random_moment(db_path, f"w{kill}", rng)
        acknowledged += [line for line in lines if line.startswith("ack ")]
        if not db_path.exists():
            continue
        log = open_log(db_path, durability="fast")
        try:
            head = log.head()
            report = verify_chain(log)
            records = list(log.read())
        finally:
            log.close()
        assert report.ok, f"{context}: {report}"
        assert head.position == report.checked == len(records), context
        checkpoints = _checkpoints(db_path)
        if checkpoints:
            assert {(head.position, head.chain_hash)} == set(checkpoints.values()), (
                f"{context}: projector checkpoints {checkpoints} differ from head {head}"
            )
        by_position = {record.position: record for record in records}
        _check_acknowledged(by_position, acknowledged, context)
        _check_batches_whole(records, context)
        with SQLiteMemoryStore(db_path, durability="fast") as store:
            assert_read_model_is_the_log_refolded(store, context)
            _check_current_facts(store, records)
        heads.append(head.position)
    print(f"crash test: seed {SEED}, {KILLS} kills, {len(acknowledged)} acknowledged batches")
    assert acknowledged, f"seed {SEED}: no writer ever acknowledged a batch"
    assert heads == sorted(heads), f"seed {SEED}: the log shrank across kills: {heads}"
