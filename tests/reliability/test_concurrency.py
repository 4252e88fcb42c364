"""Concurrency: many processes publishing on overlapping keys into one file at once."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from eventlog import FactPublished, RecallRecorded
from projections import CrossTaskKB, SQLiteMemoryStore
from tests.reliability.support import (
    assert_chain_verifies,
    assert_read_model_is_the_log_refolded,
    complete_lines,
    spawn_worker,
)
from tests.reliability.workers import SHARED_RUN, SHARED_TAG

PROCESSES = 8
PUBLISHES = 500
KEYS = 13
"""Each process cycles through every key in both scopes (13 is odd), so every (scope, key)
is written by all 8 processes, interleaved."""


def test_eight_processes_publishing_on_overlapping_keys_lose_nothing_and_order_by_position(
    tmp_path: Path,
) -> None:
    """8 processes x 500 publishes into one fresh file, started together: exact counts, dense
    positions (the facts and each subscribe's receipt), no caller ever sees an error (not even
    'database is locked'), subscribe returns each key's highest position, and each key's
    history is complete and in position order."""
    db_path = tmp_path / "shared.db"
    workers = [
        spawn_worker("publish", str(db_path), f"p{n}", str(PUBLISHES), str(KEYS), str(n))
        for n in range(PROCESSES)
    ]
    for worker in workers:
        assert worker.stdout is not None and worker.stdin is not None
        assert "ready\n" == worker.stdout.readline(), worker.communicate()
    for worker in workers:
        assert worker.stdin is not None
        worker.stdin.write("go\n")
        worker.stdin.flush()
    outputs = [worker.communicate(timeout=240) for worker in workers]
    assert [0] * PROCESSES == [worker.returncode for worker in workers], outputs

    versions: dict[tuple[str, str], list[tuple[int, str]]] = defaultdict(list)
    for n, (out, err) in enumerate(outputs):
        lines = complete_lines(out)
        errors = [line for line in lines if not line.startswith(("ack ", "done "))]
        assert [] == errors, f"process p{n} saw errors: {errors[:5]} {err[-2000:]}"
        _, published, subscribed, yielded = lines[-1].split()
        assert (str(PUBLISHES), yielded) == (published, subscribed), f"p{n}: counter {lines[-1]}"
        acks = [line.split(" ", 5)[2:] for line in lines if line.startswith("ack ")]
        assert PUBLISHES == len(acks), f"p{n}"
        for scope, key, position, value in acks:
            versions[(scope, key)].append((int(position), value))
    total = PROCESSES * PUBLISHES
    receipts = PROCESSES * (PUBLISHES // 50)
    positions = sorted(p for history in versions.values() for p, _ in history)

    with SQLiteMemoryStore(db_path, durability="fast") as store:
        log = store.event_log
        records = list(log.read())
        assert list(range(1, total + receipts + 1)) == [r.position for r in records]
        facts = [r for r in records if isinstance(r.payload, FactPublished)]
        assert positions == [r.position for r in facts]
        assert receipts == sum(isinstance(r.payload, RecallRecorded) for r in records)
        assert {f"p{n}:{i}" for n in range(PROCESSES) for i in range(PUBLISHES)} == {
            r.payload.value for r in facts if isinstance(r.payload, FactPublished)
        }
        kb = CrossTaskKB(store, run_id=SHARED_RUN)
        for scope in ("project", "run"):
            expected = sorted(
                ((key, max(history)) for (s, key), history in versions.items() if s == scope),
                key=lambda item: -item[1][0],
            )
            actual = [
                (fact.key, (fact.position, fact.value))
                for fact in kb.subscribe(SHARED_TAG, scope=scope)
            ]
            assert expected == actual, f"subscribe({scope!r})"
            for (s, key), history in versions.items():
                if s == scope:
                    assert sorted(history) == [
                        (fact.position, fact.value)
                        for fact in kb.history(SHARED_TAG, key, scope=scope)
                    ], f"history({scope!r}, {key!r})"
        assert_chain_verifies(log)
        assert_read_model_is_the_log_refolded(store)
