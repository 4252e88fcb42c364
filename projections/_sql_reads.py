"""The SQL of what readers are shown (`projections._reads`, `projections._reading`) and of the
receipt and lineage projectors that record what they were shown."""

from __future__ import annotations

from eventlog import LegacyClaims
from projections._sql import Columns, Count, Position, Query, legacy_claims
from projections._sql_knowledge import HIDDEN_SUPERSEDED

# -- reads ----------------------------------------------------------------------------------


class Entry(Columns, frozen=True):
    """A memory entry as `fl_memory` holds it (`projections._reads.entry_from_row` makes it a
    `MemoryEntry`)."""

    id: int
    type: str
    content: str
    tags: str
    """Comma-joined."""
    importance: float
    task_id: str | None
    created_at: float
    source_agent: str
    source_model: str
    source_adapter: str | None
    content_hash: str
    claims: str | None
    """The legacy row's claims, as JSON (`legacy_claims`)."""
    unsigned_import: int

    def legacy_claims(self) -> LegacyClaims | None:
        """The legacy row's claims, if the entry was imported."""
        return legacy_claims(self.claims)


ENTRY_COLUMNS = (
    "m.id, m.type, m.content, m.tags, m.importance, m.task_id, m.created_at, "
    "m.source_agent, m.source_model, m.source_adapter, m.content_hash, m.claims, "
    "m.unsigned_import"
)
ENTRIES = Query(
    f"SELECT {ENTRY_COLUMNS} FROM fl_memory m WHERE m.hidden = 0{{filters}} "
    "ORDER BY m.id DESC LIMIT ?",
    Entry,
)
FILTER_TYPE = " AND m.type = ?"
FILTER_TAGS = " AND m.id IN (SELECT entry_id FROM fl_memory_tag WHERE tag IN ({marks}))"
FILTER_ADAPTERS = " AND m.source_adapter IN ({marks})"
FILTER_BEFORE = " AND m.id < ?"


class Ranked(Columns, frozen=True):
    """What ranking an entry needs, and whether a reader may see it."""

    id: int
    tags: str
    importance: float
    hidden: int
    """`HIDDEN_*` bits."""
    source_adapter: str | None
    unsigned_import: int


class TagRanked(Ranked, frozen=True):
    """A ranked entry read from one tag's list, with the importance that list is keyed by."""

    listed_importance: float


# Ranked reads walk each query tag's entries from the most important down (newest first among
# equals), a chunk at a time, resuming below the last (importance, id) read. CROSS JOIN keeps
# the tag list as the outer loop, so the walk follows its primary key and never sorts. They
# read only what ranking needs; the entries that make the cut are then read by id.
RANK_COLUMNS = "m.id, m.tags, m.importance, m.hidden, m.source_adapter, m.unsigned_import"
RANKED_FIRST = Query(
    f"SELECT {RANK_COLUMNS}, t.importance AS listed_importance "
    "FROM fl_memory_tag t CROSS JOIN fl_memory m ON m.id = t.entry_id WHERE t.tag = ?{filters} "
    "ORDER BY t.importance DESC, t.entry_id DESC LIMIT ?",
    TagRanked,
)
RANKED_AFTER = Query(
    f"SELECT {RANK_COLUMNS}, t.importance AS listed_importance "
    "FROM fl_memory_tag t CROSS JOIN fl_memory m ON m.id = t.entry_id "
    "WHERE t.tag = ? AND (t.importance, t.entry_id) < (?, ?){filters} "
    "ORDER BY t.importance DESC, t.entry_id DESC LIMIT ?",
    TagRanked,
)

# Once a search holds its limit, it reads on only the rows that could displace the worst of
# them: sharing more query tags, or as many and ranked higher. A row's other tags among the
# lists still read ({marks}) are looked up in the tag index (a tag's row holds its entry's
# importance), so a row that cannot is stepped over without reading its entry. The second
# bound is a floor below which no row can.
RANKED_BEATING = Query(
    f"SELECT {RANK_COLUMNS}, t.importance AS listed_importance "
    "FROM fl_memory_tag t CROSS JOIN fl_memory m ON m.id = t.entry_id "
    "WHERE t.tag = ? AND (t.importance, t.entry_id) < (?, ?) "
    "AND (t.importance, t.entry_id) > (?, ?) "
    "AND (SELECT count(*) FROM fl_memory_tag o WHERE o.tag IN ({marks}) "
    "AND o.importance = t.importance AND o.entry_id = t.entry_id) "
    "+ ((t.importance, t.entry_id) > (?, ?)) >= ?{filters} "
    "ORDER BY t.importance DESC, t.entry_id DESC LIMIT ?",
    TagRanked,
)


