"""Snapshots of the read model: past states folded from the nearest usable one equal the
same states folded from the first event; a snapshot that does not hold against the log is
never used; writing them is an operator's act with clear errors."""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from eventlog import InvalidInputError, InvalidTypeError, ReadOnlyStoreError, StorageError
from projections import CrossTaskKB, SQLiteMemoryStore
from replay import Ledger, ReadOnlyLedgerError, generate_key, read_operator_key
from tests.histories import HISTORIES, Operation, play
from tests.read_models import ReadModelUnderTest

EVENTS = 40


def observe(view: Any) -> dict[str, Any]:
    """What a reader of a past state sees: facts, history, entries, by tag."""
    run = CrossTaskKB(view, run_id="run-1")
    return {
        "project": list(run.subscribe("api", scope="project")),
        "run": list(run.subscribe("api", scope="run")),
        "history": run.history("api", "k1", scope="project"),
        "list": view.list(limit=100),
        "relevant": view.get_relevant(["api", "db"], limit=5),
    }


def grow(store: SQLiteMemoryStore, events: int = EVENTS) -> None:
    """`events` events: entries, facts that change, a quarantine."""
    kb = CrossTaskKB(store, run_id="run-1", producer_task_id="t", source_adapter="codex")
    for i in range(events // 2):
        store.add("learning", f"note {i}", ["api", "db"][: 1 + i % 2], 0.5)
        kb.publish("api", f"k{i % 3}", f"v{i}", scope="project" if i % 2 else "run")


def directory(ledger: Ledger) -> Path:
    return Path(f"{ledger.cache or ledger.target}.snapshots")


def states(ledger: Ledger, positions: range) -> dict[int, tuple[dict[str, Any], int, int]]:
    """Each position's observation, and the snapshot and event count its fold used."""
    found = {}
    for position in positions:
        with ledger.as_of(position=position) as view:
            assert view.folded_from is not None and view.events_folded is not None
            found[position] = (observe(view), view.folded_from, view.events_folded)
    return found


def file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def grown(store: SQLiteMemoryStore, ledger: Ledger) -> Ledger:
    grow(store)
    return ledger


@pytest.mark.read_models
def test_as_of_from_snapshots_equals_as_of_from_the_first_event(grown: Ledger) -> None:
    """At every position, a view folded from the nearest snapshot shows what a view folded
    from the first event shows, and folds only the events since that snapshot."""
    head = grown.event_log.head().position
    without = states(grown, range(head + 1))
    taken = grown.snapshot(every=7, keep=100)
    assert list(range(7, head + 1, 7)) == taken.written
    with_snapshots = states(grown, range(head + 1))
    for position in range(head + 1):
        nearest = position - position % 7
        assert (without[position][0], nearest, position - nearest) == with_snapshots[position]
        assert (0, position) == without[position][1:]


@pytest.mark.read_models
def test_diff_and_history_at_from_snapshots_equal_them_from_the_first_event(
    grown: Ledger,
) -> None:
    """diff between any two positions, and history at any position, are the same with
    snapshots as without."""
    head = grown.event_log.head().position
    pairs = [(a, b) for a in range(0, head + 1, 5) for b in range(a, head + 1, 9)]
    diffs = [grown.diff(a, b) for a, b in pairs]
    histories = [grown.history(at=p) for p in range(head + 1)]
    grown.snapshot(every=6, keep=100)
    assert diffs == [grown.diff(a, b) for a, b in pairs]
    assert histories == [grown.history(at=p) for p in range(head + 1)]
    assert grown.history() == grown.history(at=head)


def test_blast_radius_at_shows_what_it_showed_then(
    store: SQLiteMemoryStore, ledger: Ledger
) -> None:
    """blast_radius at a past position equals the blast radius taken back then, with
    snapshots and without."""
    seen = {}
    kb = CrossTaskKB(store, run_id="run-1", producer_task_id="t")
    for i in range(8):
        kb.publish("api", f"k{i % 2}", f"v{i}", scope="project", source_adapter="codex")
        store.add("learning", f"note {i}", ["api"], source_adapter="claude-code")
        CrossTaskKB(store, run_id="run-2", producer_task_id=f"r{i}").subscribe(
            "api", scope="project"
        )
        seen[store.event_log.head().position] = ledger.blast_radius(source_adapter="codex")
    assert seen == {p: ledger.blast_radius(source_adapter="codex", at=p) for p in seen}
    ledger.snapshot(every=3, keep=10)
    assert seen == {p: ledger.blast_radius(source_adapter="codex", at=p) for p in seen}
    with pytest.raises(InvalidInputError, match="past the log head"):
        ledger.blast_radius(source_adapter="codex", at=max(seen) + 1)


def test_history_at_shows_what_history_showed_then(
    store: SQLiteMemoryStore, ledger: Ledger
) -> None:
    """history at a past position equals history taken at the head back then."""
    seen = {}
    kb = CrossTaskKB(store, run_id="run-1", producer_task_id="t")
    for i in range(12):
        kb.publish("api", f"k{i % 2}", f"v{i}", scope="project")
        seen[store.event_log.head().position] = ledger.history()
    ledger.snapshot(every=4, keep=10)
    for position, expected in seen.items():
        assert expected == ledger.history(at=position)


def test_a_past_state_folds_from_the_nearest_snapshot_and_leaves_it_unchanged(
    grown: Ledger,
) -> None:
    """The nearest snapshot at or before the position is used, the events after it are the
    only ones folded, and the snapshot file is byte for byte as it was afterwards."""
    grown.snapshot(every=10, keep=10)
    before = {p.name: file_digest(p) for p in directory(grown).glob("at-*.sqlite")}
    with grown.as_of(position=27) as view:
        assert (20, 7) == (view.folded_from, view.events_folded)
        assert view.list(limit=100)
    with grown.as_of(position=9) as view:
        assert (0, 9) == (view.folded_from, view.events_folded)
    assert before == {p.name: file_digest(p) for p in directory(grown).glob("at-*.sqlite")}


@pytest.mark.read_models
def test_a_second_user_of_a_busy_snapshot_folds_a_copy(grown: Ledger) -> None:
    """Two views open at once over the same snapshot both fold from it and agree."""
    grown.snapshot(every=10, keep=10)
    with grown.as_of(position=25) as first, grown.as_of(position=25) as second:
        assert (20, 5) == (first.folded_from, first.events_folded)
        assert (20, 5) == (second.folded_from, second.events_folded)
        assert observe(first) == observe(second)


def test_keep_removes_all_but_the_newest(grown: Ledger) -> None:
    """Only the newest --keep multiples are written, and older snapshots are removed."""
    first = grown.snapshot(every=5, keep=100)
    assert [5, 10, 15, 20, 25, 30, 35, 40] == first.written
    second = grown.snapshot(every=5, keep=3)
    assert ([], [5, 10, 15, 20, 25]) == (second.written, second.removed)
    names = sorted(p.name for p in directory(grown).glob("at-*.sqlite"))
    assert ["at-000000000030.sqlite", "at-000000000035.sqlite", "at-000000000040.sqlite"] == names


@pytest.mark.read_models
def test_a_later_run_folds_only_from_the_newest_snapshot(
    store: SQLiteMemoryStore, grown: Ledger
) -> None:
    """A run after more appends starts from the newest usable snapshot."""
    grown.snapshot(every=10, keep=10)
    grow(store, 20)
    taken = grown.snapshot(every=10, keep=10)
    assert ([50, 60], 40, 20) == (taken.written, taken.folded_from, taken.events_folded)
    assert [(p, True) for p in (10, 20, 30, 40, 50, 60)] == [
        (c.position, c.matches) for c in grown.check_snapshots()
    ]


@pytest.mark.parametrize(
    ("every", "keep", "error"),
    [
        (0, 1, InvalidInputError),
        (1, 0, InvalidInputError),
        (-5, 1, InvalidInputError),
        ("5", 1, InvalidTypeError),
        (True, 1, InvalidTypeError),
        (5, 2.0, InvalidTypeError),
    ],
)
def test_bad_every_or_keep_is_refused(grown: Ledger, every: Any, keep: Any, error: type) -> None:
    """A count that is not a positive int is a clear error, and nothing is written."""
    with pytest.raises(error):
        grown.snapshot(every=every, keep=keep)
    assert not directory(grown).exists()


@pytest.mark.read_models
def test_a_read_only_ledger_writes_no_snapshot(
    grown: Ledger, read_model: ReadModelUnderTest, db_path: Path
) -> None:
    """Asked for a snapshot, a ledger opened read-only refuses it and writes nothing."""
    log, cache = read_model.where(db_path)
    with Ledger.open(log, cache=cache) as reader:
        with pytest.raises(ReadOnlyLedgerError):
            reader.snapshot(every=5)
        with pytest.raises(ReadOnlyLedgerError):
            reader.checkpoint(snapshot=True)
        reader.checkpoint()
    assert not directory(grown).exists()


def test_positions_past_the_head_are_refused(grown: Ledger) -> None:
    """history --at and as-of past the head are clear errors."""
    with pytest.raises(InvalidInputError, match="past the log head"):
        grown.history(at=41)
    with pytest.raises(InvalidInputError, match="past the log head"):
        grown.as_of(position=41)


@pytest.mark.read_models
def test_a_checkpoint_writes_a_snapshot_once_they_are_enabled(
    store: SQLiteMemoryStore, grown: Ledger
) -> None:
    """A writable ledger's checkpoint adds one at the head only where snapshots exist."""
    grown.checkpoint()
    assert not directory(grown).exists()
    grown.snapshot(every=30, keep=5)
    store.add("learning", "one more", ["api"])
    grown.checkpoint()
    assert [30, 41] == sorted(int(p.name[3:15]) for p in directory(grown).glob("at-*.sqlite"))
    with grown.as_of(position=41) as view:
        assert (41, 0) == (view.folded_from, view.events_folded)


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(operations=HISTORIES)
def test_any_history_reads_the_same_from_snapshots(
    make_store: Callable[..., SQLiteMemoryStore],
    ledger: Ledger,
    operations: list[Operation],
) -> None:
    """After any history of store operations, every past state folded from snapshots
    (taken every 3 events) equals the one folded from the first event."""
    shutil.rmtree(directory(ledger), ignore_errors=True)
    play(make_store(), operations)
    head = ledger.event_log.head().position
    start = max(0, head - 25)
    without = {p: s[0] for p, s in states(ledger, range(start, head + 1)).items()}
    ledger.snapshot(every=3, keep=1000)
    assert without == {p: s[0] for p, s in states(ledger, range(start, head + 1)).items()}


# -- a snapshot that does not hold against the log is never used --------------------------


@pytest.fixture
def snapped(grown: Ledger) -> Iterator[tuple[Ledger, Path]]:
    """A ledger with snapshots at 10, 20, 30 and 40; the one at 30 to tamper with."""
    grown.snapshot(every=10, keep=10)
    yield grown, directory(grown) / "at-000000000030.sqlite"


def edit(path: Path, statement: str, params: tuple[object, ...] = ()) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute(statement, params)
    conn.close()


def used_at(ledger: Ledger, position: int) -> tuple[int, list[str]]:
    """The snapshot a view at `position` folded from, and the reasons logged for those it
    skipped."""
    handler = Recorder()
    logger = logging.getLogger("factledger")
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.INFO)
    try:
        with ledger.as_of(position=position) as view:
            assert view.folded_from is not None
            folded_from = view.folded_from
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    return folded_from, [
        getattr(r, "reason", "") for r in handler.records if r.msg == "snapshot_ignored"
    ]


