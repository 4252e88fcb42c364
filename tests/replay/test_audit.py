"""verify: the tampering table, with and without a checkpoint taken before, and its report."""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

import msgspec
import pytest

import eventlog
from eventlog import (
    ChainWalker,
    InvalidTypeError,
    StorageError,
    open_log,
)
from eventlog.chain import SHA256
from eventlog.contract import EVERY_KIND, fact, memory
from replay import AuditProblem, AuditReport, Checkpoint, checkpoint, verify, walk_workers
from replay.cli.output import to_json, to_text
from tests.eventlog.test_tampering import (
    _raw,
    delete_row,
    delete_text_beside,
    edit_content_hash,
    edit_payload,
    edit_text_beside,
    rewrite_with_chain_recomputed,
    swap_rows,
)

Tamper = Callable[[Path, Path], None]


def make_log(path: Path, count: int = 4) -> None:
    log = open_log(path)
    log.append_many(
        [memory("a"), fact("users", "v1"), fact("users", "v2"), memory("b")]
        + [memory(f"more {i}") for i in range(count - 4)]
    )
    log.close()


def raw(tamper: Callable[[sqlite3.Connection], None]) -> Tamper:
    def apply(path: Path, _: Path) -> None:
        conn = _raw(path)
        tamper(conn)
        conn.close()

    return apply


def cut_tail(path: Path, _: Path) -> None:
    conn = _raw(path)
    conn.execute("DELETE FROM fl_events WHERE position > 3")
    conn.close()


def different_log(path: Path, elsewhere: Path) -> None:
    other = elsewhere / "other.db"
    make_log(other)
    shutil.copyfile(other, path)


# (tamper, verdict without a checkpoint, verdict with one taken before): (ok, problem, first bad)
TABLE: dict[str, tuple[Tamper, tuple[object, ...], tuple[object, ...]]] = {
    # format v2: the body is chained, the text beside it is held to the salted hash
    "chained payload edited": (
        raw(edit_payload),
        (False, AuditProblem.CHAIN_BROKEN, 3),
        (False, AuditProblem.CHAIN_BROKEN, 3),
    ),
    "content hash edited": (
        raw(edit_content_hash),
        (False, AuditProblem.CHAIN_BROKEN, 3),
        (False, AuditProblem.CHAIN_BROKEN, 3),
    ),
    "text beside edited": (
        raw(edit_text_beside),
        (False, AuditProblem.CONTENT_MISMATCH, 3),
        (False, AuditProblem.CONTENT_MISMATCH, 3),
    ),
    "text beside deleted": (
        raw(delete_text_beside),
        (False, AuditProblem.CONTENT_MISMATCH, 3),
        (False, AuditProblem.CONTENT_MISMATCH, 3),
    ),
    "row deleted": (
        raw(delete_row),
        (False, AuditProblem.ROW_MISSING, 3),
        (False, AuditProblem.ROW_MISSING, 3),
    ),
    "two rows swapped": (
        raw(swap_rows),
        (False, AuditProblem.ROWS_REORDERED, 2),
        (False, AuditProblem.ROWS_REORDERED, 2),
    ),
    "row edited, chain recomputed": (
        raw(rewrite_with_chain_recomputed),
        (True, None, None),
        (False, AuditProblem.HISTORY_REWRITTEN, None),
    ),
    "tail cut off": (
        cut_tail,
        (True, None, None),
        (False, AuditProblem.TAIL_CUT, 4),
    ),
    "a whole different log": (
        different_log,
        (True, None, None),
        (False, AuditProblem.OTHER_LOG, None),
    ),
}


@pytest.mark.parametrize("case", TABLE)
def test_verdict_for_each_tampering(tmp_path: Path, case: str) -> None:
    """Each tampering gets its verdict without a checkpoint, and with a checkpoint taken
    before it: the checkpoint exposes what the chain alone cannot."""
    path = tmp_path / "log.db"
    make_log(path)
    before = Checkpoint.parse(str(checkpoint(path)))
    tamper, without, with_checkpoint = TABLE[case]
    tamper(path, tmp_path)
    plain, held = verify(path), verify(path, checkpoint=before)
    assert without == (plain.ok, plain.problem, plain.first_bad_position)
    assert with_checkpoint == (held.ok, held.problem, held.first_bad_position)
    for report in (plain, held):
        assert report.ok == (report.reason is None)


def test_untouched_log_verifies_with_and_without_checkpoint(tmp_path: Path) -> None:
    """An honest log passes, and reports its head and the checkpoint it was held to."""
    path = tmp_path / "log.db"
    make_log(path)
    taken = checkpoint(path)
    report = verify(path, checkpoint=taken)
    head = open_log(path, read_only=True).head()
    assert (True, 4, 4, head.chain_hash, taken.log_id) == (
        report.ok,
        report.checked,
        report.head_position,
        report.head_chain_hash,
        report.log_id,
    )
    assert report.checkpoint is not None
    assert (4, taken.chain_hash, False) == (
        report.checkpoint.size,
        report.checkpoint.chain_hash,
        report.checkpoint.signed,
    )


