"""Import from the legacy store: a `memory` table with comma-joined tags, one row per entry.

Each legacy row becomes one `memory_added` event, in (created_at, id) order, written now by
the importing actor: its time, producer, run and adapter are the import's. What the row said
about itself (its id, `created_at`, `task_id`, `source_agent`, `source_model` and
`source_adapter`; an empty adapter is NULL) is kept in the event as `claims`, which readers
honour only as `projections._operators` decides. The legacy table is only read, never changed.
Each row's text is screened for secrets as every write's is (`projections._secrets`): under
`refuse` a secret in any row refuses the whole import, naming the row's id and the offset.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec

from eventlog import InvalidTypeError, LegacyClaims, MemoryAdded, NewEvent, StorageError
from eventlog.checks import (
    MAX_POSITION,
    check_content,
    check_finite,
    check_identifier,
    check_optional_actor,
)
from eventlog.signing import claims_of
from projections import _sql as sql
from projections._database import open_read_only
from projections._errors import LegacyImportError, SecretRefusedError
from projections._secrets import SecretsMode, check_name, screened
from projections._sql import Queryable
from projections._validation import check_memory_type, check_tags

REQUIRED = tuple(name for name in sql.Legacy.__struct_fields__ if name not in sql.LEGACY_OPTIONAL)


def legacy_identity(payload: MemoryAdded) -> str:
    """The identity a legacy row claims (its id, `created_at`, `task_id`, agent, model,
    adapter and type), as canonical JSON: what an import is de-duplicated by. Never the
    text: an unsalted hash of it would let anyone confirm a guessed secret."""
    claims = claims_of(payload)
    if claims is None:
        raise ValueError("not an imported legacy row: it carries no claims")
    return msgspec.json.encode(
        [
            claims.id,
            claims.created_at,
            claims.task_id,
            claims.source_agent,
            claims.source_model,
            claims.source_adapter,
            payload.type,
        ]
    ).decode("utf-8")


def holds_legacy_table(db: Queryable) -> bool:
    """Whether `db` has a table named `memory` (the replaced store's, perhaps)."""
    return sql.LEGACY_TABLE_EXISTS.exists(db)


def legacy_events(
    db: Queryable,
    *,
    producer_task_id: str = "",
    run_id: str | None = None,
    source_adapter: str | None = None,
    strict: bool = False,
    secrets: SecretsMode,
) -> list[NewEvent] | None:
    """Events importing every row of the legacy `memory` table in `db`, written by the given
    actor, their text and tags screened for secrets in mode `secrets`; None if `db` has no
    such table with the columns it needs (with `strict`, that is a `LegacyImportError`)."""
    problem = None
    if not holds_legacy_table(db):
        problem = "it has no memory table"
    else:
        present = {row.name for row in sql.LEGACY_COLUMNS.rows(db)}
        missing = [column for column in REQUIRED if column not in present]
        if missing:
            problem = f"its memory table has no column {', '.join(missing)}"
    if problem is not None:
        if strict:
            raise LegacyImportError(f"not a database of the replaced store: {problem}")
        return None
    return [
        NewEvent(
            payload=_payload(row, secrets),
            producer_task_id=producer_task_id,
            run_id=run_id,
            source_adapter=source_adapter,
        )
        for row in sql.legacy_rows(present).rows(db)
    ]


def _payload(row: sql.Legacy, secrets: SecretsMode) -> MemoryAdded:
    legacy_id = row.id
    try:
        return _checked_payload(row, secrets)
    except SecretRefusedError as exc:
        raise exc.within(f"legacy memory row id={legacy_id!r}") from None
    except (ValueError, TypeError) as exc:
        raise LegacyImportError(f"legacy memory row id={legacy_id!r}: {exc}") from None


def _checked_payload(row: sql.Legacy, secrets: SecretsMode) -> MemoryAdded:
    legacy_id = row.id
    if isinstance(legacy_id, bool) or not isinstance(legacy_id, int):
        raise InvalidTypeError(f"id must be an integer, not {type(legacy_id).__name__}")
    if not -MAX_POSITION <= legacy_id <= MAX_POSITION:
        raise ValueError("id does not fit in 64 bits")
    raw_tags = row.tags or ""
    tags = check_tags([t.strip() for t in str(raw_tags).split(",") if t.strip()])
    tags = tuple(check_name("tags", tag, secrets) for tag in tags)
    content = row.content
    check_content("content", content)
    assert isinstance(content, str)
    content = screened("content", content, secrets)
    check_content("content with its secrets redacted", content)
    claims = LegacyClaims(
        id=legacy_id,
        created_at=check_finite("created_at", row.created_at),
        task_id=check_optional_actor("task_id", _text(row.task_id)),
        source_agent=_claim("source_agent", row.source_agent) or "",
        source_model=_claim("source_model", row.source_model) or "",
        source_adapter=check_optional_actor("source_adapter", _text(row.source_adapter)),
    )
    return MemoryAdded(
        type=check_memory_type(row.type),
        content=content,
        tags=tags,
        importance=check_finite("importance", row.importance),
        claims=claims,
    )


def _text(value: object) -> str | None:
    """A column's text: None for NULL or empty."""
    return None if value in (None, "") else str(value)


def _claim(name: str, value: object) -> str | None:
    """A claimed name of an agent or model: printable text, checked but not trusted."""
    text = _text(value)
    return None if text is None else check_identifier(name, text)


class LegacyFile:
    """A legacy database file, opened read-only."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        source = Path(path)
        if not source.is_file():
            raise StorageError(f"cannot import {source}: no such file")
        self._db = open_read_only(source)
        self.path = source

    def execute(self, statement: str, params: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        """Run a read-only query."""
        return self._db.execute(statement, params)

    def close(self) -> None:
        """Close the file."""
        self._db.close()