class TagMark(Columns, frozen=True):
    """Where an entry sits in a tag's list: the key the list is ordered by, after the tag."""

    importance: float
    entry_id: int


# A tag's list is measured up to a cap by the entry that many down it (OFFSET steps over
# index entries for two thirds of what counting them in a LIMIT subquery costs); only a list
# found shorter than the cap, in the same snapshot, is then counted.
TAG_MARK_AT = Query(
    "SELECT importance, entry_id FROM fl_memory_tag WHERE tag = ? "
    "ORDER BY importance DESC, entry_id DESC LIMIT 1 OFFSET ?",
    TagMark,
)
TAG_COUNT = Query("SELECT count(*) AS count FROM fl_memory_tag WHERE tag = ?", Count)
NEWEST_FIRST = Query(
    f"SELECT {RANK_COLUMNS} FROM fl_memory m WHERE 1{{filters}} ORDER BY m.id DESC LIMIT ?",
    Ranked,
)
NEWEST_AFTER = Query(
    f"SELECT {RANK_COLUMNS} FROM fl_memory m WHERE m.id < ?{{filters}} ORDER BY m.id DESC LIMIT ?",
    Ranked,
)
ENTRIES_BY_ID = Query(f"SELECT {ENTRY_COLUMNS} FROM fl_memory m WHERE m.id IN ({{marks}})", Entry)
FILTER_VISIBLE = " AND m.hidden = 0"
FILTER_NOT_SUPERSEDED = f" AND m.hidden & {HIDDEN_SUPERSEDED} = 0"


class FactVersion(Columns, frozen=True):
    """A fact version as `fl_fact` holds it, in the order of `Fact`'s fields
    (`projections._reads.fact_from_row` makes it one)."""

    tag: str
    key: str
    value: str
    scope: str
    producer_task_id: str
    ts_ns: int
    content_hash: str
    position: int
    run_id: str | None
    source_adapter: str | None


class AllowedVersion(FactVersion, frozen=True):
    """The newest version of a fact an allow-list lets through."""

    newest: int


class FlaggedVersion(FactVersion, frozen=True):
    """A fact version, and whether a quarantine covers it."""

    quarantined: int


FACT_COLUMNS = (
    "f.tag, f.key, f.value, f.scope, f.producer_task_id, f.ts_ns, f.content_hash, f.position, "
    "f.run_id, f.source_adapter"
)
FACTS_CURRENT = Query(
    f"SELECT {FACT_COLUMNS} FROM fl_fact_current c JOIN fl_fact f ON f.position = c.position "
    "WHERE c.scope = ? AND c.run_key = ? AND c.tag = ? ORDER BY c.position DESC",
    FactVersion,
)
FACTS_CURRENT_ALLOWED = Query(
    f"SELECT {FACT_COLUMNS}, max(f.position) AS newest FROM fl_fact f "
    "WHERE f.scope = ? AND f.run_key = ? AND f.tag = ? AND f.quarantined = 0 "
    "AND f.source_adapter IN ({marks}) GROUP BY f.key ORDER BY f.position DESC",
    AllowedVersion,
)
FACTS_AT = Query(
    f"SELECT {FACT_COLUMNS} FROM fl_fact f WHERE f.position IN ({{marks}})", FactVersion
)
"""The fact versions written at some positions (a prompt names each fact's scope, tag and
key)."""


class TagName(Columns, frozen=True):
    tag: str


FACT_TAGS_IN_SCOPE = Query(
    "SELECT DISTINCT tag FROM fl_fact_current WHERE scope = ? AND run_key = ? ORDER BY tag LIMIT ?",
    TagName,
)
"""The tags with a current fact under (scope, run_key), in order (a tag listing)."""
FACT_HISTORY = Query(
    f"SELECT {FACT_COLUMNS} FROM fl_fact f "
    "WHERE f.scope = ? AND f.run_key = ? AND f.tag = ? AND f.key = ? ORDER BY f.position",
    FactVersion,
)
FACT_VERSIONS_NEWEST_FIRST = Query(
    f"SELECT {FACT_COLUMNS}, f.quarantined FROM fl_fact f "
    "WHERE f.scope = ? AND f.run_key = ? AND f.tag = ? AND f.key = ? AND f.position <= ? "
    "ORDER BY f.position DESC",
    FlaggedVersion,
)
"""Every version of one fact identity up to a position, newest first, with its quarantine
flag (agent reads: which versions a trust policy passes over)."""