class Recorder(logging.Handler):
    """Keeps the records logged."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.mark.parametrize(
    ("statement", "params", "reason"),
    [
        ("UPDATE fl_snapshot SET chain_hash = ?", ("00" * 32,), "its chain value is not the log's"),
        ("UPDATE fl_snapshot SET log_id = ?", ("another-log",), "another log"),
        ("UPDATE fl_snapshot SET position = 20", (), "its position is not the one its name gives"),
        (
            "UPDATE fl_snapshot SET projectors = ?",
            ('{"knowledge": 0}',),
            "other projector versions",
        ),
        ("UPDATE fl_snapshot SET projectors = ?", ("not json",), "other projector versions"),
        ("UPDATE fl_snapshot SET format = 99", (), "another format"),
        ("UPDATE fl_snapshot SET position = 'x'", (), "its position is not the one its name gives"),
        ("DELETE FROM fl_snapshot", (), "no meta row"),
        ("DROP TABLE fl_snapshot", (), "no meta row"),
        ("DROP TABLE fl_fact", (), "a projector's table is missing"),
        (
            "CREATE TRIGGER forge AFTER INSERT ON fl_fact BEGIN "
            "UPDATE fl_fact SET value = 'forged' WHERE position = NEW.position; END",
            (),
            "it holds a trigger or a view",
        ),
        ("CREATE VIEW v AS SELECT 1", (), "it holds a trigger or a view"),
        (
            "CREATE INDEX forged ON fl_fact (value)",
            (),
            "its tables are not the ones this code writes",
        ),
        ("ALTER TABLE fl_fact ADD COLUMN x", (), "its tables are not the ones this code writes"),
    ],
)
def test_a_snapshot_with_forged_meta_is_skipped(
    snapped: tuple[Ledger, Path], statement: str, params: tuple[object, ...], reason: str
) -> None:
    """Forged meta (chain value, log id, position, projector versions, format), a missing
    table, or a schema this code does not write (a trigger that would bend each fold into
    the snapshot while its rows still match a refold, a view, an index, a column): the
    snapshot is skipped with its reason logged, and the next older one used."""
    ledger, path = snapped
    expected = observe_at(ledger, 35)
    edit(path, statement, params)
    assert (20, [reason]) == used_at(ledger, 35)
    assert expected == observe_at(ledger, 35)


def observe_at(ledger: Ledger, position: int) -> dict[str, Any]:
    with ledger.as_of(position=position) as view:
        return observe(view)


def test_a_snapshot_past_the_head_or_from_another_log_is_skipped(
    snapped: tuple[Ledger, Path], tmp_path: Path
) -> None:
    """A snapshot past the head (a log cut back under it) is reported unusable and removed by
    the next run; one copied in from another log with the same positions is never used."""
    ledger, path = snapped
    beyond = path.with_name("at-000000000099.sqlite")
    shutil.copy(path, beyond)
    edit(beyond, "UPDATE fl_snapshot SET position = 99")
    assert (40, []) == used_at(ledger, 40)
    [check] = [c for c in ledger.check_snapshots() if c.position == 99]
    assert (False, "past the log's head") == (check.usable, check.reason)
    assert [99] == ledger.snapshot(every=10, keep=10).removed
    other = tmp_path / "other" / "memory.db"
    with SQLiteMemoryStore(other) as store:
        grow(store)
    with Ledger.open(other, read_only=False) as theirs:
        theirs.snapshot(every=10, keep=10)
    shutil.copy(other.with_name("memory.db.snapshots") / path.name, path)
    assert (20, ["another log"]) == used_at(ledger, 35)


@pytest.mark.parametrize("damage", ["truncated", "garbage", "empty", "directory"])
def test_a_damaged_snapshot_file_is_skipped_not_a_crash(
    snapped: tuple[Ledger, Path], damage: str
) -> None:
    """A truncated, overwritten or empty file (or a directory by that name) is skipped."""
    ledger, path = snapped
    expected = observe_at(ledger, 35)
    if damage == "truncated":
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 3])
    elif damage == "garbage":
        path.write_bytes(b"not a database" * 100)
    elif damage == "empty":
        path.write_bytes(b"")
    else:
        path.unlink()
        path.mkdir()
    folded_from, reasons = used_at(ledger, 35)
    assert 20 == folded_from and reasons
    assert expected == observe_at(ledger, 35)
    assert 20 == ledger.as_of(position=35).folded_from


@pytest.mark.parametrize("kind", ["symlink-to-log", "symlink", "hard-link", "fifo"])
def test_a_snapshot_that_is_not_a_plain_file_is_never_opened(
    snapped: tuple[Ledger, Path], db_path: Path, kind: str
) -> None:
    """A symbolic link (to the log itself, or to a good snapshot), a hard link or a named
    pipe under a snapshot's name is skipped without being opened: the log's file is not
    locked or converted, and nothing hangs."""
    ledger, path = snapped
    good = path.with_name("at-000000000020.sqlite")
    path.unlink()
    if kind == "symlink-to-log":
        path.symlink_to(db_path)
    elif kind == "symlink":
        path.symlink_to(good)
    elif kind == "hard-link":
        os.link(good, path)
    else:
        os.mkfifo(path)
    before = file_digest(db_path)
    folded_from, reasons = used_at(ledger, 35)
    assert before == file_digest(db_path)
    if kind == "hard-link":  # both names of the linked file are skipped
        assert (10, ["not a plain file"] * 2) == (folded_from, reasons)
    else:
        assert (20, ["not a plain file"]) == (folded_from, reasons)
    [check] = [c for c in ledger.check_snapshots() if c.position == 30]
    assert (False, "not a plain file") == (check.usable, check.reason)


def test_a_snapshot_directory_that_is_a_symlink_is_refused(grown: Ledger, tmp_path: Path) -> None:
    """Snapshots are never written through, or read from, a directory that is a link."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    directory(grown).symlink_to(elsewhere)
    with pytest.raises(StorageError, match="symbolic link"):
        grown.snapshot(every=10)
    assert [] == list(elsewhere.iterdir())
    with grown.as_of(position=35) as view:
        assert 0 == view.folded_from


