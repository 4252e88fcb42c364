"""The content hash a v2 log should hold for a text, computed independently of `eventlog`
from the salt stored beside the event (blake3 keyed by it, docs/spec/format-v2.md)."""

from __future__ import annotations

import blake3

from eventlog import EventLog


def expected_content_hash(log: EventLog, position: int, text: str) -> str:
    """`blake3-keyed:` and BLAKE3 keyed by the salt stored for `position`, over `text`."""
    [row] = list(log.scan(after=position - 1, until=position))
    assert row.salt is not None and 32 == len(row.salt), f"no salt stored at {position}"
    return "blake3-keyed:" + blake3.blake3(text.encode("utf-8"), key=row.salt).hexdigest()
