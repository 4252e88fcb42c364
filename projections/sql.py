"""The read model's SQL: every statement the read side runs, and the rows its queries return.

The read model is SQLite on every host, whatever holds the log. Every statement is a
constant here; values are always bound, and identifiers are projector table names, never
input. `projections.database` runs them on a connection. A statement that returns rows is a
`Query`, declared with the Struct each row is read as: its fields are the statement's
columns, in order and by name (`tests/projections/test_sql.py` holds each to the other), so
no other module reads a row by position.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from types import GenericAlias
from typing import Any, Generic, Protocol, TypeVar, cast

import msgspec

from eventlog import Head, StorageError

Row = tuple[Any, ...]
"""A row as SQLite returns it (`Readable.execute`)."""
ID_BATCH = 500
"""Positions bound per statement by `Query.among`, well under SQLite's limit."""
BATCH = 4096
"""How much the read side handles at a time: events folded per projector call, re-linked per
chunk and per cache transaction while a cache catches up, and rows read per statement when a
whole table is read. Large enough that inserts go in bulk and statements are few, small
enough that memory stays flat however long the log."""


class Readable(Protocol):
    """Something read-model statements can run against."""

    def execute(self, statement: str, params: Sequence[object] = ()) -> list[Row]: ...


class Columns(msgspec.Struct, array_like=True, frozen=True, gc=False):
    """The base of every row a query returns: its fields are the query's columns."""


R = TypeVar("R", bound=Columns)


class Query(Generic[R]):
    """A statement that returns rows, and the Struct (`row`) each is returned as.

    Rows are converted in one call per statement, checked against the fields' types: a row
    of another type (a read model edited by hand) is a `StorageError` naming the column.
    """

    __slots__ = ("_many", "row", "text")

    def __init__(self, text: str, row: type[R]) -> None:
        self.text = text
        self.row = row
        self._many = _list_of(row)

    def format(self, **parts: str) -> Query[R]:
        """The query with its `{fields}` filled by constant fragments (never input)."""
        return Query(self.text.format(**parts), self.row)

    def rows(self, db: Readable, params: Sequence[object] = ()) -> list[R]:
        """Run the query on `db` and return its rows."""
        found = db.execute(self.text, params)
        try:
            return cast(list[R], msgspec.convert(found, self._many))
        except msgspec.ValidationError:
            raise StorageError(self._malformed(found)) from None

    def first(self, db: Readable, params: Sequence[object] = ()) -> R | None:
        """The query's first row on `db`, or None when it returns none."""
        found = self.rows(db, params)
        return found[0] if found else None

    def one(self, db: Readable, params: Sequence[object] = ()) -> R:
        """The one row the query returns on `db` (an aggregate, a pragma)."""
        found = self.first(db, params)
        if found is None:
            raise StorageError(f"the read model returned no {self.row.__name__} row")
        return found

    def exists(self, db: Readable, params: Sequence[object] = ()) -> bool:
        """Whether the query returns any row on `db`."""
        return bool(db.execute(self.text, params))

    def among(self, db: Readable, positions: Sequence[int]) -> list[R]:
        """Rows over `positions`, bound into the query's `IN ({marks})` list `ID_BATCH` at a
        time, in execution order."""
        rows: list[R] = []
        for start in range(0, len(positions), ID_BATCH):
            batch = positions[start : start + ID_BATCH]
            rows += self.format(marks=", ".join("?" * len(batch))).rows(db, batch)
        return rows

    def _malformed(self, found: list[Row]) -> str:
        """Which column of which row does not hold its field's type (never the value)."""
        fields = msgspec.structs.fields(self.row)
        for values in found:
            for field, value in zip(fields, values, strict=False):
                try:
                    msgspec.convert(value, field.type)
                except msgspec.ValidationError:
                    return (
                        f"the read model holds a row whose {field.name} is "
                        f"{type(value).__name__}, not what the read model writes there: it was "
                        "edited (`factledger verify --deep` names the row; `factledger rebuild "
                        "--swap` refolds it from the log)"
                    )
        return f"the read model holds rows a {self.row.__name__} cannot hold"