class Replaced(Columns, frozen=True):
    """A fact version, and the version it replaced (its position, producer and adapter)."""

    position: int
    replaced_position: int
    producer_task_id: str
    source_adapter: str | None


FACTS_REPLACED = Query(
    "SELECT f.position, p.position AS replaced_position, p.producer_task_id, p.source_adapter "
    "FROM fl_fact f JOIN fl_fact p "
    "ON p.position = f.replaced_position WHERE f.position BETWEEN ? AND ?",
    Replaced,
)

# -- receipts -------------------------------------------------------------------------------

RECEIPT_TABLES = ("fl_receipt", "fl_receipt_item")
RECEIPT_DDL = (
    """CREATE TABLE fl_receipt (
        position INTEGER PRIMARY KEY,
        task_id TEXT,
        run_id TEXT,
        adapter TEXT,
        head_position INTEGER NOT NULL,
        rendered_hash TEXT NOT NULL,
        ts_ns INTEGER NOT NULL
    )""",
    """CREATE TABLE fl_receipt_item (
        event_position INTEGER NOT NULL,
        receipt_position INTEGER NOT NULL,
        included INTEGER NOT NULL,
        reason TEXT,
        PRIMARY KEY (event_position, receipt_position)
    ) WITHOUT ROWID""",
)
RECEIPT_INSERT = (
    "INSERT INTO fl_receipt (position, task_id, run_id, adapter, head_position, rendered_hash, "
    "ts_ns) VALUES (?, ?, ?, ?, ?, ?, ?)"
)
RECEIPT_ITEM_INSERT = (
    "INSERT OR IGNORE INTO fl_receipt_item (event_position, receipt_position, included, reason) "
    "VALUES (?, ?, ?, ?)"
)


class ReceiptItem(Columns, frozen=True):
    """A receipt (its position, and the task, run and adapter it names), and one event it
    included or kept out (and why)."""

    receipt_position: int
    task_id: str | None
    run_id: str | None
    adapter: str | None
    event_position: int
    included: int
    reason: str | None


RECEIPTS_TOUCHING = Query(
    "SELECT r.position AS receipt_position, r.task_id, r.run_id, r.adapter, i.event_position, "
    "i.included, i.reason FROM fl_receipt_item i JOIN fl_receipt r "
    "ON r.position = i.receipt_position "
    "WHERE i.event_position IN ({marks}) ORDER BY r.position, i.event_position",
    ReceiptItem,
)


class Positioned(Columns, frozen=True):
    position: int


RECEIPTS_AFTER = Query(
    "SELECT position FROM fl_receipt WHERE position > ? AND (? IS NULL OR task_id = ?) "
    "AND (? IS NULL OR run_id = ?) ORDER BY position LIMIT ?",
    Positioned,
)
"""The receipts after a position, of reads for a task and a run (NULL: any), oldest first."""

# -- lineage: which writes were derived from which events -----------------------------------

LINEAGE_TABLES = ("fl_lineage_reader", "fl_lineage_source", "fl_lineage_write")
LINEAGE_DDL = (
    # Version 1's tables (an edge per exposed position per write), gone from an upgraded model.
    "DROP TABLE IF EXISTS fl_lineage_edge",
    "DROP TABLE IF EXISTS fl_lineage_exposure",
    # Each reader (adapter, task, run; '' for none) a receipt exposed to anything, and its
    # source set: named by the position of the first such receipt.
    """CREATE TABLE fl_lineage_reader (
        adapter_key TEXT NOT NULL,
        task_id TEXT NOT NULL,
        run_key TEXT NOT NULL,
        source_set INTEGER NOT NULL,
        PRIMARY KEY (adapter_key, task_id, run_key)
    ) WITHOUT ROWID""",
    # The members of each source set, once per position: what reached a reader, with the
    # first receipt that included it (`via`), or what a write declared (`via` NULL; the
    # set is named by the write's own position).
    """CREATE TABLE fl_lineage_source (
        source_set INTEGER NOT NULL,
        event_position INTEGER NOT NULL,
        via INTEGER,
        PRIMARY KEY (source_set, event_position)
    ) WITHOUT ROWID""",
    "CREATE INDEX fl_lineage_source_by_event ON fl_lineage_source (event_position)",
    # The source sets each write draws on: its reader's (the members recorded before the
    # write) and its own declared one. At most two rows a write, however much it read.
    """CREATE TABLE fl_lineage_write (
        position INTEGER NOT NULL,
        source_set INTEGER NOT NULL,
        PRIMARY KEY (position, source_set)
    ) WITHOUT ROWID""",
    "CREATE INDEX fl_lineage_write_by_set ON fl_lineage_write (source_set, position)",
)


