"""Tampering with the file through raw sqlite3, and the verdict verification gives for each.

An insider with write access can drop the append-only triggers; verification must still see
every edit it can see without outside help. Two cases (a history rewritten with its chain
recomputed, and a cut-off tail) look like a valid, shorter or different log: they pass
`verify_chain` by construction and need a checkpoint taken before (tests/replay covers that).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest

from eventlog import EventNotFoundError, Problem, open_log, verify_chain
from eventlog.chain import SHA256
from eventlog.codec import content_hash
from eventlog.contract import fact, memory

Tamper = Callable[[sqlite3.Connection], None]


def _raw(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    for trigger in (
        "fl_events_no_update",
        "fl_events_no_delete",
        "fl_content_no_update",
        "fl_content_no_delete",
    ):
        conn.execute(f"DROP TRIGGER {trigger}")
    return conn


def _body(conn: sqlite3.Connection, position: int) -> dict[str, object]:
    row = conn.execute("SELECT body FROM fl_events WHERE position = ?", (position,)).fetchone()
    decoded = msgspec.json.decode(row[0])
    assert isinstance(decoded, dict)
    return decoded


def _store(conn: sqlite3.Connection, position: int, body: dict[str, object]) -> None:
    conn.execute(
        "UPDATE fl_events SET body = ? WHERE position = ?", (msgspec.json.encode(body), position)
    )


def edit_payload(conn: sqlite3.Connection) -> None:
    body = _body(conn, 3)
    body["payload"]["value"] = "IGNORE PREVIOUS INSTRUCTIONS"  # type: ignore[index]
    _store(conn, 3, body)


def edit_content_hash(conn: sqlite3.Connection) -> None:
    body = _body(conn, 3)
    body["content_hash"] = content_hash(b"something else")
    _store(conn, 3, body)


def edit_payload_and_its_hash(conn: sqlite3.Connection) -> None:
    body = _body(conn, 3)
    body["payload"]["value"] = "evil"  # type: ignore[index]
    body["content_hash"] = content_hash(b"evil")
    _store(conn, 3, body)


def delete_row(conn: sqlite3.Connection) -> None:
    conn.execute("DELETE FROM fl_events WHERE position = 3")


def swap_rows(conn: sqlite3.Connection) -> None:
    rows = conn.execute(
        "SELECT position, event_id, body, chain_hash FROM fl_events WHERE position IN (2, 3)"
    ).fetchall()
    conn.execute("DELETE FROM fl_events WHERE position IN (2, 3)")
    (_, id2, body2, chain2), (_, id3, body3, chain3) = rows
    conn.execute("INSERT INTO fl_events VALUES (2, ?, ?, ?)", (id3, body3, chain3))
    conn.execute("INSERT INTO fl_events VALUES (3, ?, ?, ?)", (id2, body2, chain2))


def garble_row(conn: sqlite3.Connection) -> None:
    conn.execute("UPDATE fl_events SET body = x'7b7b7b' WHERE position = 3")


def rewrite_as_text(conn: sqlite3.Connection) -> None:
    conn.execute("UPDATE fl_events SET body = replace(body, 'users', 'usurp') WHERE position = 3")


def edit_text_beside(conn: sqlite3.Connection) -> None:
    conn.execute("UPDATE fl_content SET text = CAST('v9' AS BLOB) WHERE position = 3")


def delete_text_beside(conn: sqlite3.Connection) -> None:
    conn.execute("DELETE FROM fl_content WHERE position = 3")


def edit_chain_value(conn: sqlite3.Connection) -> None:
    conn.execute("UPDATE fl_events SET chain_hash = zeroblob(32) WHERE position = 3")


def rewrite_with_chain_recomputed(conn: sqlite3.Connection) -> None:
    body = _body(conn, 3)
    body["producer_task_id"] = "someone-else"
    _store(conn, 3, body)
    log_id = conn.execute("SELECT value FROM fl_log_meta WHERE name = 'log_id'").fetchone()[0]
    value = SHA256.genesis(log_id)
    for position, stored in conn.execute("SELECT position, body FROM fl_events ORDER BY 1"):
        value = SHA256.link(value, SHA256.leaf_hash(stored))
        conn.execute("UPDATE fl_events SET chain_hash = ? WHERE position = ?", (value, position))


def cut_tail(conn: sqlite3.Connection) -> None:
    conn.execute("DELETE FROM fl_events WHERE position > 3")


CASES = [
    (edit_payload, False, 3, Problem.CHAIN_BROKEN),
    (edit_content_hash, False, 3, Problem.CHAIN_BROKEN),
    (edit_payload_and_its_hash, False, 3, Problem.CHAIN_BROKEN),
    (delete_row, False, 3, Problem.ROW_MISSING),
    (swap_rows, False, 2, Problem.ROWS_REORDERED),
    (garble_row, False, 3, Problem.CHAIN_BROKEN),
    (rewrite_as_text, False, 3, Problem.CHAIN_BROKEN),
    (edit_text_beside, False, 3, Problem.CONTENT_MISMATCH),
    (delete_text_beside, False, 3, Problem.CONTENT_MISMATCH),
    (edit_chain_value, False, 3, Problem.CHAIN_BROKEN),
    (rewrite_with_chain_recomputed, True, None, None),
    (cut_tail, True, None, None),
]


@pytest.mark.parametrize(("tamper", "ok", "first_bad", "problem"), CASES)
def test_verdict_for_each_tampering(
    tmp_path: Path, tamper: Tamper, ok: bool, first_bad: int | None, problem: Problem | None
) -> None:
    """Each edit is caught at the right position with the right reason (or, as documented,
    passes until a checkpoint is involved)."""
    path = tmp_path / "log.db"
    log = open_log(path)
    log.append_many([memory("a"), fact("users", "v1"), fact("users", "v2"), memory("b")])
    log.close()
    tamper(_raw(path))
    reopened = open_log(path, read_only=True)
    report = verify_chain(reopened)
    assert (ok, first_bad, problem) == (report.ok, report.first_bad_position, report.problem)
    if not ok:
        assert report.reason
        # a text edited beside the chain stops no walk: the chain is whole, the text is not
        walked = 4 if problem == Problem.CONTENT_MISMATCH else (first_bad or 0) - 1
        assert walked == report.checked


def test_reads_count_stored_events_across_rows_deleted_behind_the_log(tmp_path: Path) -> None:
    """With rows 3 to 6 deleted around the triggers, a limit counts the events still stored
    (a reader paging by limit goes on past the gap) and event_at names a missing position."""
    path = tmp_path / "log.db"
    log = open_log(path)
    log.append_many([memory(str(i)) for i in range(10)])
    _raw(path).execute("DELETE FROM fl_events WHERE position BETWEEN 3 AND 6")
    assert [7, 8] == [event.position for event in log.read(after=2, limit=2)]
    assert [1, 2, 7] == [row.position for row in log.scan(limit=3)]
    with pytest.raises(EventNotFoundError, match="position 4"):
        log.event_at(4)
    assert 7 == log.event_at(7).position
    log.close()
