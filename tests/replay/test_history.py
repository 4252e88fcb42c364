"""history, blame and diff over a small scripted history of facts."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from eventlog import (
    EventNotFoundError,
    FactPublished,
    InvalidInputError,
    InvalidTypeError,
    NewEvent,
    QuarantineApplied,
    QuarantineReleased,
    RecordedEvent,
    StorageError,
    open_log,
)
from projections import CrossTaskKB, SQLiteMemoryStore
from replay import FactChange, Ledger, blame, diff, history
from replay.cli.output import to_json, to_text
from tests.conftest import Clock

StoreFactory = Callable[..., SQLiteMemoryStore]


def script(store: SQLiteMemoryStore) -> None:
    """The history every test reads (positions in brackets).

    [1] task-a (claude-code, run-1) publishes project api/base_url = v1
    [2] task-b (codex, run-2) publishes project api/base_url = v2
    [3] task-a publishes run-1 api/timeout = 30
    [4] a memory entry, not a fact
    [5] task-b publishes project api/base_url = v3
    [6] quarantine of everything task-b wrote: base_url falls back to v1
    [7] task-a publishes project db/url = pg
    [8] release of [6]: base_url is v3 again
    """
    a = CrossTaskKB(store, run_id="run-1", producer_task_id="task-a", source_adapter="claude-code")
    b = CrossTaskKB(store, run_id="run-2", producer_task_id="task-b", source_adapter="codex")
    a.publish("api", "base_url", "v1", scope="project")
    b.publish("api", "base_url", "v2", scope="project")
    a.publish("api", "timeout", "30", scope="run")
    store.add("learning", "not a fact", ["api"])
    b.publish("api", "base_url", "v3", scope="project")
    quarantine = QuarantineApplied(reason="suspect", match_producer_task_id="task-b")
    store._append([NewEvent(payload=quarantine, producer_task_id="responder")])
    a.publish("db", "url", "pg", scope="project")
    release = QuarantineReleased(quarantine_position=6, reason="cleared")
    store._append([NewEvent(payload=release, producer_task_id="responder")])


def events(store: SQLiteMemoryStore) -> dict[int, RecordedEvent]:
    return {record.position: record for record in store.event_log.read()}


@pytest.fixture
def scripted(store: SQLiteMemoryStore) -> SQLiteMemoryStore:
    script(store)
    return store


def test_history_lists_every_version_with_provenance(
    scripted: SQLiteMemoryStore, ledger: Ledger
) -> None:
    """Each version carries its event's id, time, producer, adapter, hash and what it replaced."""
    report = ledger.history(scope="project", tag="api", key="base_url")
    logged = events(scripted)
    assert 8 == report.at_position
    assert [
        (1, "v1", "task-a", "claude-code", "run-1", None, "superseded"),
        (2, "v2", "task-b", "codex", "run-2", 1, "superseded"),
        (5, "v3", "task-b", "codex", "run-2", 2, "current"),
    ] == [
        (
            v.position,
            v.value,
            v.producer_task_id,
            v.source_adapter,
            v.run_id,
            v.replaced_position,
            v.status,
        )
        for v in report.versions
    ]
    for version in report.versions:
        record = logged[version.position]
        assert (record.event_id, record.ts_ns, record.content_hash) == (
            version.event_id,
            version.ts_ns,
            version.content_hash,
        )


def test_history_marks_quarantined_versions(store: SQLiteMemoryStore, ledger: Ledger) -> None:
    """Under an active quarantine the covered versions say so, and the fallback is current."""
    script(store)
    quarantine = QuarantineApplied(reason="again", match_source_adapter="codex")
    store._append([NewEvent(payload=quarantine)])
    statuses = [(v.position, v.status) for v in ledger.history(tag="api", key="base_url").versions]
    assert [(1, "current"), (2, "quarantined"), (5, "quarantined")] == statuses


def test_history_filters_combine(scripted: SQLiteMemoryStore, ledger: Ledger) -> None:
    """No filter lists every version in log order; filters narrow by scope, tag, key and run."""
    assert [1, 2, 3, 5, 7] == [v.position for v in ledger.history().versions]
    assert [3] == [v.position for v in ledger.history(scope="run").versions]
    assert [7] == [v.position for v in ledger.history(tag="db").versions]
    assert [1, 3, 7] == [v.position for v in ledger.history(run_id="run-1").versions]
    assert [] == ledger.history(tag="api", key="missing").versions


