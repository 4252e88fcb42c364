"""The questions audits ask of a read model: every version of a fact, who set each current
value, the current values, and what a set of log positions reached. Each returns the rows
its query declares in `projections._sql`; values are bound, never spliced."""

from __future__ import annotations

from collections.abc import Sequence
from operator import attrgetter

from projections import _sql_audit as sql_audit
from projections import _sql_knowledge as sql_knowledge
from projections import _sql_reads as sql_reads
from projections._knowledge import Identity
from projections._sql import Queryable
from projections._sql_audit import Blamed as Blamed
from projections._sql_audit import CurrentValue as CurrentValue
from projections._sql_audit import LiveEntry as LiveEntry
from projections._sql_audit import LiveFact as LiveFact
from projections._sql_audit import Succession as Succession
from projections._sql_audit import Version as Version
from projections._sql_knowledge import Operator as Operator
from projections._sql_knowledge import Quarantine as Quarantine
from projections._sql_knowledge import Unauthorized as Unauthorized
from projections._sql_reads import ReceiptItem as ReceiptItem

_BY_POSITION = attrgetter("position")
"""Rows read over positions in batches (`Query.among`), put back in the order one statement
would return them."""


def fact_versions(
    db: Queryable,
    *,
    scope: str | None = None,
    tag: str | None = None,
    key: str | None = None,
    run_id: str | None = None,
) -> list[Version]:
    """Fact versions matching every given filter, oldest first."""
    filters, params = sql_audit.fact_filters(scope, tag, key, run_id)
    return sql_audit.FACT_VERSIONS.format(filters=filters).rows(db, params)


def fact_blame(
    db: Queryable, *, scope: str | None = None, tag: str | None = None, run_id: str | None = None
) -> list[Blamed]:
    """Current fact versions by identity, with the count of versions before each."""
    filters, params = sql_audit.fact_filters(scope, tag, None, run_id)
    return sql_audit.FACT_BLAME.format(filters=filters).rows(db, params)


def current_fact_values(db: Queryable) -> dict[Identity, CurrentValue]:
    """Each fact identity's current version (position, value, source adapter)."""
    return {row.identity(): row for row in sql_audit.FACT_CURRENT_VALUES.rows(db)}


def held_among(db: Queryable, positions: Sequence[int]) -> set[int]:
    """The fact versions among `positions` a conflict policy held or denied (never current
    when published)."""
    return {row.position for row in sql_knowledge.HELD_AMONG.among(db, positions)}


def quarantine_state(db: Queryable, position: int) -> Quarantine | None:
    """The quarantine at `position` (its reason, and the release that undid it), or None if
    none is."""
    return sql_knowledge.QUARANTINE_GET.first(db, (position,))


def quarantined_among(db: Queryable, positions: Sequence[int]) -> set[int]:
    """The events among `positions` a quarantine in effect keeps from every reader."""
    return {row.position for row in sql_reads.LINEAGE_QUARANTINED_AMONG.among(db, positions)}


def erased_among(db: Queryable, positions: Sequence[int]) -> dict[int, int]:
    """The positions among `positions` whose text an authorized erasure removed, each with
    the erasure's position."""
    return {
        row.position: row.erasure_position
        for row in sql_knowledge.ERASED_AMONG.among(db, positions)
    }


def erased_positions(db: Queryable) -> set[int]:
    """Every position whose text an authorized erasure removed."""
    return {row.position for row in sql_knowledge.ERASED_ALL.rows(db)}


def latest_erasure(db: Queryable) -> int:
    """The position of the latest authorized erasure that removed a text (0: none)."""
    return max((row.erasure_position for row in sql_knowledge.ERASED_ALL.rows(db)), default=0)


def quarantines(db: Queryable) -> list[Quarantine]:
    """Every quarantine that took effect."""
    return sql_knowledge.QUARANTINE_ALL.rows(db)


def operators(db: Queryable) -> list[Operator]:
    """Every operator key the log registered, in the order added."""
    return sql_knowledge.OPERATOR_LIST.rows(db)


def operator(db: Queryable, key_id: str) -> Operator | None:
    """The operator key `key_id`, or None if never registered."""
    return sql_knowledge.OPERATOR_GET.first(db, (key_id,))


def has_operator(db: Queryable) -> bool:
    """Whether the log registered an operator key: from then on operator actions need one's
    signature."""
    return sql_knowledge.OPERATOR_ANY.exists(db)


def unauthorized(db: Queryable, positions: Sequence[int] | None = None) -> list[Unauthorized]:
    """Operator actions that took no effect (of `positions`, or all), by position."""
    if positions is None:
        return sql_knowledge.UNAUTHORIZED_ALL.rows(db)
    return sorted(sql_knowledge.UNAUTHORIZED_AT.among(db, positions), key=_BY_POSITION)


def imported_rows(db: Queryable, *, signed: bool) -> set[str]:
    """Legacy rows imported with effect (with `signed`, only those an operator's signature
    made count), by the identity they claim (`projections._legacy.legacy_identity`)."""
    return {row.identity for row in sql_knowledge.IMPORT_ALL.rows(db, (int(signed),))}


def unreadable_rows(db: Queryable) -> list[sql_knowledge.UnreadableRow]:
    """Rows folded as `unreadable`, by position, with the writer each names."""
    return sql_knowledge.UNREADABLE_ALL.rows(db)


def receipts_touching(db: Queryable, positions: Sequence[int]) -> list[ReceiptItem]:
    """Receipt items naming any of `positions`, by receipt."""
    found = sql_reads.RECEIPTS_TOUCHING.among(db, positions)
    return sorted(found, key=attrgetter("receipt_position", "event_position"))


def live_facts(db: Queryable, positions: Sequence[int]) -> list[LiveFact]:
    """Which of `positions` are current fact versions."""
    return sorted(sql_audit.FORENSIC_LIVE_FACTS.among(db, positions), key=_BY_POSITION)


def live_entries(db: Queryable, positions: Sequence[int]) -> list[LiveEntry]:
    """Which of `positions` are visible memory entries."""
    return sorted(sql_audit.FORENSIC_LIVE_ENTRIES.among(db, positions), key=attrgetter("id"))


def replaced_by(db: Queryable, positions: Sequence[int]) -> list[Succession]:
    """The versions the fact versions at `positions` replaced (`other_*`)."""
    return sorted(sql_audit.FORENSIC_OVERWRITTEN.among(db, positions), key=_BY_POSITION)


def replaced_later(db: Queryable, positions: Sequence[int]) -> list[Succession]:
    """The next version (`other_*`) after each fact version at `positions`."""
    return sorted(sql_audit.FORENSIC_NEXT_VERSIONS.among(db, positions), key=_BY_POSITION)