@functools.cache
def _list_of(row: type[Columns]) -> Any:
    """`list[row]`, made once per row type: msgspec converts a statement's rows in one call."""
    return GenericAlias(list, (row,))


class Present(Columns, frozen=True):
    """A row that says only that something exists (`SELECT 1`)."""

    present: int


class Position(Columns, frozen=True):
    """A log position: an entry's id, a fact version's, a quarantined event's."""

    position: int


class Count(Columns, frozen=True):
    count: int


# -- projector checkpoints ---------------------------------------------------------------

CHECKPOINT_DDL = """CREATE TABLE IF NOT EXISTS fl_projector_checkpoint (
    name TEXT PRIMARY KEY,
    version INTEGER NOT NULL,
    position INTEGER NOT NULL,
    chain_hash TEXT NOT NULL
)"""
CHECKPOINT_TABLE_EXISTS = Query(
    "SELECT 1 AS present FROM sqlite_master "
    "WHERE type = 'table' AND name = 'fl_projector_checkpoint'",
    Present,
)


class Checkpoint(Columns, frozen=True):
    """A projector's checkpoint as its row holds it, whatever that is: a row edited to hold
    something else is drift to report (`projections.comparison`), or a projector to refold,
    never an error."""

    name: object
    version: object
    position: object
    chain_hash: object

    def head(self) -> Head | None:
        """The log position and chain value the checkpoint names, if it names one."""
        position, chain_hash = self.position, self.chain_hash
        if type(position) is not int or position < 0 or not isinstance(chain_hash, str):
            return None
        return Head(position=position, chain_hash=chain_hash)


_CHECKPOINTS = "SELECT name, version, position, chain_hash FROM fl_projector_checkpoint"
CHECKPOINT_GET = Query(_CHECKPOINTS + " WHERE name = ?", Checkpoint)
CHECKPOINT_ROWS = Query(_CHECKPOINTS, Checkpoint)
CHECKPOINT_PUT = (
    "INSERT OR REPLACE INTO fl_projector_checkpoint (name, version, position, chain_hash) "
    "VALUES (?, ?, ?, ?)"
)
TABLE_INSERT = "INSERT INTO {table} VALUES ({marks})"
TABLE_DROP = "DROP TABLE IF EXISTS {table}"
CHECKPOINT_ADVANCE = (
    "UPDATE fl_projector_checkpoint SET position = ?, chain_hash = ? WHERE name = ?"
)


class DataVersion(Columns, frozen=True):
    data_version: int


DATA_VERSION = Query("PRAGMA data_version", DataVersion)
"""Changes whenever another connection commits to the file (never for this one's commits)."""

# -- a host's cache of a log held elsewhere -------------------------------------------------

CACHE_META_TABLE = "fl_cache_meta"
CACHE_META_DDL = """CREATE TABLE IF NOT EXISTS fl_cache_meta (
    name TEXT PRIMARY KEY,
    value TEXT NOT NULL
)"""


class MetaValue(Columns, frozen=True):
    value: object
    """As stored: a cache edited to hold something else is refused, not an error."""


class Name(Columns, frozen=True):
    name: str


CACHE_META_GET = Query("SELECT value FROM fl_cache_meta WHERE name = ?", MetaValue)
CACHE_META_PUT = "INSERT INTO fl_cache_meta (name, value) VALUES (?, ?)"
CACHE_TABLES = Query("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name", Name)

# -- knowledge: memory entries, tags, facts, quarantine, operators ------------------------

HIDDEN_QUARANTINED = 1
"""A bit of `fl_memory.hidden`: a quarantine covers the entry."""
HIDDEN_SUPERSEDED = 2
"""A bit of `fl_memory.hidden`: a fact's mirror whose version is no longer current."""