def test_blame_names_the_event_that_set_each_current_fact(
    scripted: SQLiteMemoryStore, ledger: Ledger
) -> None:
    """For each current fact: its event, producer, adapter, time and versions before it."""
    report = ledger.blame()
    logged = events(scripted)
    assert [
        ("project", None, "api", "base_url", "v3", 5, "task-b", "codex", 2),
        ("project", None, "db", "url", "pg", 7, "task-a", "claude-code", 0),
        ("run", "run-1", "api", "timeout", "30", 3, "task-a", "claude-code", 0),
    ] == [
        (
            line.scope,
            line.run_id,
            line.tag,
            line.key,
            line.value,
            line.position,
            line.producer_task_id,
            line.source_adapter,
            line.versions_before,
        )
        for line in report.facts
    ]
    assert [(logged[p].event_id, logged[p].ts_ns) for p in (5, 7, 3)] == [
        (line.event_id, line.ts_ns) for line in report.facts
    ]
    assert ["timeout"] == [line.key for line in ledger.blame(scope="run").facts]
    assert ["url"] == [line.key for line in ledger.blame(tag="db").facts]
    assert ["base_url"] == [line.key for line in ledger.blame(run_id="run-2").facts]


def test_blame_over_a_read_model_naming_no_event_says_which_position(
    db_path: Path, scripted: SQLiteMemoryStore
) -> None:
    """A current-fact row edited to point past the log is refused with the position it
    names (it was an internal StopIteration)."""
    scripted.close()
    with sqlite3.connect(db_path) as raw:
        raw.execute("UPDATE fl_fact SET position = 999 WHERE position = 7")
        raw.execute("UPDATE fl_fact_current SET position = 999 WHERE position = 7")
    with pytest.raises(EventNotFoundError, match="position 999") as raised:
        blame(db_path)
    assert 999 == raised.value.position


def changes(report_changes: list[FactChange]) -> list[tuple[Any, ...]]:
    return [
        (c.tag, c.key, c.old_value, c.new_value, c.old_position, c.new_position, c.by_position)
        for c in report_changes
    ]


def test_diff_from_the_start_adds_every_current_fact(
    scripted: SQLiteMemoryStore, ledger: Ledger
) -> None:
    """From position 0, every fact current at the end is added, credited to the last event
    that made its version current (for base_url, the release that restored v3)."""
    report = ledger.diff(0, 8)
    assert [
        ("api", "base_url", None, "v3", None, 5, 8),
        ("db", "url", None, "pg", None, 7, 7),
        ("api", "timeout", None, "30", None, 3, 3),
    ] == changes(report.added)
    assert ([], []) == (report.changed, report.removed)


def test_diff_credits_a_quarantine_and_its_release(
    scripted: SQLiteMemoryStore, ledger: Ledger
) -> None:
    """A quarantine moving a fact back to an older version, and its release, are the causes."""
    quarantined = ledger.diff(5, 6)
    assert [("api", "base_url", "v3", "v1", 5, 1, 6)] == changes(quarantined.changed)
    assert ("quarantine_applied", "responder") == (
        quarantined.changed[0].by_kind,
        quarantined.changed[0].by_producer_task_id,
    )
    released = ledger.diff(6, 8)
    assert [("api", "base_url", "v1", "v3", 1, 5, 8)] == changes(released.changed)
    assert [("db", "url", None, "pg", None, 7, 7)] == changes(released.added)
    assert "quarantine_released" == released.changed[0].by_kind


def test_diff_ignores_changes_that_cancel_out(scripted: SQLiteMemoryStore, ledger: Ledger) -> None:
    """A fact that ends where it began is not in the diff, whatever happened in between."""
    report = ledger.diff(5, 8)
    assert [] == report.changed
    assert ["url"] == [c.key for c in report.added]


def test_diff_credits_a_publish_with_its_provenance(
    scripted: SQLiteMemoryStore, ledger: Ledger
) -> None:
    """A changed value names the publishing event's id, producer, adapter and time."""
    (change,) = ledger.diff(1, 2).changed
    record = events(scripted)[2]
    assert (2, record.event_id, "fact_published", "task-b", "codex", record.ts_ns) == (
        change.by_position,
        change.by_event_id,
        change.by_kind,
        change.by_producer_task_id,
        change.by_source_adapter,
        change.by_ts_ns,
    )


