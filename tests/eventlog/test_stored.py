"""chain_at: the chain hash a log stores at one position, through any backend's reads."""

from __future__ import annotations

from pathlib import Path

import pytest

from eventlog import InvalidInputError, InvalidTypeError, chain_at, open_log
from eventlog.contract import memory


def test_chain_at_is_the_stored_chain_hash_from_a_log_or_a_snapshot(tmp_path: Path) -> None:
    """The log and a snapshot of it give each event's chain hash, and None past the head."""
    log = open_log(tmp_path / "log.db")
    recorded = log.append_many([memory(f"m{i}") for i in range(5)])
    expected = [event.chain_hash for event in recorded]
    with log.snapshot() as snap:
        from_snapshot = [chain_at(snap, n) for n in range(1, 6)]
        assert None is chain_at(snap, 6)
    assert expected == [chain_at(log, n) for n in range(1, 6)] == from_snapshot
    assert (None, log.head().chain_hash) == (chain_at(log, 6), chain_at(log, 5))
    log.close()


def test_chain_at_refuses_positions_before_the_first_event(tmp_path: Path) -> None:
    """Position 0 holds no event (its chain value is the genesis): refused, as are non-ints."""
    log = open_log(tmp_path / "log.db")
    log.append(memory("m"))
    with pytest.raises(InvalidInputError):
        chain_at(log, 0)
    with pytest.raises(InvalidTypeError):
        chain_at(log, True)
    log.close()
