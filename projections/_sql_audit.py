"""The SQL of the questions audits ask (`projections._inquiries`): forensics, history, blame
and diff."""

from __future__ import annotations

from eventlog import LegacyClaims
from projections._sql import Columns, Query, legacy_claims
from projections._sql_knowledge import FactIdentity

# -- forensics --------------------------------------------------------------------------------


class LiveFact(Columns, frozen=True):
    """A current fact version."""

    position: int
    scope: str
    run_id: str | None
    tag: str
    key: str
    producer_task_id: str
    source_adapter: str | None
    content_hash: str


class LiveEntry(Columns, frozen=True):
    """A visible memory entry (not a fact's mirror)."""

    id: int
    type: str
    tags: str
    producer_task_id: str
    source_adapter: str | None
    content_hash: str
    claims: str | None
    """As `Entry.claims`."""
    unsigned_import: int

    def legacy_claims(self) -> LegacyClaims | None:
        """The legacy row's claims, if the entry was imported."""
        return legacy_claims(self.claims)


class Succession(Columns, frozen=True):
    """A fact version, and another version of the same fact: the one it replaced, or the
    next one after it."""

    position: int
    scope: str
    run_id: str | None
    tag: str
    key: str
    other_position: int
    other_producer: str
    other_adapter: str | None


FORENSIC_LIVE_FACTS = Query(
    "SELECT f.position, f.scope, f.run_id, f.tag, f.key, f.producer_task_id, f.source_adapter, "
    "f.content_hash FROM fl_fact_current c JOIN fl_fact f ON f.position = c.position "
    "WHERE c.position IN ({marks}) ORDER BY f.position",
    LiveFact,
)
FORENSIC_LIVE_ENTRIES = Query(
    "SELECT m.id, m.type, m.tags, m.producer_task_id, m.source_adapter, m.content_hash, "
    "m.claims, m.unsigned_import FROM fl_memory m "
    "WHERE m.hidden = 0 AND m.type <> 'cross_task' AND m.id IN ({marks}) "
    "ORDER BY m.id",
    LiveEntry,
)
_OTHER = "{other}.position AS other_position, {other}.producer_task_id AS other_producer, "
_OTHER += "{other}.source_adapter AS other_adapter"
FORENSIC_OVERWRITTEN = Query(
    "SELECT f.position, f.scope, f.run_id, f.tag, f.key, "
    + _OTHER.format(other="p")
    + " FROM fl_fact f JOIN fl_fact p ON p.position = f.replaced_position "
    "WHERE f.position IN ({marks}) ORDER BY f.position",
    Succession,
)
FORENSIC_NEXT_VERSIONS = Query(
    "SELECT f.position, f.scope, f.run_id, f.tag, f.key, "
    + _OTHER.format(other="n")
    + " FROM fl_fact f JOIN fl_fact n ON n.position = ("
    "SELECT min(g.position) FROM fl_fact g WHERE g.scope = f.scope AND g.run_key = f.run_key "
    "AND g.tag = f.tag AND g.key = f.key AND g.position > f.position) "
    "WHERE f.position IN ({marks}) ORDER BY f.position",
    Succession,
)

# -- history, blame, diff -------------------------------------------------------------------


class Version(Columns, frozen=True):
    """A fact version, the version it replaced, and whether it is quarantined and current."""

    position: int
    ts_ns: int
    scope: str
    run_id: str | None
    tag: str
    key: str
    value: str
    content_hash: str
    producer_task_id: str
    source_adapter: str | None
    replaced_position: int | None
    quarantined: int
    is_current: int | None
    """None when no version of the fact is current."""


class Blamed(FactIdentity, frozen=True):
    """A current fact version, and how many versions of its fact came before it."""

    value: str
    position: int
    ts_ns: int
    producer_task_id: str
    source_adapter: str | None
    versions_before: int


class CurrentValue(FactIdentity, frozen=True):
    """A fact identity, and its current version's position, value and adapter."""

    position: int
    value: str
    source_adapter: str | None


FACT_VERSIONS = Query(
    "SELECT f.position, f.ts_ns, f.scope, f.run_id, f.tag, f.key, f.value, f.content_hash, "
    "f.producer_task_id, f.source_adapter, f.replaced_position, f.quarantined, "
    "c.position = f.position AS is_current FROM fl_fact f LEFT JOIN fl_fact_current c "
    "ON c.scope = f.scope AND c.run_key = f.run_key AND c.tag = f.tag AND c.key = f.key "
    "WHERE 1{filters} ORDER BY f.position",
    Version,
)
FACT_BLAME = Query(
    "SELECT f.scope, f.run_key, f.tag, f.key, f.value, f.position, f.ts_ns, "
    "f.producer_task_id, f.source_adapter, (SELECT count(*) FROM fl_fact p "
    "WHERE p.scope = c.scope AND p.run_key = c.run_key AND p.tag = c.tag AND p.key = c.key "
    "AND p.position < c.position) AS versions_before FROM fl_fact_current c JOIN fl_fact f "
    "ON f.position = c.position WHERE 1{filters} ORDER BY c.scope, c.run_key, c.tag, c.key",
    Blamed,
)
FACT_CURRENT_VALUES = Query(
    "SELECT c.scope, c.run_key, c.tag, c.key, f.position, f.value, f.source_adapter "
    "FROM fl_fact_current c JOIN fl_fact f ON f.position = c.position",
    CurrentValue,
)
FACT_FILTER_SCOPE = " AND f.scope = ?"
FACT_FILTER_TAG = " AND f.tag = ?"
FACT_FILTER_KEY = " AND f.key = ?"
FACT_FILTER_RUN = " AND f.run_id = ?"


def fact_filters(
    scope: str | None, tag: str | None, key: str | None, run_id: str | None
) -> tuple[str, list[object]]:
    """The `{filters}` of a fact query for every filter given, and their bound values."""
    given = [
        (fragment, value)
        for fragment, value in (
            (FACT_FILTER_SCOPE, scope),
            (FACT_FILTER_TAG, tag),
            (FACT_FILTER_KEY, key),
            (FACT_FILTER_RUN, run_id),
        )
        if value is not None
    ]
    return "".join(f for f, _ in given), [v for _, v in given]
