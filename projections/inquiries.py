"""The questions audits ask of a read model: every version of a fact, who set each current
value, the current values, and what a set of log positions reached. Rows come back in the
column order each function names; values are bound, never spliced."""

from __future__ import annotations

from collections.abc import Sequence

from projections import sql
from projections.knowledge import Identity
from projections.reads import Readable, Row, over_positions


def fact_versions(
    db: Readable,
    *,
    scope: str | None = None,
    tag: str | None = None,
    key: str | None = None,
    run_id: str | None = None,
) -> list[Row]:
    """Fact versions matching every given filter, oldest first: (position, ts_ns, scope, run_id,
    tag, key, value, content_hash, producer_task_id, source_adapter, replaced_position,
    quarantined, is_current)."""
    filters, params = sql.fact_filters(scope, tag, key, run_id)
    return db.execute(sql.FACT_VERSIONS.format(filters=filters), params)


def fact_blame(
    db: Readable, *, scope: str | None = None, tag: str | None = None, run_id: str | None = None
) -> list[Row]:
    """Current fact versions by identity: (scope, run_key, tag, key, value, position, ts_ns,
    producer_task_id, source_adapter, earlier version count)."""
    filters, params = sql.fact_filters(scope, tag, None, run_id)
    return db.execute(sql.FACT_BLAME.format(filters=filters), params)


def current_fact_values(db: Readable) -> dict[Identity, tuple[int, str, str | None]]:
    """Each fact identity's current (position, value, source adapter)."""
    return {
        (r[0], r[1], r[2], r[3]): (r[4], r[5], r[6]) for r in db.execute(sql.FACT_CURRENT_VALUES)
    }


def held_among(db: Readable, positions: Sequence[int]) -> set[int]:
    """The fact versions among `positions` a conflict policy held or denied (never current
    when published)."""
    return {row[0] for row in over_positions(db, sql.HELD_AMONG, positions)}


def quarantine_state(db: Readable, position: int) -> tuple[str, int | None] | None:
    """(reason, released_by position) of the quarantine at `position`, or None if none is."""
    found = db.execute(sql.QUARANTINE_GET, (position,))
    return (found[0][1], found[0][2]) if found else None


def quarantines(db: Readable) -> list[Row]:
    """Every quarantine that took effect: (position, reason, released_by position or None)."""
    return db.execute(sql.QUARANTINE_ALL)


def operators(db: Readable) -> list[Row]:
    """Every operator key the log registered, in the order added: (key_id, name, public key
    in base64, added position, key that signed the addition, removed position or None, key
    that signed the removal or None)."""
    return db.execute(sql.OPERATOR_LIST)


def operator(db: Readable, key_id: str) -> Row | None:
    """The operator key `key_id`, in `operators`' columns, or None if never registered."""
    found = db.execute(sql.OPERATOR_GET, (key_id,))
    return found[0] if found else None


def has_operator(db: Readable) -> bool:
    """Whether the log registered an operator key: from then on operator actions need one's
    signature."""
    return bool(db.execute(sql.OPERATOR_ANY))


def unauthorized(db: Readable, positions: Sequence[int] | None = None) -> list[Row]:
    """Operator actions that took no effect (of `positions`, or all): (position, kind, key id
    it named or None, reason), by position."""
    if positions is None:
        return db.execute(sql.UNAUTHORIZED_ALL)
    return _sorted(over_positions(db, sql.UNAUTHORIZED_AT, positions))


def imported_rows(db: Readable, *, signed: bool) -> set[tuple[int, float, str]]:
    """Legacy rows imported with effect (with `signed`, only those an operator's signature
    made count): (legacy id, created_at, content hash)."""
    return {(r[0], r[1], r[2]) for r in db.execute(sql.IMPORT_ALL, (int(signed),))}


def receipts_touching(db: Readable, positions: Sequence[int]) -> list[Row]:
    """Receipt items naming any of `positions`: (receipt position, task_id, run_id, adapter,
    event position, included, reason)."""
    return _sorted(over_positions(db, sql.RECEIPTS_TOUCHING, positions))


def live_facts(db: Readable, positions: Sequence[int]) -> list[Row]:
    """Which of `positions` are current fact versions: (position, scope, run_id, tag, key,
    producer_task_id, source_adapter, content_hash)."""
    return _sorted(over_positions(db, sql.FORENSIC_LIVE_FACTS, positions))


def live_entries(db: Readable, positions: Sequence[int]) -> list[Row]:
    """Which of `positions` are visible memory entries: (id, type, tags, producer_task_id,
    source_adapter, content_hash, claims as JSON or None, unsigned_import)."""
    return _sorted(over_positions(db, sql.FORENSIC_LIVE_ENTRIES, positions))


def replaced_by(db: Readable, positions: Sequence[int]) -> list[Row]:
    """Versions that fact versions at `positions` replaced: (position, scope, run_id, tag, key,
    replaced position, its producer, its adapter)."""
    return _sorted(over_positions(db, sql.FORENSIC_OVERWRITTEN, positions))


def replaced_later(db: Readable, positions: Sequence[int]) -> list[Row]:
    """The next version after each fact version at `positions`: (position, scope, run_id, tag,
    key, next position, its producer, its adapter)."""
    return _sorted(over_positions(db, sql.FORENSIC_NEXT_VERSIONS, positions))


def _sorted(rows: list[Row]) -> list[Row]:
    """Rows ordered by their first column (a position), whatever batch each came from."""
    return sorted(rows, key=lambda row: row[0])