def test_log_that_grew_after_the_checkpoint_still_extends_it(tmp_path: Path) -> None:
    """Appends after a checkpoint are fine: the log still extends it."""
    path = tmp_path / "log.db"
    make_log(path)
    taken = checkpoint(path)
    log = open_log(path)
    log.append_many([memory(f"later {i}") for i in range(25)])
    log.close()
    report = verify(path, checkpoint=taken)
    assert (True, 29) == (report.ok, report.checked)


def test_tail_cut_report_says_where_the_log_ends(tmp_path: Path) -> None:
    """A cut-off tail is named: where the log ends and what the checkpoint covered."""
    path = tmp_path / "log.db"
    make_log(path)
    taken = checkpoint(path)
    cut_tail(path, tmp_path)
    report = verify(path, checkpoint=taken)
    assert (3, 3) == (report.checked, report.head_position)
    assert report.reason is not None
    assert "position 3" in report.reason and "4 events" in report.reason


def test_same_log_id_with_other_content_is_a_rewrite(tmp_path: Path) -> None:
    """A forged log carrying the right id but other history fails on its chain hash."""
    path = tmp_path / "log.db"
    make_log(path, 6)
    taken = checkpoint(path)
    forged = msgspec.structs.replace(taken, chain_hash=SHA256.genesis(taken.log_id).hex())
    report = verify(path, checkpoint=forged)
    assert (False, AuditProblem.HISTORY_REWRITTEN) == (report.ok, report.problem)


def test_checkpoint_whose_root_disagrees_with_its_chain_is_refused(tmp_path: Path) -> None:
    """Matching chain hash but another root: the checkpoint was not taken from this log."""
    path = tmp_path / "log.db"
    make_log(path)
    taken = checkpoint(path)
    report = verify(path, checkpoint=msgspec.structs.replace(taken, root=bytes(32)))
    assert (False, AuditProblem.HISTORY_REWRITTEN) == (report.ok, report.problem)
    assert report.reason is not None and "not taken from this log" in report.reason


def test_empty_log_is_visible_in_the_report(tmp_path: Path) -> None:
    """An empty log verifies trivially, and the report says it is empty."""
    path = tmp_path / "log.db"
    open_log(path).close()
    report = verify(path)
    assert (True, True, 0, SHA256.genesis(report.log_id).hex()) == (
        report.ok,
        report.empty,
        report.checked,
        report.head_chain_hash,
    )


def test_emptied_log_fails_against_its_checkpoint(tmp_path: Path) -> None:
    """Every row deleted: empty, and the checkpoint shows the whole tail was cut."""
    path = tmp_path / "log.db"
    make_log(path)
    taken = checkpoint(path)
    conn = _raw(path)
    conn.execute("DELETE FROM fl_events")
    conn.close()
    report = verify(path, checkpoint=taken)
    assert (False, True, AuditProblem.TAIL_CUT, 1) == (
        report.ok,
        report.empty,
        report.problem,
        report.first_bad_position,
    )


