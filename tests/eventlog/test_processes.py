"""Many processes on one file, and a process killed in the middle of a batch."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from eventlog import open_log, verify_chain

ROOT = Path(__file__).resolve().parents[2]

APPENDER = """
import sys
from eventlog import open_log, NewEvent, MemoryAdded
log = open_log(sys.argv[1], durability=sys.argv[4])
name, count = sys.argv[2], int(sys.argv[3])
for i in range(count):
    log.append(NewEvent(payload=MemoryAdded(type="learning", content=f"{name}:{i}"),
                        producer_task_id=name))
"""

BATCHER = """
import sys
from eventlog import open_log, NewEvent, MemoryAdded
log = open_log(sys.argv[1], durability="fast")
batch = 0
while True:
    log.append_many([NewEvent(payload=MemoryAdded(type="learning", content=f"{batch}:{i}"))
                     for i in range(500)])
    batch += 1
    print(batch, flush=True)
"""


def _python(script: str, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-c", script, *args], env=env, stdout=subprocess.PIPE, text=True
    )


def test_four_processes_append_to_one_file(tmp_path: Path) -> None:
    """Four writers: every event lands once, positions are dense, and the chain verifies."""
    path = tmp_path / "log.db"
    open_log(path)
    workers = [_python(APPENDER, str(path), f"w{n}", "150", "fast") for n in range(4)]
    assert [0, 0, 0, 0] == [w.wait(timeout=120) for w in workers]
    log = open_log(path)
    records = list(log.read())
    assert list(range(1, 601)) == [r.position for r in records]
    contents = {r.payload.content for r in records}  # type: ignore[union-attr]
    assert {f"w{n}:{i}" for n in range(4) for i in range(150)} == contents
    assert verify_chain(log).ok


def test_sigkill_during_append_many_keeps_whole_batches(tmp_path: Path) -> None:
    """A writer killed mid-batch leaves every batch whole or absent, and the chain intact."""
    path = tmp_path / "log.db"
    before = open_log(path).head().position
    for attempt in range(5):
        worker = _python(BATCHER, str(path))
        time.sleep(0.15 + 0.07 * attempt)
        worker.send_signal(signal.SIGKILL)
        worker.wait()
        acknowledged = len(worker.stdout.read().split()) if worker.stdout else 0
        log = open_log(path)
        head = log.head().position
        assert 0 == head % 500, f"partial batch after kill {attempt}: head {head}"
        assert verify_chain(log).ok
        log.close()
        assert before + acknowledged * 500 <= head, "an acknowledged batch was lost"
        before = head
