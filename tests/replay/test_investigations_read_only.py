"""Investigations never write the file they investigate: no catch-up, no import, no index.
A `Ledger` opened read-only (the default) investigates, and refuses every operator action
before it reads anything else."""

from __future__ import annotations

import hashlib
import io
from collections.abc import Callable
from pathlib import Path

import pytest

from eventlog import FactPublished, LogMissingError, NewEvent, open_log
from projections import CrossTaskKB, SQLiteMemoryStore, load_persistent_memory
from replay import Ledger, ReadOnlyLedgerError
from tests.projections.test_legacy import ROWS, legacy_file


def evidence(db_path: Path) -> tuple[str, int]:
    """The database file's digest, and the bytes waiting in its write-ahead log."""
    wal = db_path.with_name(db_path.name + "-wal")
    digest = hashlib.sha256(db_path.read_bytes()).hexdigest()
    return digest, wal.stat().st_size if wal.exists() else 0


@pytest.fixture
def behind(db_path: Path) -> Path:
    """A log whose read model is two events behind: opening a store would catch it up."""
    with SQLiteMemoryStore(db_path) as store:
        kb = CrossTaskKB(store, producer_task_id="researcher-1", source_adapter="claude-code")
        kb.publish("api", "users", "{name: str}", scope="project")
        load_persistent_memory(store, ["api"], task_id="backend-1", adapter="codex")
    bare = open_log(db_path)
    for value in ("v2", "v3"):
        fact = FactPublished(scope="project", tag="api", key="users", value=value)
        bare.append(NewEvent(payload=fact, producer_task_id="bare", source_adapter="evil"))
    bare.close()
    return db_path


Use = Callable[[Ledger], object]
INVESTIGATIONS: dict[str, Use] = {
    "verify": lambda ledger: ledger.verify(),
    "verify_deep": lambda ledger: ledger.verify(deep=True),
    "history": lambda ledger: ledger.history(tag="api"),
    "blame": lambda ledger: ledger.blame(),
    "diff": lambda ledger: ledger.diff(1, 4),
    "as_of": lambda ledger: ledger.as_of(position=4).list(),
    "blast_radius": lambda ledger: ledger.blast_radius(source_adapter="evil"),
    "lineage": lambda ledger: ledger.lineage(3),
    "operators": lambda ledger: ledger.operators(),
    "export": lambda ledger: ledger.export(io.StringIO()),
    "rebuild": lambda ledger: ledger.rebuild(),
    "checkpoint": lambda ledger: ledger.checkpoint(),
    "prove": lambda ledger: ledger.prove_inclusion(2, ledger.checkpoint()),
    "prove_consistency": lambda ledger: ledger.prove_consistency(
        ledger.checkpoint(), ledger.checkpoint()
    ),
}


@pytest.mark.parametrize("investigate", INVESTIGATIONS.values(), ids=INVESTIGATIONS.keys())
def test_investigations_leave_the_file_as_it_was(behind: Path, investigate: Use) -> None:
    """The file's bytes and its write-ahead log are unchanged after the investigation."""
    before = evidence(behind)
    with Ledger.open(behind) as ledger:
        investigate(ledger)
    assert before == evidence(behind)


def test_investigations_describe_the_whole_log_when_the_read_model_is_behind(
    behind: Path,
) -> None:
    """What the read model has not folded yet is folded in memory, not skipped."""
    with Ledger.open(behind) as ledger:
        assert ["{name: str}", "v2", "v3"] == [v.value for v in ledger.history(tag="api").versions]
        assert [3, 4] == [e.position for e in ledger.blast_radius(source_adapter="evil").events]
        assert "v3" == ledger.blame().facts[0].value


OPERATOR_ACTIONS: dict[str, Use] = {
    "quarantine": lambda ledger: ledger.quarantine(source_adapter="evil", reason="r"),
    "release": lambda ledger: ledger.release(1, reason="r"),
    "set_conflict_policy": lambda ledger: ledger.set_conflict_policy("api", "hold", owners=[]),
    "approve": lambda ledger: ledger.approve(3),
    "reject": lambda ledger: ledger.reject(3),
    "add_operator": lambda ledger: ledger.add_operator("missing.pub", key="missing.key"),
    "remove_operator": lambda ledger: ledger.remove_operator(
        "00000000", key="missing.key", reason="r"
    ),
    "import_legacy": lambda ledger: ledger.import_legacy("missing.db"),
    "rebuild_swap": lambda ledger: ledger.rebuild(swap=True),
}


@pytest.mark.parametrize("act", OPERATOR_ACTIONS.values(), ids=OPERATOR_ACTIONS.keys())
def test_a_read_only_ledger_refuses_every_operator_action_up_front(
    behind: Path, act: Use, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each operator action on a read-only `Ledger` raises `ReadOnlyLedgerError` naming the
    way out, before it reads a key or a file it names (none exists here), and the log's file
    is left as it was."""
    monkeypatch.chdir(tmp_path)
    before = evidence(behind)
    with Ledger.open(behind) as ledger, pytest.raises(ReadOnlyLedgerError, match="read_only=False"):
        act(ledger)
    assert before == evidence(behind)


def test_opening_read_only_creates_nothing(tmp_path: Path) -> None:
    """A read-only `Ledger` on a path holding no log is a clear error, and no file appears."""
    with pytest.raises(LogMissingError, match="no such file"):
        Ledger.open(tmp_path / "none" / "memory.db")
    assert [] == list(tmp_path.iterdir())


def test_the_same_actions_on_a_ledger_opened_for_writing_take_effect(tmp_path: Path) -> None:
    """The refusal is the read-only mode's alone: opened for writing, an import and a
    quarantine go through."""
    legacy = tmp_path / "legacy.db"
    legacy_file(legacy, ROWS)
    with Ledger.open(tmp_path / "memory.db", read_only=False) as ledger:
        assert 3 == ledger.import_legacy(legacy).imported
        assert 4 == ledger.quarantine(positions=[1], reason="r")