def test_every_event_kind_takes_the_fast_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The walk decodes every kind without falling back to the full decoder."""
    path = tmp_path / "log.db"
    log = open_log(path)
    log.append_many(EVERY_KIND)
    log.close()

    def no_fallback(self: ChainWalker, row: object) -> bytes:
        raise AssertionError(f"fell back to the full check at {row}")

    monkeypatch.setattr(ChainWalker, "feed", no_fallback)
    assert (True, len(EVERY_KIND)) == (verify(path).ok, verify(path).checked)


@pytest.mark.parametrize(
    ("forge", "problem"),
    [
        (  # a lone surrogate in the chained body: the row no longer links
            'UPDATE fl_events SET body = CAST(replace(CAST(body AS TEXT), \'"key":"users"\', '
            '\'"key":"\\ud800"\') AS BLOB) WHERE position = 2',
            AuditProblem.CHAIN_BROKEN,
        ),
        (  # bytes that are not UTF-8 as the text beside it
            "UPDATE fl_content SET text = X'EDA080' WHERE position = 2",
            AuditProblem.CONTENT_MISMATCH,
        ),
        (  # bytes that are not UTF-8 as the event id column: the chunk is read as bytes
            "UPDATE fl_events SET event_id = X'FF' || CAST(event_id AS BLOB) WHERE position = 2",
            AuditProblem.CONTENT_MISMATCH,
        ),
    ],
    ids=["body", "text beside", "event id"],
)
def test_text_that_is_not_unicode_is_reported_not_raised(
    tmp_path: Path, forge: str, problem: AuditProblem
) -> None:
    """A forged row holding text that is not Unicode is reported at its position, not a
    crash."""
    path = tmp_path / "log.db"
    make_log(path)
    conn = _raw(path)
    before = conn.execute("SELECT body FROM fl_events WHERE position = 2").fetchone()[0]
    conn.execute(forge)
    conn.close()
    with closing(sqlite3.connect(path)) as conn:
        after = conn.execute("SELECT body FROM fl_events WHERE position = 2").fetchone()[0]
    assert (before != after) == (problem is AuditProblem.CHAIN_BROKEN)
    report = verify(path)
    assert (False, problem, 2) == (report.ok, report.problem, report.first_bad_position)


def test_a_body_over_the_read_limit_is_streamed_and_reported(tmp_path: Path) -> None:
    """A row whose body an edit made larger than a reader decodes is hashed as a stream
    (the chunk's other rows read as usual) and reported at its position."""
    path = tmp_path / "log.db"
    make_log(path, 6)
    conn = _raw(path)
    conn.execute(
        "UPDATE fl_events SET body = CAST(body AS BLOB) || zeroblob(300000) WHERE position = 2"
    )
    conn.close()
    report = verify(path)
    assert (False, AuditProblem.CHAIN_BROKEN, 2, 1) == (
        report.ok,
        report.problem,
        report.first_bad_position,
        report.checked,
    )


def delete_late_row(path: Path, _: Path) -> None:
    conn = _raw(path)
    conn.execute("DELETE FROM fl_events WHERE position = 31")
    conn.close()


def delete_rows_at_a_batch_end(path: Path, _: Path) -> None:
    conn = _raw(path)
    conn.execute("DELETE FROM fl_events WHERE position IN (11, 12)")
    conn.close()


@pytest.mark.parametrize(
    "tamper",
    [None, delete_late_row, delete_rows_at_a_batch_end, TABLE["row edited, chain recomputed"][0]],
    ids=["untouched", "row deleted late", "rows deleted at a batch end", "chain recomputed"],
)
def test_walking_in_small_batches_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tamper: Tamper | None
) -> None:
    """The report is the same whether the walk reads the log in one batch or in many, cut
    inside the checkpoint's tree and at its size."""
    path = tmp_path / "log.db"
    make_log(path, 40)
    taken = Checkpoint.parse(str(checkpoint(path)))
    log = open_log(path)
    log.append_many([memory(f"after {i}") for i in range(7)])
    log.close()
    if tamper is not None:
        tamper(path, tmp_path)
    whole = verify(path, checkpoint=taken)
    monkeypatch.setattr(walk_workers, "BATCH", 6)
    assert whole == verify(path, checkpoint=taken)


def test_problem_values_are_the_ones_reports_have_always_shown() -> None:
    """One enum names every problem, for eventlog's walk and replay's verify alike."""
    assert eventlog.Problem is AuditProblem
    assert [
        "row_missing",
        "rows_reordered",
        "undecodable",
        "content_mismatch",
        "chain_broken",
        "other_log",
        "tail_cut",
        "history_rewritten",
        "log_missing",
        "read_model_drift",
        "previous_log_mismatch",
    ] == [problem.value for problem in AuditProblem]


def test_progress_is_reported_up_to_the_total(tmp_path: Path) -> None:
    """progress(done, total) is called as the walk goes, ending at the total."""
    path = tmp_path / "log.db"
    make_log(path, 10)
    calls: list[tuple[int, int]] = []
    verify(path, progress=lambda done, total: calls.append((done, total)))
    assert (10, 10) == calls[-1]
    assert sorted(calls) == calls


def test_report_renders_as_json_and_text(tmp_path: Path) -> None:
    """Reports are plain msgspec data: JSON round-trips, text names every field."""
    path = tmp_path / "log.db"
    make_log(path)
    report = verify(path, checkpoint=checkpoint(path))
    assert report == msgspec.json.decode(to_json(report), type=AuditReport)
    assert "head_chain_hash" in to_text(report) and "chain_hash" in to_text(report)


def test_verify_opens_read_only_and_writes_nothing(tmp_path: Path) -> None:
    """verify leaves the database file byte for byte as it was."""
    path = tmp_path / "log.db"
    make_log(path)
    before = path.read_bytes()
    verify(path)
    assert before == path.read_bytes()


def test_verify_errors_for_bad_arguments(tmp_path: Path) -> None:
    """No file, a wrong type, or a bad checkpoint or progress are refused clearly."""
    path = tmp_path / "log.db"
    make_log(path)
    with pytest.raises(StorageError):
        verify(tmp_path / "absent.db")
    with pytest.raises(InvalidTypeError):
        verify(3)  # type: ignore[arg-type]
    with pytest.raises(InvalidTypeError):
        verify(path, checkpoint="factledger/x\n0\n")  # type: ignore[arg-type]
    with pytest.raises(InvalidTypeError):
        verify(path, progress=5)  # type: ignore[arg-type]