class SourceSet(Columns, frozen=True):
    source_set: int


LINEAGE_READER_SET = Query(
    "SELECT source_set FROM fl_lineage_reader "
    "WHERE adapter_key = ? AND task_id = ? AND run_key = ?",
    SourceSet,
)


class ReaderSet(Columns, frozen=True):
    adapter_key: str
    task_id: str
    run_key: str
    source_set: int


LINEAGE_READER_SETS = Query(
    "SELECT r.adapter_key, r.task_id, r.run_key, r.source_set "
    "FROM (VALUES {readers}) AS w CROSS JOIN fl_lineage_reader AS r "
    "ON r.adapter_key = w.column1 AND r.task_id = w.column2 AND r.run_key = w.column3",
    ReaderSet,
)
"""The source sets of several readers in one statement (`readers`: `(?, ?, ?)` per reader),
each found by the primary key (a row-value `IN` would scan the table)."""
READERS_PER_QUERY = 300
LINEAGE_READER_INSERT = (
    "INSERT INTO fl_lineage_reader (adapter_key, task_id, run_key, source_set) VALUES (?, ?, ?, ?)"
)
LINEAGE_SOURCE_INSERT = (
    "INSERT OR IGNORE INTO fl_lineage_source (source_set, event_position, via) VALUES (?, ?, ?)"
)
LINEAGE_WRITE_INSERT = "INSERT INTO fl_lineage_write (position, source_set) VALUES (?, ?)"
_LINEAGE_LINK = (
    "fl_lineage_write w JOIN fl_lineage_source s "
    "ON s.source_set = w.source_set AND coalesce(s.via, 0) < w.position"
)
"""A write and each source it draws on: members of its sets recorded before it."""


class Link(Columns, frozen=True):
    """A link of the derivation graph, walked from `origin` to `reached`, and the receipt
    that recorded it (None for a source the writer declared)."""

    origin: int
    reached: int
    via: int | None


class Ancestor(Columns, frozen=True):
    """An ancestor (`position`) of the position `root`."""

    root: int
    position: int


LINEAGE_PARENTS = Query(
    f"SELECT w.position AS origin, s.event_position AS reached, min(s.via) AS via "
    f"FROM {_LINEAGE_LINK} WHERE w.position IN ({{marks}}) "
    "GROUP BY w.position, s.event_position ORDER BY w.position, s.event_position",
    Link,
)
"""Every link into the given positions (child to parent); a parent both read and declared is
linked once, via its receipt."""
LINEAGE_CHILDREN = Query(
    f"SELECT s.event_position AS origin, w.position AS reached, min(s.via) AS via "
    f"FROM {_LINEAGE_LINK} WHERE s.event_position IN ({{marks}}) "
    "GROUP BY s.event_position, w.position ORDER BY s.event_position, w.position",
    Link,
)
"""Every link out of the given positions (parent to child)."""
LINEAGE_ANCESTORS = Query(
    "WITH RECURSIVE up (root, position) AS ("
    f"SELECT w.position, s.event_position FROM {_LINEAGE_LINK} WHERE w.position IN ({{marks}}) "
    f"UNION SELECT up.root, s.event_position FROM up JOIN {_LINEAGE_LINK} "
    "AND w.position = up.position) "
    "SELECT root, position FROM up ORDER BY root, position",
    Ancestor,
)
"""Every ancestor of each given position, nearest or not."""
LINEAGE_QUARANTINED_AMONG = Query(
    "SELECT DISTINCT event_position AS position FROM fl_quarantined "
    "WHERE event_position IN ({marks})",
    Position,
)
LINEAGE_ENTRIES_AMONG = Query(
    f"SELECT {ENTRY_COLUMNS} FROM fl_memory m WHERE m.id IN ({{marks}})", Entry
)
