"""verify's walk in several processes: the same report as one process gives, whatever the
rows hold and wherever a range is cut; a worker that fails costs time, never the verdict.

The matrix runs each worker's code in this process (`WalkedHere`: the function a worker runs,
its answer through the same encoding); a few tests start real workers."""

from __future__ import annotations

import logging
import sqlite3
import sys
from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest

from eventlog import (
    ChainBreak,
    ChainWalker,
    FactledgerError,
    InvalidInputError,
    InvalidTypeError,
    open_log,
)
from eventlog.chain import SHA256
from eventlog.contract import memory
from eventlog.merkle import CompactRange
from projections import SQLiteMemoryStore
from replay import (
    AuditProblem,
    Checkpoint,
    Ledger,
    checkpoint,
    generate_key,
    read_operator_key,
    verify,
    walk_workers,
)
from tests.eventlog.test_tampering import _body, _raw, _store, rewrite_with_chain_recomputed

ROWS = 40
"""Events in each test log: with BATCH 8 and three workers, ranges (0,16], (16,32], (32,40]."""

Tamper = Callable[[sqlite3.Connection], object]


@pytest.fixture(autouse=True)
def small_ranges(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ranges small enough for a 40-event log (the parent cuts them; workers walk them)."""
    monkeypatch.setattr(walk_workers, "PARALLEL_FROM", 0)
    monkeypatch.setattr(walk_workers, "BATCH", 8)


class WalkedHere:
    """A worker that runs the worker's code in this process; its answer crosses the same
    encoding a real one's does, and where the worker would exit with an error it gives none."""

    def __init__(self, request: walk_workers.RangeRequest) -> None:
        self.request, self.done = request, request.until
        self.answer: walk_workers.Walked | None = None
        try:
            answer = walk_workers.walk_request(request, lambda frame: None)
        except FactledgerError:
            return
        self.answer = msgspec.msgpack.decode(msgspec.msgpack.encode(answer), type=type(answer))

    def result(self, on_wait: Callable[[], object]) -> walk_workers.Walked | None:
        return self.answer

    def stop(self) -> None:
        """Nothing runs."""


@pytest.fixture
def here(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(walk_workers, "Worker", WalkedHere)


def make_log(path: Path, rows: int = ROWS, *, checkpoint_at: int = 0) -> Checkpoint | None:
    """A log of `rows` notes, and a checkpoint taken when it held `checkpoint_at` (0: none)."""
    notes = [{"type": "learning", "content": f"note {i}", "tags": ["t"]} for i in range(rows)]
    with SQLiteMemoryStore(path) as store:
        store.add_many(notes[:checkpoint_at])
    taken = Checkpoint.parse(str(checkpoint(path))) if checkpoint_at else None
    with SQLiteMemoryStore(path) as store:
        store.add_many(notes[checkpoint_at:])
    return taken


def tampered(path: Path, tamper: Tamper) -> None:
    conn = _raw(path)
    tamper(conn)
    conn.close()


def edit_payload(position: int) -> Tamper:
    def tamper(conn: sqlite3.Connection) -> None:
        body = _body(conn, position)
        body["producer_task_id"] = "forged"
        _store(conn, position, body)

    return tamper


def edit_text(position: int) -> Tamper:
    return lambda conn: conn.execute(
        "UPDATE fl_content SET text = CAST('v9' AS BLOB) WHERE position = ?", (position,)
    )


def delete_text(position: int) -> Tamper:
    return lambda conn: conn.execute("DELETE FROM fl_content WHERE position = ?", (position,))


def delete_row(position: int) -> Tamper:
    return lambda conn: conn.execute("DELETE FROM fl_events WHERE position = ?", (position,))


def unknown_kind(position: int) -> Tamper:
    def tamper(conn: sqlite3.Connection) -> None:
        body = _body(conn, position)
        body["payload"]["kind"] = "from_a_later_version"  # type: ignore[index]
        _store(conn, position, body)
        log_id = conn.execute("SELECT value FROM fl_log_meta WHERE name = 'log_id'").fetchone()
        value = SHA256.genesis(log_id[0])
        for at, stored in conn.execute("SELECT position, body FROM fl_events ORDER BY 1"):
            value = SHA256.link(value, SHA256.leaf_hash(stored))
            conn.execute("UPDATE fl_events SET chain_hash = ? WHERE position = ?", (value, at))

    return tamper


def both(*tampers: Tamper) -> Tamper:
    def tamper(conn: sqlite3.Connection) -> None:
        for one in tampers:
            one(conn)

    return tamper


CASES: dict[str, tuple[Tamper | None, bool]] = {
    "untouched": (None, True),
    "payload edited in the second range": (edit_payload(20), False),
    "payload edited at the last row of the first range": (edit_payload(16), False),
    "payload edited at the first row of the third range": (edit_payload(33), False),
    "text edited in the third range": (edit_text(38), False),
    "texts deleted in two ranges": (both(delete_text(5), delete_text(25)), False),
    "row deleted at a cut": (delete_row(32), False),
    "rows failing in the first and the last range": (
        both(edit_payload(3), edit_payload(39)),
        False,
    ),
    "text failing early, chain failing late": (both(edit_text(4), edit_payload(30)), False),
    "an unreadable row in the second range, chain recomputed": (unknown_kind(18), False),
}


@pytest.mark.usefixtures("here")
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("size", [0, 10, 16, 24, 40])
def test_ranges_give_the_report_one_walk_gives(tmp_path: Path, case: str, size: int) -> None:
    """The whole report (verdict, position, reason, findings, chain values, the checkpoint's
    root and chain value held) is the same from three ranges as from one walk, with the
    checkpoint's size in any range or on a cut."""
    path = tmp_path / "log.db"
    taken = make_log(path, checkpoint_at=size)
    tamper, ok = CASES[case]
    if tamper is not None:
        tampered(path, tamper)
    alone = verify(path, checkpoint=taken, workers=1)
    assert alone == verify(path, checkpoint=taken, workers=3)
    assert ok == alone.ok, alone.reason


def test_a_rewritten_history_is_caught_in_a_workers_range(tmp_path: Path) -> None:
    """A row edited in the second range and the chain recomputed after it passes the chain
    (by construction) but not a checkpoint taken before, whose tree the workers' ranges
    complete."""
    path = tmp_path / "log.db"
    taken = make_log(path, checkpoint_at=30)
    tampered(path, rewrite_with_chain_recomputed)
    report = verify(path, checkpoint=taken, workers=3)
    assert (False, AuditProblem.HISTORY_REWRITTEN) == (report.ok, report.problem)
    assert report == verify(path, checkpoint=taken, workers=1)


def test_an_erasure_judged_across_ranges(tmp_path: Path) -> None:
    """An operator registered in the first range and an erasure in the last: the text absent
    in the second range is lawful, in both walks alike."""
    path = tmp_path / "log.db"
    make_log(path, 30)
    key_file = tmp_path / "ops.key"
    generate_key(key_file, name="ops")
    key = read_operator_key(key_file)
    with Ledger.open(path, read_only=False) as ledger:
        ledger.add_operator(key.public, key=key)
        with SQLiteMemoryStore(path) as store:
            store.add_many([{"type": "learning", "content": f"late {i}"} for i in range(10)])
        ledger.erase([20], reason="a secret", key=key)
    one, three = verify(path, workers=1), verify(path, workers=3)
    assert one == three and three.ok, three.reason
    assert [(20,)] == [e.positions for e in three.erasures]


def test_progress_counts_every_range_and_ends_at_the_total(tmp_path: Path) -> None:
    path = tmp_path / "log.db"
    make_log(path)
    calls: list[tuple[int, int]] = []
    verify(path, workers=3, progress=lambda done, total: calls.append((done, total)))
    assert (ROWS, ROWS) == calls[-1]
    assert sorted(calls) == calls and all(total == ROWS for _, total in calls)


def test_a_worker_that_fails_costs_time_not_the_verdict(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A worker that exits at once, or answers bytes that are not frames, leaves its range to
    this process: the report is the one a single process gives, and a warning says so."""
    path = tmp_path / "log.db"
    make_log(path)
    tampered(path, edit_payload(30))
    alone = verify(path, workers=1)
    for program in ("import sys; sys.exit(3)", "import sys; sys.stdout.write('garbage!')"):
        monkeypatch.setattr(walk_workers, "_COMMAND", [sys.executable, "-c", program])
        calls: list[tuple[int, int]] = []
        with caplog.at_level(logging.WARNING, logger="replay.walk_workers"):
            assert alone == verify(path, workers=3, progress=lambda *at, c=calls: c.append(at))
        assert "walk_worker_failed" in caplog.text
        assert sorted(calls) == calls and (24, ROWS) == calls[-1], "its batches before row 30"
        caplog.clear()


def test_an_answer_that_does_not_continue_the_walk_fails_closed(tmp_path: Path) -> None:
    """A worker's range starts from the chain value stored at its start; if that is not the
    value the walk before it reached (the log changed between the two reads), the join
    refuses it as a broken chain rather than trusting either; an answer that ends short of
    its range with no failure is refused too."""
    path = tmp_path / "log.db"
    make_log(path, 20)
    log = open_log(path, read_only=True)
    walker = ChainWalker(log.log_format, log.log_format.chain.genesis(log.log_id))
    tree = CompactRange(log.log_format.chain)
    walker.walk(log.scan(until=10))
    answer = walk_workers.Walked(
        start_chain=bytes(32),
        position=20,
        chain_value=bytes(32),
        failure=None,
        nodes=[],
        checkpoint_chain=None,
        findings=[],
        unreadable=0,
        text_problems=0,
        first_mismatch=None,
        absent=b"",
        authority_rows=b"",
    )
    with pytest.raises(ChainBreak) as broke:
        walk_workers.join(walker, tree, answer, 20)
    assert (11, AuditProblem.CHAIN_BROKEN) == (broke.value.position, broke.value.problem)
    assert "changed while it was verified" in broke.value.reason
    assert 10 == walker.position
    stops_short = msgspec.structs.replace(answer, start_chain=walker.chain_value, position=19)
    with pytest.raises(ChainBreak) as broke:
        walk_workers.join(walker, tree, stops_short, 20)
    assert (20, AuditProblem.ROW_MISSING) == (broke.value.position, broke.value.problem)
    log.close()


def test_only_a_sqlite_file_of_enough_rows_is_cut(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One range below PARALLEL_FROM rows, for one worker, or for a log in memory; ranges cut
    at multiples of BATCH otherwise."""
    path = tmp_path / "log.db"
    make_log(path)
    on_disk = open_log(path, read_only=True)
    assert [16, 32, 40] == walk_workers.cuts(on_disk, 40, 3)
    assert [24, 40] == walk_workers.cuts(on_disk, 40, 2)
    assert [40] == walk_workers.cuts(on_disk, 40, 1)
    monkeypatch.setattr(walk_workers, "PARALLEL_FROM", 41)
    assert [40] == walk_workers.cuts(on_disk, 40, 3)
    in_memory = open_log(":memory:")
    in_memory.append_many([memory("x")])
    monkeypatch.setattr(walk_workers, "PARALLEL_FROM", 0)
    assert [1] == walk_workers.cuts(in_memory, 1, 3)
    on_disk.close()
    in_memory.close()


def test_bad_worker_counts_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "log.db"
    make_log(path, 4)
    for bad, error in ((0, InvalidInputError), (-2, InvalidInputError), (True, InvalidTypeError)):
        with pytest.raises(error, match="workers"):
            verify(path, workers=bad)
    with pytest.raises(InvalidTypeError, match="workers"):
        verify(path, workers="2")  # type: ignore[arg-type]


PLANTED = """
import sqlite3, struct, sys
import msgspec

request = msgspec.msgpack.decode(sys.stdin.buffer.read())
path, after, until = request["path"], request["after"], request["until"]
conn = sqlite3.connect(path)
chain = dict(conn.execute("SELECT position, chain_hash FROM fl_events WHERE position IN (?, ?)",
                          (after, until)))
answer = msgspec.msgpack.encode({
    "type": "Walked", "start_chain": chain[after], "position": until,
    "chain_value": chain[until], "failure": None, "nodes": [], "checkpoint_chain": None,
    "findings": [], "unreadable": 0, "text_problems": 0, "first_mismatch": None,
    "absent": b"", "authority_rows": b"",
})
sys.stdout.buffer.write(struct.pack(">I", len(answer)) + answer)
"""


def test_a_worker_planted_in_the_working_directory_is_not_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An agent that writes `replay/walk_workers.py` where verify runs, to answer "all good"
    for a range it tampered with, is not heard: workers start isolated (-I), so neither the
    working directory nor PYTHON* variables choose their code. Without -I the planted
    answer would hide the edit (the control)."""
    path = tmp_path / "log.db"
    make_log(path)
    tampered(path, edit_payload(30))
    planted = tmp_path / "cwd" / "replay"
    planted.mkdir(parents=True)
    (planted / "__init__.py").write_text("")
    (planted / "walk_workers.py").write_text(PLANTED)
    monkeypatch.chdir(planted.parent)
    monkeypatch.setenv("PYTHONPATH", str(planted.parent))
    report = verify(path, workers=2)
    assert (False, AuditProblem.CHAIN_BROKEN, 30) == (
        report.ok,
        report.problem,
        report.first_bad_position,
    )
    monkeypatch.setattr(walk_workers, "_COMMAND", [sys.executable, "-m", "replay.walk_workers"])
    assert verify(path, workers=2).ok, "the control: an unisolated worker is believed"