KNOWLEDGE_TABLES = (
    "fl_memory",
    "fl_memory_tag",
    "fl_fact",
    "fl_fact_current",
    "fl_quarantine",
    "fl_quarantined",
    "fl_operator",
    "fl_unauthorized",
    "fl_import",
)
KNOWLEDGE_DDL = (
    """CREATE TABLE fl_memory (
        id INTEGER PRIMARY KEY,
        type TEXT NOT NULL,
        content TEXT NOT NULL,
        tags TEXT NOT NULL,
        importance REAL NOT NULL,
        task_id TEXT,
        created_at REAL NOT NULL,
        source_agent TEXT NOT NULL,
        source_model TEXT NOT NULL,
        source_adapter TEXT,
        producer_task_id TEXT NOT NULL,
        content_hash TEXT NOT NULL,
        hidden INTEGER NOT NULL DEFAULT 0,
        claims TEXT,
        unsigned_import INTEGER NOT NULL DEFAULT 0
    )""",
    # Keyed by importance, so each tag's entries can be read in rank order (`reads`). The
    # importance is a copy of the entry's; the projector always writes it, and the default
    # (an entry's default importance) only serves a write that names (tag, entry_id) alone.
    """CREATE TABLE fl_memory_tag (
        tag TEXT NOT NULL,
        importance REAL NOT NULL DEFAULT 1.0,
        entry_id INTEGER NOT NULL,
        PRIMARY KEY (tag, importance, entry_id)
    ) WITHOUT ROWID""",
    """CREATE TABLE fl_fact (
        position INTEGER PRIMARY KEY,
        scope TEXT NOT NULL,
        run_key TEXT NOT NULL,
        tag TEXT NOT NULL,
        key TEXT NOT NULL,
        value TEXT NOT NULL,
        producer_task_id TEXT NOT NULL,
        ts_ns INTEGER NOT NULL,
        content_hash TEXT NOT NULL,
        run_id TEXT,
        source_adapter TEXT,
        replaced_position INTEGER,
        quarantined INTEGER NOT NULL DEFAULT 0
    )""",
    "CREATE INDEX fl_fact_by_identity ON fl_fact (scope, run_key, tag, key, position)",
    """CREATE TABLE fl_fact_current (
        scope TEXT NOT NULL,
        run_key TEXT NOT NULL,
        tag TEXT NOT NULL,
        key TEXT NOT NULL,
        position INTEGER NOT NULL,
        PRIMARY KEY (scope, run_key, tag, key)
    ) WITHOUT ROWID""",
    """CREATE TABLE fl_quarantine (
        position INTEGER PRIMARY KEY,
        reason TEXT NOT NULL,
        released_by INTEGER
    )""",
    """CREATE TABLE fl_quarantined (
        event_position INTEGER NOT NULL,
        quarantine_position INTEGER NOT NULL,
        PRIMARY KEY (event_position, quarantine_position)
    ) WITHOUT ROWID""",
    "CREATE INDEX fl_quarantined_by ON fl_quarantined (quarantine_position)",
    # Operator keys registered in the log, with the positions that added and removed them and
    # the keys that signed those events (README, "Operators and signing").
    """CREATE TABLE fl_operator (
        key_id TEXT PRIMARY KEY,
        name TEXT NOT NULL,
        public_key TEXT NOT NULL,
        added_position INTEGER NOT NULL,
        added_by TEXT NOT NULL,
        removed_position INTEGER,
        removed_by TEXT
    )""",
    # Operator actions that took no effect, and why.
    """CREATE TABLE fl_unauthorized (
        position INTEGER PRIMARY KEY,
        kind TEXT NOT NULL,
        key_id TEXT,
        reason TEXT NOT NULL
    )""",
    # Legacy rows imported with effect, so importing them again writes nothing; `signed` when
    # an operator's signature made the claims count, so a signed import still writes the rows
    # only an unsigned one imported.
    """CREATE TABLE fl_import (
        legacy_id INTEGER NOT NULL,
        created_at REAL NOT NULL,
        content_hash TEXT NOT NULL,
        signed INTEGER NOT NULL,
        position INTEGER NOT NULL,
        PRIMARY KEY (legacy_id, created_at, content_hash, signed)
    ) WITHOUT ROWID""",
)