def test_an_edited_row_is_found_by_the_check(snapped: tuple[Ledger, Path]) -> None:
    """An edited row in a snapshot with intact meta is used (rows are trusted as the live
    read model's are) but `check_snapshots` names the snapshot and table that differ."""
    ledger, path = snapped
    edit(
        path,
        "UPDATE fl_fact SET value = 'forged' WHERE position = (SELECT max(position) FROM fl_fact)",
    )
    checks = ledger.check_snapshots()
    assert [(10, True), (20, True), (30, False), (40, True)] == [
        (c.position, c.matches) for c in checks
    ]
    assert ["fl_fact"] == checks[2].differing
    ledger.snapshot(every=10, keep=10)
    assert 30 == used_at(ledger, 35)[0]


def test_the_check_reports_unusable_snapshots(snapped: tuple[Ledger, Path]) -> None:
    """A snapshot whose meta does not hold is reported as not usable, with its reason."""
    ledger, path = snapped
    edit(path, "UPDATE fl_snapshot SET chain_hash = ?", ("ab" * 32,))
    [check] = [c for c in ledger.check_snapshots() if c.position == 30]
    assert (False, "its chain value is not the log's") == (check.usable, check.reason)


def test_a_write_through_a_view_is_refused_and_leaves_the_snapshot(
    snapped: tuple[Ledger, Path],
) -> None:
    """A view folded from a snapshot is sealed: a statement that writes is refused, and the
    snapshot file is unchanged."""
    ledger, path = snapped
    before = file_digest(path)
    with (
        ledger.as_of(position=33) as view,
        view.snapshot() as snap,
        pytest.raises(ReadOnlyStoreError),
    ):
        snap.execute("DELETE FROM fl_fact")
    assert before == file_digest(path)


def test_an_erasure_removes_every_snapshot_and_a_stale_one_is_skipped(
    snapped: tuple[Ledger, Path], tmp_path: Path
) -> None:
    """Snapshots may hold an erased text: an erasure removes them all, and one written
    before the erasure (restored from elsewhere) is never used."""
    ledger, path = snapped
    kept = tmp_path / "kept.sqlite"
    shutil.copy(path, kept)
    generate_key(tmp_path / "ops.key", name="ops")
    key = read_operator_key(tmp_path / "ops.key")
    ledger.add_operator(key.public, key=key)
    ledger.erase([2], reason="leaked", key=key)
    assert [] == list(directory(ledger).glob("at-*"))
    shutil.copy(kept, path)
    assert (0, ["written before an erasure"]) == used_at(ledger, 35)
