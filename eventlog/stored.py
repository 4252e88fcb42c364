"""What a log stores at one position, read through the backend interface."""

from __future__ import annotations

from eventlog.backend import EventLog, ReadSnapshot
from eventlog.checks import check_position


def chain_at(source: EventLog | ReadSnapshot, position: int) -> str | None:
    """The hex chain hash stored with the event at `position` (1 or more), or None if no
    event is stored there. Before the first event the chain value is the genesis
    (`eventlog.chain.genesis`)."""
    check_position("position", position, minimum=1)
    event = next(source.read(position - 1, until=position), None)
    return None if event is None else event.chain_hash
