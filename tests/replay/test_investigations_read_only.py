"""Investigations never write the file they investigate: no catch-up, no import, no index."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

import pytest

from eventlog import FactPublished, NewEvent, open_log
from projections import CrossTaskKB, SQLiteMemoryStore, load_persistent_memory
from replay import as_of, blame, blast_radius, checkpoint, diff, history, prove_inclusion, verify


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


INVESTIGATIONS: dict[str, Callable[[Path], object]] = {
    "verify": lambda p: verify(p),
    "verify_deep": lambda p: verify(p, deep=True),
    "history": lambda p: history(p, tag="api"),
    "blame": lambda p: blame(p),
    "diff": lambda p: diff(p, 1, 4),
    "as_of": lambda p: as_of(p, position=4).list(),
    "blast_radius": lambda p: blast_radius(p, source_adapter="evil"),
    "checkpoint": lambda p: checkpoint(p),
    "prove": lambda p: prove_inclusion(p, 2, checkpoint(p)),
}


@pytest.mark.parametrize("investigate", INVESTIGATIONS.values(), ids=INVESTIGATIONS.keys())
def test_investigations_leave_the_file_as_it_was(
    behind: Path, investigate: Callable[[Path], object]
) -> None:
    """The file's bytes and its write-ahead log are unchanged after the investigation."""
    before = evidence(behind)
    investigate(behind)
    assert before == evidence(behind)


def test_investigations_describe_the_whole_log_when_the_read_model_is_behind(
    behind: Path,
) -> None:
    """What the read model has not folded yet is folded in memory, not skipped."""
    assert ["{name: str}", "v2", "v3"] == [v.value for v in history(behind, tag="api").versions]
    assert [3, 4] == [e.position for e in blast_radius(behind, source_adapter="evil").events]
    assert "v3" == blame(behind).facts[0].value