def test_diff_reports_a_fact_removed_by_quarantine(
    store: SQLiteMemoryStore, ledger: Ledger
) -> None:
    """A fact whose every version is quarantined is removed, credited to the quarantine."""
    kb = CrossTaskKB(store, producer_task_id="suspect")
    kb.publish("api", "only", "x", scope="project")
    store._append(
        [NewEvent(payload=QuarantineApplied(reason="r", match_producer_task_id="suspect"))]
    )
    report = ledger.diff(1, 2)
    assert [("api", "only", "x", None, 1, None, 2)] == changes(report.removed)
    assert "removed" == report.removed[0].change


def test_diff_filters_by_tag(scripted: SQLiteMemoryStore, ledger: Ledger) -> None:
    """With a tag, only facts under that exact tag are compared."""
    report = ledger.diff(0, 8, tag="db")
    assert ["url"] == [c.key for c in report.added]
    assert "db" == report.tag


def test_history_folds_the_log_when_the_read_model_is_behind(
    db_path: Path, scripted: SQLiteMemoryStore, ledger: Ledger
) -> None:
    """A version appended without projection still appears: the log is the truth."""
    bare = open_log(db_path)
    bare.append(
        NewEvent(
            payload=FactPublished(scope="project", tag="api", key="base_url", value="v4"),
            producer_task_id="bare",
        )
    )
    bare.close()
    versions = ledger.history(tag="api", key="base_url").versions
    assert [(5, "superseded"), (9, "current")] == [(v.position, v.status) for v in versions][-2:]
    assert [9] == [line.position for line in ledger.blame(tag="api", scope="project").facts]


def test_history_is_read_only(scripted: SQLiteMemoryStore, ledger: Ledger) -> None:
    """Reading history, blame and diff appends nothing."""
    head = scripted.event_log.head()
    ledger.history()
    ledger.blame()
    ledger.diff(0, 8)
    assert head == scripted.event_log.head()


def test_reports_render_as_json_and_text(scripted: SQLiteMemoryStore, ledger: Ledger) -> None:
    """Every report renders with the shared JSON and text renderers."""
    for report in (ledger.history(), ledger.blame(), ledger.diff(0, 8)):
        assert to_json(report).startswith("{")
        assert "base_url" in to_text(report)


def test_ts_ns_is_reported_not_used_for_order(
    store: SQLiteMemoryStore, clock: Clock, ledger: Ledger
) -> None:
    """A version stamped earlier but written later is still the newer version."""
    kb = CrossTaskKB(store, clock_ns=clock)
    kb.publish("api", "k", "first", scope="project")
    clock.advance(-60)
    kb.publish("api", "k", "second", scope="project")
    (line,) = ledger.blame().facts
    assert ("second", clock.now_ns) == (line.value, line.ts_ns)


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda ledger: ledger.diff(5, 2), InvalidInputError),
        (lambda ledger: ledger.diff(0, 9), InvalidInputError),
        (lambda ledger: ledger.diff(-1, 2), InvalidInputError),
        (lambda ledger: ledger.diff(0, "8"), InvalidTypeError),  # type: ignore[arg-type]
        (lambda ledger: ledger.diff(0, 8, tag="a,b"), InvalidInputError),
        (lambda ledger: ledger.history(scope="global"), InvalidInputError),
        (lambda ledger: ledger.history(tag=""), InvalidInputError),
        (lambda ledger: ledger.history(key=3), InvalidTypeError),  # type: ignore[arg-type]
        (lambda ledger: ledger.blame(run_id=" padded "), InvalidInputError),
    ],
)
def test_bad_arguments_are_refused(
    scripted: SQLiteMemoryStore, ledger: Ledger, call: Callable[[Ledger], object], error: type
) -> None:
    """Bad positions, tags, scopes, keys and run ids raise the package's errors."""
    with pytest.raises(error):
        call(ledger)


@pytest.mark.parametrize(
    "call",
    [lambda p: history(p), lambda p: blame(p), lambda p: diff(p, 0, 0)],
    ids=["history", "blame", "diff"],
)
def test_missing_database_is_a_storage_error(
    tmp_path: Path, call: Callable[[Path], object]
) -> None:
    """Audit reads (here the one-call functions, each opening a read-only `Ledger`) never
    create a database."""
    with pytest.raises(StorageError):
        call(tmp_path / "missing.db")
    assert [] == list(tmp_path.iterdir())
