"""Reading stored rows, backend-neutral: keyset chunks, and each row as bytes or as an event.

A backend supplies `fetch(after)`, returning the next chunk of (position, event_id, body,
chain_hash) rows after a position; these helpers page through it up to a last position.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from eventlog.backend import Row, StoredRow
from eventlog.codec import decode_record
from eventlog.events import RecordedEvent

Fetch = Callable[[int], list[Row]]


def _chunks(fetch: Fetch, after: int, last: int) -> Iterator[list[Row]]:
    """Raw rows after `after` up to `last`, a chunk at a time, by keyset on position."""
    while after < last:
        rows = fetch(after)
        if not rows:
            return
        yield rows
        after = rows[-1][0]


def stored_rows(fetch: Fetch, after: int, last: int) -> Iterator[StoredRow]:
    """Stored rows after `after` up to `last`."""
    for rows in _chunks(fetch, after, last):
        for position, event_id, body, chain_value in rows:
            yield StoredRow(position, event_id, stored_bytes(body), stored_bytes(chain_value))


def decoded_events(fetch: Fetch, after: int, last: int) -> Iterator[RecordedEvent]:
    """Events after `after` up to `last`, decoded straight from the fetched rows."""
    for rows in _chunks(fetch, after, last):
        for position, _, body, chain_value in rows:
            yield decode_record(
                stored_bytes(body), position=position, chain_hash=stored_bytes(chain_value).hex()
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
