"""Queries over the read model, built from constant fragments with bound values only."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any, NamedTuple, Protocol

from projections import sql
from projections.entries import Fact, MemoryEntry

Row = tuple[Any, ...]


class Readable(Protocol):
    """Something read-model queries can run against."""

    def execute(self, statement: str, params: Sequence[object] = ()) -> list[Row]: ...


class Reader(Protocol):
    """Gives consistent snapshots of the read model."""

    def snapshot(self) -> AbstractContextManager[Readable]: ...


class Candidate(NamedTuple):
    """An entry ranked for the prompt path, with whether it is quarantined."""

    entry: MemoryEntry
    rank: tuple[int, float, int]
    quarantined: bool


def _marks(values: Sequence[object]) -> str:
    return ", ".join("?" * len(values))


def entry_from_row(row: Row) -> MemoryEntry:
    """Build an entry from the columns `sql.ENTRY_COLUMNS` names."""
    return MemoryEntry(
        id=row[0],
        type=row[1],
        content=row[2],
        tags=row[3].split(",") if row[3] else [],
        importance=row[4],
        task_id=row[5],
        created_at=row[6],
        source_agent=row[7],
        source_model=row[8],
        source_adapter=row[9],
        position=row[0],
        content_hash=row[10],
    )


def fact_from_row(row: Row) -> Fact:
    """Build a fact from the columns `sql.FACT_COLUMNS` names."""
    return Fact(*row[:10])


def entries(
    db: Readable,
    *,
    type: str | None,
    tags: Sequence[str],
    adapters: Sequence[str] | None,
    limit: int,
) -> list[MemoryEntry]:
    """Visible entries, newest first, of `type`, with any of `tags`, from `adapters`."""
    filters = ""
    params: list[object] = []
    if type is not None:
        filters += sql.FILTER_TYPE
        params.append(type)
    if tags:
        filters += sql.FILTER_TAGS.format(marks=_marks(tags))
        params.extend(tags)
    if adapters is not None:
        filters += sql.FILTER_ADAPTERS.format(marks=_marks(adapters))
        params.extend(adapters)
    statement = sql.ENTRIES.format(filters=filters)
    return [entry_from_row(row) for row in db.execute(statement, [*params, limit])]


def relevant(
    db: Readable,
    *,
    tags: Sequence[str],
    adapters: Sequence[str] | None,
    limit: int,
) -> list[MemoryEntry]:
    """Visible entries ranked by shared tags, importance, then recency (newest with no tags)."""
    filters = sql.FILTER_VISIBLE
    params: list[object] = []
    if adapters is not None:
        filters += sql.FILTER_ADAPTERS.format(marks=_marks(adapters))
        params.extend(adapters)
    return [c.entry for c in _ranked(db, tags, filters, params, limit)]


def prompt_candidates(
    db: Readable,
    *,
    tags: Sequence[str],
    trust: tuple[bool, Sequence[str]] | None,
    limit: int,
    refused_limit: int,
) -> tuple[list[Candidate], list[Candidate]]:
    """The top `limit` trusted entries, and the best refused ones (untrusted or quarantined).

    `trust` is (trust_untagged, trusted_adapters), or None when the policy is disabled.
    """
    condition, trust_params = _trust_condition(trust)
    trusted = _ranked(
        db, tags, sql.FILTER_TRUSTED.format(trust=condition), list(trust_params), limit
    )
    refused = _ranked(
        db, tags, sql.FILTER_REFUSED.format(trust=condition), list(trust_params), refused_limit
    )
    return trusted, refused


def _trust_condition(trust: tuple[bool, Sequence[str]] | None) -> tuple[str, Sequence[str]]:
    if trust is None:
        return "1", ()
    untagged, adapters = trust
    parts = [sql.TRUST_UNTAGGED] if untagged else []
    if adapters:
        parts.append(sql.TRUST_ADAPTERS.format(marks=_marks(adapters)))
    return (" OR ".join(parts) or sql.TRUST_NOTHING), tuple(adapters)


def _ranked(
    db: Readable, tags: Sequence[str], filters: str, params: list[object], limit: int
) -> list[Candidate]:
    if tags:
        statement = sql.RELEVANT.format(marks=_marks(tags), filters=filters)
        rows = db.execute(statement, [*tags, *params, limit])
    else:
        rows = db.execute(sql.NEWEST.format(filters=filters), [*params, limit])
    return [
        Candidate(
            entry_from_row(row),
            # The rank is the key the query ordered by: with no tags, recency alone.
            (row[11], row[4], row[0]) if tags else (0, 0.0, row[0]),
            bool(row[12] & sql.HIDDEN_QUARANTINED),
        )
        for row in rows
    ]


def current_facts(
    db: Readable, identity: tuple[str, str, str], adapters: Sequence[str] | None
) -> list[Fact]:
    """One fact per key under (scope, run_key, tag): the newest visible version, newest first.

    With an allow-list, the newest version written by an allowed adapter.
    """
    if adapters is None:
        return [fact_from_row(row) for row in db.execute(sql.FACTS_CURRENT, identity)]
    statement = sql.FACTS_CURRENT_ALLOWED.format(marks=_marks(adapters))
    return [fact_from_row(row) for row in db.execute(statement, [*identity, *adapters])]


def fact_history(db: Readable, identity: tuple[str, str, str, str]) -> list[Fact]:
    """Every version published under one identity, oldest first."""
    return [fact_from_row(row) for row in db.execute(sql.FACT_HISTORY, identity)]