MEMORY_INSERT = (
    "INSERT INTO fl_memory (id, type, content, tags, importance, task_id, created_at, "
    "source_agent, source_model, source_adapter, producer_task_id, content_hash, claims, "
    "unsigned_import) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
MIRROR_INSERT = (
    "INSERT INTO fl_memory (id, type, content, tags, importance, task_id, created_at, "
    "source_agent, source_model, source_adapter, producer_task_id, content_hash, hidden) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
TAG_INSERT = "INSERT OR IGNORE INTO fl_memory_tag (tag, importance, entry_id) VALUES (?, ?, ?)"


class Tagged(Columns, frozen=True):
    tags: str
    """Comma-joined."""
    importance: float


MEMORY_TAGS_OF = Query("SELECT tags, importance FROM fl_memory WHERE id = ?", Tagged)
MEMORY_DELETE = "DELETE FROM fl_memory WHERE id = ?"
TAG_DELETE = "DELETE FROM fl_memory_tag WHERE tag = ? AND importance = ? AND entry_id = ?"
MEMORY_REWEIGHT = "UPDATE fl_memory SET importance = importance * ?"
TAG_REWEIGHT = "UPDATE fl_memory_tag SET importance = importance * ?"
MEMORY_EXISTS = Query("SELECT 1 AS present FROM fl_memory WHERE id = ?", Present)
MEMORY_PRUNE_OLD = Query(
    "SELECT id AS position FROM fl_memory WHERE hidden = 0 AND created_at < ?", Position
)
MEMORY_PRUNE_KEEP = Query(
    "SELECT id AS position FROM fl_memory WHERE hidden = 0 "
    "ORDER BY importance DESC, created_at DESC, id DESC",
    Position,
)


class FactIdentity(Columns, frozen=True):
    """A fact's identity: (scope, run_key, tag, key), `run_key` '' in project scope."""

    scope: str
    run_key: str
    tag: str
    key: str

    def identity(self) -> tuple[str, str, str, str]:
        return (self.scope, self.run_key, self.tag, self.key)


class CurrentOf(FactIdentity, frozen=True):
    """A fact identity and the position of its current version."""

    position: int


FACT_CURRENT_OF = Query(
    "WITH v (scope, run_key, tag, key) AS (VALUES {rows}) "
    "SELECT c.scope, c.run_key, c.tag, c.key, c.position "
    "FROM v CROSS JOIN fl_fact_current c USING (scope, run_key, tag, key)",
    CurrentOf,
)
FACT_CURRENT_PUT = (
    "INSERT OR REPLACE INTO fl_fact_current (scope, run_key, tag, key, position) "
    "VALUES (?, ?, ?, ?, ?)"
)
FACT_CURRENT_DELETE = (
    "DELETE FROM fl_fact_current WHERE scope = ? AND run_key = ? AND tag = ? AND key = ?"
)
FACT_INSERT = (
    "INSERT INTO fl_fact (position, scope, run_key, tag, key, value, producer_task_id, ts_ns, "
    "content_hash, run_id, source_adapter, replaced_position) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
FACT_MIRRORS_OLDER_HIDE = (
    f"UPDATE fl_memory SET hidden = hidden | {HIDDEN_SUPERSEDED} "
    "WHERE id IN (SELECT position FROM fl_fact "
    "WHERE scope = ? AND run_key = ? AND tag = ? AND key = ? AND position >= ? AND position < ?)"
)


class Newest(Columns, frozen=True):
    position: int | None
    """None when there is none."""


FACT_NEWEST_VISIBLE = Query(
    "SELECT max(position) AS position FROM fl_fact "
    "WHERE scope = ? AND run_key = ? AND tag = ? AND key = ? AND quarantined = 0",
    Newest,
)
FACT_MIRRORS_SUPERSEDE = (
    f"UPDATE fl_memory SET hidden = (hidden & ~{HIDDEN_SUPERSEDED}) "
    f"| (CASE WHEN id < ? THEN {HIDDEN_SUPERSEDED} ELSE 0 END) "
    "WHERE id IN (SELECT position FROM fl_fact "
    "WHERE scope = ? AND run_key = ? AND tag = ? AND key = ?)"
)
FACT_IDENTITY_OF = Query(
    "SELECT scope, run_key, tag, key FROM fl_fact WHERE position = ?", FactIdentity
)

QUARANTINE_INSERT = "INSERT INTO fl_quarantine (position, reason) VALUES (?, ?)"
QUARANTINE_ACTIVE = Query(
    "SELECT 1 AS present FROM fl_quarantine WHERE position = ? AND released_by IS NULL", Present
)
QUARANTINE_RELEASE = "UPDATE fl_quarantine SET released_by = ? WHERE position = ?"
QUARANTINE_COVER = (
    "INSERT OR IGNORE INTO fl_quarantined (event_position, quarantine_position) VALUES (?, ?)"
)
QUARANTINE_COVERED_BY = Query(
    "SELECT event_position AS position FROM fl_quarantined WHERE quarantine_position = ?",
    Position,
)
QUARANTINE_UNCOVER = "DELETE FROM fl_quarantined WHERE quarantine_position = ?"
QUARANTINE_STILL_COVERED = Query(
    "SELECT 1 AS present FROM fl_quarantined WHERE event_position = ? LIMIT 1", Present
)
QUARANTINE_SET_MEMORY = (
    f"UPDATE fl_memory SET hidden = (hidden & ~{HIDDEN_QUARANTINED}) | ? WHERE id = ?"
)
QUARANTINE_SET_FACT = "UPDATE fl_fact SET quarantined = ? WHERE position = ?"
QUARANTINE_CANDIDATES = Query(
    "SELECT id AS position FROM fl_memory WHERE id < ? {where_memory} "
    "UNION SELECT position FROM fl_fact WHERE position < ? {where_fact}",
    Position,
)


class Quarantine(Columns, frozen=True):
    """A quarantine that took effect, and the release that undid it, if any."""

    position: int
    reason: str
    released_by: int | None


_QUARANTINES = "SELECT position, reason, released_by FROM fl_quarantine"
QUARANTINE_GET = Query(_QUARANTINES + " WHERE position = ?", Quarantine)
QUARANTINE_ALL = Query(_QUARANTINES + " ORDER BY position", Quarantine)


class Operator(Columns, frozen=True):
    """An operator key the log registered: when, and the key that signed it; when it was
    removed and by which key (None while it is not)."""

    key_id: str
    name: str
    public_key: str
    """Base64."""
    added_position: int
    added_by: str
    removed_position: int | None
    removed_by: str | None


OPERATOR_ANY = Query("SELECT 1 AS present FROM fl_operator LIMIT 1", Present)
_OPERATORS = (
    "SELECT key_id, name, public_key, added_position, added_by, removed_position, removed_by "
    "FROM fl_operator"
)
OPERATOR_GET = Query(_OPERATORS + " WHERE key_id = ?", Operator)
OPERATOR_LIST = Query(_OPERATORS + " ORDER BY added_position", Operator)
OPERATOR_INSERT = (
    "INSERT INTO fl_operator (key_id, name, public_key, added_position, added_by) "
    "VALUES (?, ?, ?, ?, ?)"
)
OPERATOR_REMOVE = "UPDATE fl_operator SET removed_position = ?, removed_by = ? WHERE key_id = ?"
OPERATOR_ACTIVE_COUNT = Query(
    "SELECT count(*) AS count FROM fl_operator WHERE removed_position IS NULL", Count
)
UNAUTHORIZED_INSERT = (
    "INSERT INTO fl_unauthorized (position, kind, key_id, reason) VALUES (?, ?, ?, ?)"
)


class Unauthorized(Columns, frozen=True):
    """An operator action that took no effect: its kind, the key it named, and why."""

    position: int
    kind: str
    key_id: str | None
    reason: str


_UNAUTHORIZED = "SELECT position, kind, key_id, reason FROM fl_unauthorized"
UNAUTHORIZED_ALL = Query(_UNAUTHORIZED + " ORDER BY position", Unauthorized)
UNAUTHORIZED_AT = Query(_UNAUTHORIZED + " WHERE position IN ({marks})", Unauthorized)
IMPORT_INSERT = (
    "INSERT OR IGNORE INTO fl_import (legacy_id, created_at, content_hash, signed, position) "
    "VALUES (?, ?, ?, ?, ?)"
)


class Imported(Columns, frozen=True):
    """A legacy row imported with effect."""

    legacy_id: int
    created_at: float
    content_hash: str


IMPORT_ALL = Query(
    "SELECT legacy_id, created_at, content_hash FROM fl_import WHERE signed >= ?", Imported
)

# -- reads ----------------------------------------------------------------------------------


class Entry(Columns, frozen=True):
    """A memory entry as `fl_memory` holds it (`projections.reads.entry_from_row` makes it a
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
    """The legacy row's claims, as JSON."""
    unsigned_import: int


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
TAG_COUNT_UPTO = Query(
    "SELECT count(*) AS count FROM (SELECT 1 FROM fl_memory_tag WHERE tag = ? LIMIT ?)", Count
)
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
    (`projections.reads.fact_from_row` makes it one)."""

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

# -- legacy import ----------------------------------------------------------------------------


class Legacy(Columns, frozen=True):
    """A row of the replaced store's `memory` table: input, checked before it is imported."""

    id: object
    type: object
    content: object
    tags: object
    importance: object
    task_id: object
    created_at: object
    source_agent: object
    source_model: object
    source_adapter: object


LEGACY_OPTIONAL = ("source_agent", "source_model", "source_adapter")
"""Columns of `Legacy` a legacy table may lack (read as NULL); it needs the others."""
LEGACY_TABLE_EXISTS = Query(
    "SELECT 1 AS present FROM sqlite_master WHERE type = 'table' AND name = 'memory'", Present
)
LEGACY_COLUMNS = Query("SELECT name FROM pragma_table_info('memory')", Name)
LEGACY_ROWS = Query("SELECT {columns} FROM memory ORDER BY created_at, id", Legacy)


def legacy_rows(present: set[str]) -> Query[Legacy]:
    """`LEGACY_ROWS` over a table holding the columns in `present`: an optional column it
    lacks is read as NULL (the names spliced are `Legacy`'s own, never `present`'s)."""
    columns = [
        name if name in present or name not in LEGACY_OPTIONAL else f"NULL AS {name}"
        for name in Legacy.__struct_fields__
    ]
    return LEGACY_ROWS.format(columns=", ".join(columns))


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
    unsigned_import: int


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


QUARANTINE_MATCH_POSITIONS = (" AND id IN ({marks})", " AND position IN ({marks})")
QUARANTINE_MATCH_PRODUCER = (" AND producer_task_id = ?", " AND producer_task_id = ?")
QUARANTINE_MATCH_ADAPTER = (" AND source_adapter = ?", " AND source_adapter = ?")
"""(memory entry condition, fact version condition) pairs for `QUARANTINE_CANDIDATES`."""

# -- whole tables, in primary-key order (rebuild comparisons) -------------------------------


class TableColumn(Columns, frozen=True):
    """A column of a table, and its place in the primary key (0: not in it)."""

    name: str
    pk: int


TABLE_INFO = Query("SELECT name, pk FROM pragma_table_info(?, ?)", TableColumn)
TABLE_CHUNK_FIRST = "SELECT * FROM {schema}.{table} ORDER BY {key} LIMIT ?"
TABLE_CHUNK_AFTER = (
    "SELECT * FROM {schema}.{table} WHERE ({key}) > ({marks}) ORDER BY {key} LIMIT ?"
)

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


# -- conflict policy: versions by non-owners, denied or held ------------------------------

CONFLICT_TABLES = ("fl_conflict_policy", "fl_fact_held")
CONFLICT_DDL = (
    # scope '' is the policy for every scope of the tag; a scope's own policy comes first.
    # `owners` is a JSON array of adapters, NULL for `allow` and for a policy written before
    # owners existed (the first writer owns).
    """CREATE TABLE fl_conflict_policy (
        scope TEXT NOT NULL,
        tag TEXT NOT NULL,
        on_conflict TEXT NOT NULL,
        position INTEGER NOT NULL,
        owners TEXT,
        PRIMARY KEY (scope, tag)
    ) WITHOUT ROWID""",
    # Fact versions a policy kept from becoming current: `denied`, `pending` (held), and,
    # once an operator decided, `approved` or `rejected`. `contested` is the version that was
    # current when it was written (NULL when none was).
    """CREATE TABLE fl_fact_held (
        position INTEGER PRIMARY KEY,
        scope TEXT NOT NULL,
        run_key TEXT NOT NULL,
        tag TEXT NOT NULL,
        key TEXT NOT NULL,
        value TEXT NOT NULL,
        producer_task_id TEXT NOT NULL,
        ts_ns INTEGER NOT NULL,
        content_hash TEXT NOT NULL,
        run_id TEXT,
        source_adapter TEXT,
        status TEXT NOT NULL,
        contested INTEGER,
        decided_by INTEGER
    )""",
)
CONFLICT_ANY = Query("SELECT 1 AS present FROM fl_conflict_policy LIMIT 1", Present)
CONFLICT_POLICY_PUT = (
    "INSERT OR REPLACE INTO fl_conflict_policy (scope, tag, on_conflict, position, owners) "
    "VALUES (?, ?, ?, ?, ?)"
)


class TagPolicy(Columns, frozen=True):
    """A tag's policy in one scope ('' for every scope)."""

    scope: str
    on_conflict: str
    owners: str | None
    """A JSON array of adapters; None for `allow`, or when the first writer owns."""


class Policy(Columns, frozen=True):
    """A tag's policy in force: in one scope ('' for every scope), set at `position`."""

    scope: str
    tag: str
    on_conflict: str
    position: int
    owners: str | None
    """As `TagPolicy.owners`."""


class Current(Columns, frozen=True):
    """A fact's current version: its position and adapter."""

    position: int
    source_adapter: str | None


CONFLICT_POLICIES_FOR = Query(
    "SELECT scope, on_conflict, owners FROM fl_conflict_policy WHERE tag = ?", TagPolicy
)
CONFLICT_POLICIES = Query(
    "SELECT scope, tag, on_conflict, position, owners FROM fl_conflict_policy ORDER BY tag, scope",
    Policy,
)
CONFLICT_CURRENT = Query(
    "SELECT c.position, f.source_adapter FROM fl_fact_current c JOIN fl_fact f "
    "ON f.position = c.position WHERE c.scope = ? AND c.run_key = ? AND c.tag = ? AND c.key = ?",
    Current,
)
HELD_INSERT = (
    "INSERT INTO fl_fact_held (position, scope, run_key, tag, key, value, producer_task_id, "
    "ts_ns, content_hash, run_id, source_adapter, status, contested) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


class Held(Columns, frozen=True):
    """A fact version a policy kept from becoming current: `status` is `denied`, `pending`,
    `approved` or `rejected`; `contested` the version current when it was written;
    `decided_by` the operator's approval or rejection."""

    position: int
    scope: str
    run_key: str
    tag: str
    key: str
    value: str
    producer_task_id: str
    ts_ns: int
    content_hash: str
    run_id: str | None
    source_adapter: str | None
    status: str
    contested: int | None
    decided_by: int | None


_HELD = (
    "SELECT position, scope, run_key, tag, key, value, producer_task_id, ts_ns, content_hash, "
    "run_id, source_adapter, status, contested, decided_by FROM fl_fact_held f"
)
HELD_GET = Query(_HELD + " WHERE position = ?", Held)
HELD_DECIDE = "UPDATE fl_fact_held SET status = ?, decided_by = ? WHERE position = ?"
HELD_AMONG = Query(_HELD + " WHERE position IN ({marks}) ORDER BY position", Held)
HELD_MATCHING = Query(_HELD + " WHERE 1{filters} ORDER BY position", Held)
"""Held versions matching `FACT_FILTER_*` fragments."""
