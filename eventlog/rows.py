"""Reading stored rows, backend-neutral: the one meaning of a read's window, keyset chunks,
and each row as bytes or as an event.

A backend supplies `fetch(after, last, count)`, returning at most `count` stored rows with
after < position <= last, in position order (`stored_row` makes each from what its query
returns); these helpers page through it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import NamedTuple

from eventlog.backend import Row, StoredRow
from eventlog.checks import MAX_POSITION, check_position
from eventlog.errors import EventNotFoundError, InvalidTypeError
from eventlog.events import RecordedEvent
from eventlog.migration import Fetch, Reading

_new_row = tuple.__new__

READ_CHUNK = 1024
"""Rows fetched per round trip: memory stays constant however long the read."""


class Window(NamedTuple):
    """A read's checked arguments: events with after < position <= until (None: the head
    when the read starts), at most `limit` of them (None: no limit)."""

    after: int
    until: int | None
    limit: int | None


def window(after: object, until: object, limit: object) -> Window:
    """Check a read's arguments: non-negative ints (not bools), `until` and `limit` or None."""
    return Window(
        check_position("after", after),
        None if until is None else check_position("until", until),
        None if limit is None else check_position("limit", limit),
    )


def _chunks(fetch: Fetch, after: int, last: int, limit: int | None) -> Iterator[list[StoredRow]]:
    """Raw rows after `after` up to `last`, at most `limit`, a chunk at a time, by keyset on
    position."""
    left = MAX_POSITION if limit is None else limit
    while after < last and left > 0:
        rows = fetch(after, last, min(left, READ_CHUNK))
        if not rows:
            return
        yield rows
        after = rows[-1][0]
        left -= len(rows)


def stored_rows(
    fetch: Fetch, after: int, last: int, limit: int | None = None
) -> Iterator[StoredRow]:
    """Stored rows after `after` up to `last`, at most `limit`."""
    for rows in _chunks(fetch, after, last, limit):
        yield from rows


def decoded_events(
    fetch: Fetch, reading: Reading, after: int, last: int, limit: int | None = None
) -> Iterator[RecordedEvent]:
    """Events after `after` up to `last`, at most `limit`, read from the rows
    (`Reading.event`: a row this version cannot decode is `Unreadable`)."""
    for rows in _chunks(fetch, after, last, limit):
        for row in rows:
            yield reading.event(row, fetch)


def lookup_event(
    fetch: Fetch, reading: Reading, position: object, last: int = MAX_POSITION
) -> RecordedEvent:
    """The event at `position`, in one lookup; `EventNotFoundError` when none is stored there
    or it lies past `last` (the head a read is held to)."""
    if isinstance(position, bool) or not isinstance(position, int):
        raise InvalidTypeError(f"position must be int, not {type(position).__name__}")
    if 1 <= position <= last:
        rows = fetch(position - 1, position, 1)
        if rows:
            return reading.event(rows[0], fetch)
    raise EventNotFoundError(position)


def stored_row(row: Row, oversize_leaf: Callable[[int], bytes]) -> StoredRow:
    """A stored row from a backend's query: (position, event id, body or None when it is
    over the read limit, chain value, text or None, salt or None when no content row is
    stored). An oversize body's leaf hash comes from `oversize_leaf(position)`, which
    streams it."""
    position, event_id, body, chain_value, text, salt = row
    if (
        type(body) is bytes
        and type(event_id) is bytes
        and type(chain_value) is bytes
        and (text is None or type(text) is bytes)
        and (salt is None or type(salt) is bytes)
    ):  # what a query casting to BLOB returns: no copy, one tuple
        return _new_row(
            StoredRow,
            (position, event_id.decode("utf-8", "replace"), body, chain_value, text, salt, None),
        )
    return StoredRow(
        position,
        stored_bytes(event_id).decode("utf-8", "replace"),
        b"" if body is None else stored_bytes(body),
        stored_bytes(chain_value),
        None if text is None else stored_bytes(text),
        None if salt is None else stored_bytes(salt),
        oversize_leaf(position) if body is None else None,
    )


def stored_bytes(value: object) -> bytes:
    """A stored value as bytes, whatever storage class an edit left it in: verification must
    report a row changed behind the log's back, never crash on it."""
    if type(value) is bytes:
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, str):
        return value.encode("utf-8", "surrogatepass")
    return str(value).encode("utf-8")
