"""A read model's snapshot reads the log as the log's own snapshots do (`LogSnapshot`:
keyword-only `read`, `event_at`), never past the position the read model shows: in the log's
file, in a host's cache of a log held elsewhere, and folded in memory by a read-only view."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, closing, contextmanager
from pathlib import Path
from typing import cast

import pytest

from eventlog import EventNotFoundError, InvalidInputError, InvalidTypeError, open_log
from eventlog.contract import memory
from projections import MemoryView, SQLiteMemoryStore, open_view
from projections._projector import ReadModelSnapshot


@pytest.fixture(params=["file", "cache", "folded"])
def model(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[MemoryView, Path]]:
    """A store or read-only view showing three events, and the path of its log."""
    log_path = tmp_path / "log.db"
    with ExitStack() as opened:
        if request.param == "folded":
            with closing(open_log(log_path)) as log:
                log.append_many([memory(f"m{i}") for i in range(3)])
            view = opened.enter_context(open_view(log_path))
        else:
            cached = request.param == "cache"
            store = SQLiteMemoryStore(
                tmp_path / "cache.db" if cached else log_path, log=log_path if cached else None
            )
            view = opened.enter_context(store)
            for i in range(3):
                store.add("learning", f"m{i}", tags=["t"])
        yield view, log_path


@contextmanager
def snapshot(view: MemoryView) -> Iterator[ReadModelSnapshot]:
    with view.snapshot() as snap:
        yield cast(ReadModelSnapshot, snap)


def test_a_model_snapshot_reads_up_to_the_position_it_shows(
    model: tuple[MemoryView, Path],
) -> None:
    """An event appended after the snapshot began is in the log, and not in the snapshot's
    read or event_at; the window and the lookup mean what they mean on the log."""
    view, log_path = model
    with closing(open_log(log_path)) as writer, snapshot(view) as snap:
        assert 3 == snap.head().position
        late = writer.append(memory("late"))
        assert [1, 2, 3] == [e.position for e in snap.read()]
        assert [2, 3] == [e.position for e in snap.read(after=1, until=late.position)]
        assert [2] == [e.position for e in snap.read(after=1, limit=1)]
        assert writer.event_at(3) == snap.event_at(3)
        for missing in (0, late.position):
            with pytest.raises(EventNotFoundError):
                snap.event_at(missing)
        assert late == writer.event_at(late.position)


def test_a_model_snapshot_refuses_what_the_log_refuses(model: tuple[MemoryView, Path]) -> None:
    """Positional and bad arguments are refused as on the log."""
    view, _ = model
    with snapshot(view) as snap:
        with pytest.raises(TypeError):
            snap.read(1)  # type: ignore[call-arg]
        with pytest.raises(InvalidInputError, match="after"):
            snap.read(after=-1)
        with pytest.raises(InvalidTypeError, match="position"):
            snap.event_at("1")  # type: ignore[arg-type]
