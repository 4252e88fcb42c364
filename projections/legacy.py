"""Import from the legacy store: a `memory` table with comma-joined tags, one row per entry.

Each legacy row becomes one `memory_added` event, in (created_at, id) order. Its new entry id
is that event's position; the legacy id is kept in the event as `legacy_id`. `created_at`,
`task_id`, `source_agent`, `source_model` and `source_adapter` are kept (an empty or NULL
adapter stays NULL). Event ids are derived from the legacy row, so importing the same rows
again writes nothing. The legacy table is only read, never changed.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import blake3

from eventlog import MemoryAdded, NewEvent, StorageError
from eventlog.checks import check_content, check_finite
from projections import sql
from projections.errors import LegacyImportError
from projections.reads import Readable
from projections.validation import check_memory_type, check_tags

REQUIRED = ("id", "type", "content", "tags", "importance", "task_id", "created_at")
OPTIONAL = ("source_agent", "source_model", "source_adapter")


def legacy_events(db: Readable) -> list[NewEvent] | None:
    """Events for every row of the legacy `memory` table in `db`, or None if it has none."""
    if not db.execute(sql.LEGACY_TABLE_EXISTS):
        return None
    present = {row[1] for row in db.execute(sql.LEGACY_COLUMNS)}
    if not set(REQUIRED) <= present:
        return None
    columns = [*REQUIRED, *(c for c in OPTIONAL if c in present)]
    rows = db.execute(sql.LEGACY_ROWS.format(columns=", ".join(columns)))
    return [_event(dict(zip(columns, row, strict=True))) for row in rows]


def _event(row: dict[str, Any]) -> NewEvent:
    legacy_id = row["id"]
    try:
        raw_tags = row["tags"] or ""
        tags = check_tags([t.strip() for t in str(raw_tags).split(",") if t.strip()])
        content = row["content"]
        data = check_content("content", content)
        created_at = check_finite("created_at", row["created_at"])
        importance = check_finite("importance", row["importance"])
        payload = MemoryAdded(
            type=check_memory_type(row["type"]),
            content=content,
            tags=tags,
            importance=importance,
            task_id=_text_or_none(row["task_id"]),
            source_agent=str(row.get("source_agent") or ""),
            source_model=str(row.get("source_model") or ""),
            created_at=created_at,
            legacy_id=legacy_id,
        )
    except (ValueError, TypeError) as exc:
        raise LegacyImportError(f"legacy memory row id={legacy_id}: {exc}") from None
    digest = blake3.blake3(f"{legacy_id}\x1f{created_at!r}\x1f".encode() + data).hexdigest()
    return NewEvent(
        payload=payload,
        producer_task_id=payload.task_id or "",
        source_adapter=_text_or_none(row.get("source_adapter")),
        event_id=f"legacy:{legacy_id}:{digest[:24]}",
        ts_ns=max(0, int(created_at * 1e9)),
    )


def _text_or_none(value: object) -> str | None:
    return str(value) if value not in (None, "") else None


class LegacyFile:
    """A legacy database file, opened read-only."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        source = Path(path)
        if not source.is_file():
            raise StorageError(f"cannot import {source}: no such file")
        self._db = sql.open_read_only(source)
        self.path = source

    def execute(self, statement: str, params: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        """Run a read-only query."""
        return self._db.execute(statement, params)

    def close(self) -> None:
        """Close the file."""
        self._db.close()
