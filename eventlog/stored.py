"""What a log stores at one position, and a log read as of a head, through the backend
interface."""

from __future__ import annotations

from collections.abc import Iterator

from eventlog.backend import EventLog, Head, LogSnapshot
from eventlog.checks import check_position
from eventlog.errors import EventNotFoundError
from eventlog.events import RecordedEvent
from eventlog.rows import window


def genesis_of(event_log: EventLog) -> bytes:
    """The chain value before the first event of `event_log`, in its format's scheme."""
    return event_log.log_format.chain.genesis(event_log.log_id)


def chain_at(source: EventLog | LogSnapshot, position: int) -> str | None:
    """The hex chain hash stored with the event at `position` (1 or more), or None if no
    event is stored there. Before the first event the chain value is the genesis
    (`genesis_of`)."""
    check_position("position", position, minimum=1)
    try:
        return source.event_at(position).chain_hash
    except EventNotFoundError:
        return None


class LogUpTo:
    """A log read as of one head (a read model's): reads that never go past it."""

    __slots__ = ("_head", "_log")

    def __init__(self, event_log: EventLog, head: Head) -> None:
        self._log = event_log
        self._head = head

    def head(self) -> Head:
        """The head reads stop at."""
        return self._head

    def read(
        self, *, after: int = 0, until: int | None = None, limit: int | None = None
    ) -> Iterator[RecordedEvent]:
        """Events after `after`, up to `until` and never past the head (`LogSnapshot.read`)."""
        span = window(after, until, limit)
        last = self._head.position if span.until is None else min(span.until, self._head.position)
        return self._log.read(after=span.after, until=last, limit=span.limit)

    def event_at(self, position: int) -> RecordedEvent:
        """The event at `position`, if it is not past the head (`LogSnapshot.event_at`)."""
        if type(position) is int and position > self._head.position:
            raise EventNotFoundError(position)
        return self._log.event_at(position)
