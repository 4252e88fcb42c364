"""The read model's SQL, and the only place the read side talks to SQLite.

The read model is SQLite on every host, whatever holds the log. Every statement is a
constant here; values are always bound, and identifiers are projector table names, never
input. `Database` runs them on a connection: the log's own (a read model in the log's file,
committed with each append), or one of its own (a scratch fold, a legacy file).
"""

from __future__ import annotations

import os
import sqlite3
import tempfile
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from eventlog import EventLog, ReadOnlyStoreError, SQLiteEventLog, StorageError
from eventlog.sqlite import translate

Row = tuple[Any, ...]

# -- projector checkpoints ---------------------------------------------------------------

CHECKPOINT_DDL = """CREATE TABLE IF NOT EXISTS fl_projector_checkpoint (
    name TEXT PRIMARY KEY,
    version INTEGER NOT NULL,
    position INTEGER NOT NULL,
    chain_hash TEXT NOT NULL
)"""
CHECKPOINT_TABLE_EXISTS = (
    "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'fl_projector_checkpoint'"
)
CHECKPOINT_GET = "SELECT version, position, chain_hash FROM fl_projector_checkpoint WHERE name = ?"
CHECKPOINT_ALL = "SELECT name, position FROM fl_projector_checkpoint"
CHECKPOINT_PUT = (
    "INSERT OR REPLACE INTO fl_projector_checkpoint (name, version, position, chain_hash) "
    "VALUES (?, ?, ?, ?)"
)
TABLE_INSERT = "INSERT INTO {table} VALUES ({marks})"
TABLE_DROP = "DROP TABLE IF EXISTS {table}"
CHECKPOINT_ADVANCE = (
    "UPDATE fl_projector_checkpoint SET position = ?, chain_hash = ? WHERE name = ?"
)
CHECKPOINT_ROWS = "SELECT name, version, position, chain_hash FROM fl_projector_checkpoint"
DATA_VERSION = "PRAGMA data_version"
"""Changes whenever another connection commits to the file (never for this one's commits)."""
QUERY_BEGIN = "SAVEPOINT fl_query"
QUERY_UNDO = "ROLLBACK TO fl_query"
QUERY_END = "RELEASE fl_query"
"""A savepoint around each query of a read (`Database.query`), to undo one that wrote."""

# -- a host's cache of a log held elsewhere -------------------------------------------------

CACHE_META_TABLE = "fl_cache_meta"
CACHE_META_DDL = """CREATE TABLE IF NOT EXISTS fl_cache_meta (
    name TEXT PRIMARY KEY,
    value TEXT NOT NULL
)"""
CACHE_META_GET = "SELECT value FROM fl_cache_meta WHERE name = ?"
CACHE_META_PUT = "INSERT INTO fl_cache_meta (name, value) VALUES (?, ?)"
CACHE_TABLES = "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"

# -- knowledge: memory entries, tags, facts, quarantine, operators ------------------------

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

HIDDEN_QUARANTINED = 1
HIDDEN_SUPERSEDED = 2

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
MEMORY_TAGS_OF = "SELECT tags, importance FROM fl_memory WHERE id = ?"
MEMORY_DELETE = "DELETE FROM fl_memory WHERE id = ?"
TAG_DELETE = "DELETE FROM fl_memory_tag WHERE tag = ? AND importance = ? AND entry_id = ?"
MEMORY_REWEIGHT = "UPDATE fl_memory SET importance = importance * ?"
TAG_REWEIGHT = "UPDATE fl_memory_tag SET importance = importance * ?"
MEMORY_EXISTS = "SELECT 1 FROM fl_memory WHERE id = ?"
MEMORY_PRUNE_OLD = "SELECT id FROM fl_memory WHERE hidden = 0 AND created_at < ?"
MEMORY_PRUNE_KEEP = (
    "SELECT id FROM fl_memory WHERE hidden = 0 ORDER BY importance DESC, created_at DESC, id DESC"
)

FACT_CURRENT_OF = (
    "WITH v (scope, run_key, tag, key) AS (VALUES {rows}) "
    "SELECT c.scope, c.run_key, c.tag, c.key, c.position "
    "FROM v CROSS JOIN fl_fact_current c USING (scope, run_key, tag, key)"
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
    "UPDATE fl_memory SET hidden = hidden | 2 WHERE id IN (SELECT position FROM fl_fact "
    "WHERE scope = ? AND run_key = ? AND tag = ? AND key = ? AND position >= ? AND position < ?)"
)
FACT_NEWEST_VISIBLE = (
    "SELECT max(position) FROM fl_fact WHERE scope = ? AND run_key = ? AND tag = ? AND key = ? "
    "AND quarantined = 0"
)
FACT_MIRRORS_SUPERSEDE = (
    "UPDATE fl_memory SET hidden = (hidden & ~2) | (CASE WHEN id < ? THEN 2 ELSE 0 END) "
    "WHERE id IN (SELECT position FROM fl_fact "
    "WHERE scope = ? AND run_key = ? AND tag = ? AND key = ?)"
)
FACT_IDENTITY_OF = "SELECT scope, run_key, tag, key FROM fl_fact WHERE position = ?"

QUARANTINE_INSERT = "INSERT INTO fl_quarantine (position, reason) VALUES (?, ?)"
QUARANTINE_ACTIVE = "SELECT 1 FROM fl_quarantine WHERE position = ? AND released_by IS NULL"
QUARANTINE_RELEASE = "UPDATE fl_quarantine SET released_by = ? WHERE position = ?"
QUARANTINE_COVER = (
    "INSERT OR IGNORE INTO fl_quarantined (event_position, quarantine_position) VALUES (?, ?)"
)
QUARANTINE_COVERED_BY = "SELECT event_position FROM fl_quarantined WHERE quarantine_position = ?"
QUARANTINE_UNCOVER = "DELETE FROM fl_quarantined WHERE quarantine_position = ?"
QUARANTINE_STILL_COVERED = "SELECT 1 FROM fl_quarantined WHERE event_position = ? LIMIT 1"
QUARANTINE_SET_MEMORY = "UPDATE fl_memory SET hidden = (hidden & ~1) | ? WHERE id = ?"
QUARANTINE_SET_FACT = "UPDATE fl_fact SET quarantined = ? WHERE position = ?"
QUARANTINE_CANDIDATES = (
    "SELECT id FROM fl_memory WHERE id < ? {where_memory} "
    "UNION SELECT position FROM fl_fact WHERE position < ? {where_fact}"
)
QUARANTINE_GET = "SELECT position, reason, released_by FROM fl_quarantine WHERE position = ?"
QUARANTINE_ALL = "SELECT position, reason, released_by FROM fl_quarantine ORDER BY position"

OPERATOR_ANY = "SELECT 1 FROM fl_operator LIMIT 1"
OPERATOR_COLUMNS = (
    "key_id, name, public_key, added_position, added_by, removed_position, removed_by"
)
OPERATOR_GET = "SELECT " + OPERATOR_COLUMNS + " FROM fl_operator WHERE key_id = ?"
OPERATOR_LIST = "SELECT " + OPERATOR_COLUMNS + " FROM fl_operator ORDER BY added_position"
OPERATOR_INSERT = (
    "INSERT INTO fl_operator (key_id, name, public_key, added_position, added_by) "
    "VALUES (?, ?, ?, ?, ?)"
)
OPERATOR_REMOVE = "UPDATE fl_operator SET removed_position = ?, removed_by = ? WHERE key_id = ?"
OPERATOR_ACTIVE_COUNT = "SELECT count(*) FROM fl_operator WHERE removed_position IS NULL"
UNAUTHORIZED_INSERT = (
    "INSERT INTO fl_unauthorized (position, kind, key_id, reason) VALUES (?, ?, ?, ?)"
)
UNAUTHORIZED_ALL = "SELECT position, kind, key_id, reason FROM fl_unauthorized ORDER BY position"
UNAUTHORIZED_AT = (
    "SELECT position, kind, key_id, reason FROM fl_unauthorized WHERE position IN ({marks})"
)
IMPORT_INSERT = (
    "INSERT OR IGNORE INTO fl_import (legacy_id, created_at, content_hash, signed, position) "
    "VALUES (?, ?, ?, ?, ?)"
)
IMPORT_ALL = "SELECT legacy_id, created_at, content_hash FROM fl_import WHERE signed >= ?"

# -- reads ----------------------------------------------------------------------------------

ENTRY_COLUMNS = (
    "m.id, m.type, m.content, m.tags, m.importance, m.task_id, m.created_at, "
    "m.source_agent, m.source_model, m.source_adapter, m.content_hash, m.claims, "
    "m.unsigned_import"
)
ENTRIES = (
    "SELECT "
    + ENTRY_COLUMNS
    + " FROM fl_memory m WHERE m.hidden = 0{filters} "
    + ("ORDER BY m.id DESC LIMIT ?")
)
FILTER_TYPE = " AND m.type = ?"
FILTER_TAGS = " AND m.id IN (SELECT entry_id FROM fl_memory_tag WHERE tag IN ({marks}))"
FILTER_ADAPTERS = " AND m.source_adapter IN ({marks})"
FILTER_BEFORE = " AND m.id < ?"
# Ranked reads walk each query tag's entries from the most important down (newest first among
# equals), a chunk at a time, resuming below the last (importance, id) read. CROSS JOIN keeps
# the tag list as the outer loop, so the walk follows its primary key and never sorts. They
# read only what ranking needs; the entries that make the cut are then read by id.
RANK_COLUMNS = "m.id, m.tags, m.importance, m.hidden, m.source_adapter, m.unsigned_import"
RANKED_FIRST = (
    "SELECT " + RANK_COLUMNS + ", t.importance FROM fl_memory_tag t CROSS JOIN fl_memory m "
    "ON m.id = t.entry_id WHERE t.tag = ?{filters} "
    "ORDER BY t.importance DESC, t.entry_id DESC LIMIT ?"
)
RANKED_AFTER = (
    "SELECT " + RANK_COLUMNS + ", t.importance FROM fl_memory_tag t CROSS JOIN fl_memory m "
    "ON m.id = t.entry_id WHERE t.tag = ? AND (t.importance, t.entry_id) < (?, ?){filters} "
    "ORDER BY t.importance DESC, t.entry_id DESC LIMIT ?"
)
TAG_COUNT_UPTO = "SELECT count(*) FROM (SELECT 1 FROM fl_memory_tag WHERE tag = ? LIMIT ?)"
NEWEST_FIRST = (
    "SELECT " + RANK_COLUMNS + " FROM fl_memory m WHERE 1{filters} ORDER BY m.id DESC LIMIT ?"
)
NEWEST_AFTER = (
    "SELECT " + RANK_COLUMNS + " FROM fl_memory m "
    "WHERE m.id < ?{filters} ORDER BY m.id DESC LIMIT ?"
)
ENTRIES_BY_ID = "SELECT " + ENTRY_COLUMNS + " FROM fl_memory m WHERE m.id IN ({marks})"
FILTER_VISIBLE = " AND m.hidden = 0"
FILTER_NOT_SUPERSEDED = " AND m.hidden & 2 = 0"

FACT_COLUMNS = (
    "f.tag, f.key, f.value, f.scope, f.producer_task_id, f.ts_ns, f.content_hash, f.position, "
    "f.run_id, f.source_adapter"
)
FACTS_CURRENT = (
    "SELECT " + FACT_COLUMNS + " FROM fl_fact_current c JOIN fl_fact f ON f.position = c.position "
    "WHERE c.scope = ? AND c.run_key = ? AND c.tag = ? ORDER BY c.position DESC"
)
FACTS_CURRENT_ALLOWED = (
    "SELECT " + FACT_COLUMNS + ", max(f.position) FROM fl_fact f "
    "WHERE f.scope = ? AND f.run_key = ? AND f.tag = ? AND f.quarantined = 0 "
    "AND f.source_adapter IN ({marks}) GROUP BY f.key ORDER BY f.position DESC"
)
FACT_HISTORY = (
    "SELECT " + FACT_COLUMNS + " FROM fl_fact f "
    "WHERE f.scope = ? AND f.run_key = ? AND f.tag = ? AND f.key = ? ORDER BY f.position"
)
FACT_VERSIONS_NEWEST_FIRST = (
    "SELECT f.quarantined, " + FACT_COLUMNS + " FROM fl_fact f "
    "WHERE f.scope = ? AND f.run_key = ? AND f.tag = ? AND f.key = ? AND f.position <= ? "
    "ORDER BY f.position DESC"
)
"""Every version of one fact identity up to a position, newest first, with its quarantine
flag (agent reads: which versions a trust policy passes over)."""
FACTS_REPLACED = (
    "SELECT f.position, p.position, p.producer_task_id, p.source_adapter "
    "FROM fl_fact f JOIN fl_fact p "
    "ON p.position = f.replaced_position WHERE f.position BETWEEN ? AND ?"
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
RECEIPTS_TOUCHING = (
    "SELECT r.position, r.task_id, r.run_id, r.adapter, i.event_position, i.included, i.reason "
    "FROM fl_receipt_item i JOIN fl_receipt r ON r.position = i.receipt_position "
    "WHERE i.event_position IN ({marks}) ORDER BY r.position, i.event_position"
)

# -- legacy import ----------------------------------------------------------------------------

LEGACY_TABLE_EXISTS = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'memory'"
LEGACY_COLUMNS = "PRAGMA table_info(memory)"
LEGACY_ROWS = "SELECT {columns} FROM memory ORDER BY created_at, id"

# -- forensics --------------------------------------------------------------------------------

FORENSIC_LIVE_FACTS = (
    "SELECT f.position, f.scope, f.run_id, f.tag, f.key, f.producer_task_id, f.source_adapter, "
    "f.content_hash FROM fl_fact_current c JOIN fl_fact f ON f.position = c.position "
    "WHERE c.position IN ({marks}) ORDER BY f.position"
)
FORENSIC_LIVE_ENTRIES = (
    "SELECT m.id, m.type, m.tags, m.producer_task_id, m.source_adapter, m.content_hash, "
    "m.claims, m.unsigned_import FROM fl_memory m "
    "WHERE m.hidden = 0 AND m.type <> 'cross_task' AND m.id IN ({marks}) "
    "ORDER BY m.id"
)
FORENSIC_OVERWRITTEN = (
    "SELECT f.position, f.scope, f.run_id, f.tag, f.key, p.position, p.producer_task_id, "
    "p.source_adapter FROM fl_fact f JOIN fl_fact p ON p.position = f.replaced_position "
    "WHERE f.position IN ({marks}) ORDER BY f.position"
)
FORENSIC_NEXT_VERSIONS = (
    "SELECT f.position, f.scope, f.run_id, f.tag, f.key, n.position, n.producer_task_id, "
    "n.source_adapter FROM fl_fact f JOIN fl_fact n ON n.position = ("
    "SELECT min(g.position) FROM fl_fact g WHERE g.scope = f.scope AND g.run_key = f.run_key "
    "AND g.tag = f.tag AND g.key = f.key AND g.position > f.position) "
    "WHERE f.position IN ({marks}) ORDER BY f.position"
)

# -- history, blame, diff -------------------------------------------------------------------

FACT_VERSIONS = (
    "SELECT f.position, f.ts_ns, f.scope, f.run_id, f.tag, f.key, f.value, f.content_hash, "
    "f.producer_task_id, f.source_adapter, f.replaced_position, f.quarantined, "
    "c.position = f.position FROM fl_fact f LEFT JOIN fl_fact_current c ON c.scope = f.scope "
    "AND c.run_key = f.run_key AND c.tag = f.tag AND c.key = f.key WHERE 1{filters} "
    "ORDER BY f.position"
)
FACT_BLAME = (
    "SELECT f.scope, f.run_key, f.tag, f.key, f.value, f.position, f.ts_ns, "
    "f.producer_task_id, f.source_adapter, (SELECT count(*) FROM fl_fact p "
    "WHERE p.scope = c.scope AND p.run_key = c.run_key AND p.tag = c.tag AND p.key = c.key "
    "AND p.position < c.position) FROM fl_fact_current c JOIN fl_fact f "
    "ON f.position = c.position WHERE 1{filters} ORDER BY c.scope, c.run_key, c.tag, c.key"
)
FACT_CURRENT_VALUES = (
    "SELECT c.scope, c.run_key, c.tag, c.key, f.position, f.value, f.source_adapter "
    "FROM fl_fact_current c JOIN fl_fact f ON f.position = c.position"
)
HELD_AMONG = "SELECT position FROM fl_fact_held WHERE position IN ({marks})"
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

TABLE_INFO = "SELECT name, pk FROM pragma_table_info(?, ?)"
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
LINEAGE_READER_SET = (
    "SELECT source_set FROM fl_lineage_reader WHERE adapter_key = ? AND task_id = ? AND run_key = ?"
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
LINEAGE_PARENTS = (
    f"SELECT w.position, s.event_position, min(s.via) FROM {_LINEAGE_LINK} "
    "WHERE w.position IN ({marks}) GROUP BY w.position, s.event_position "
    "ORDER BY w.position, s.event_position"
)
"""(child, parent, via receipt or NULL) for every link into the given positions; a parent
both read and declared is linked once, via its receipt."""
LINEAGE_CHILDREN = (
    f"SELECT s.event_position, w.position, min(s.via) FROM {_LINEAGE_LINK} "
    "WHERE s.event_position IN ({marks}) GROUP BY s.event_position, w.position "
    "ORDER BY s.event_position, w.position"
)
"""(parent, child, via receipt or NULL) for every link out of the given positions."""
LINEAGE_ANCESTORS = (
    "WITH RECURSIVE up (root, position) AS ("
    f"SELECT w.position, s.event_position FROM {_LINEAGE_LINK} WHERE w.position IN ({{marks}}) "
    f"UNION SELECT up.root, s.event_position FROM up JOIN {_LINEAGE_LINK} "
    "AND w.position = up.position) "
    "SELECT root, position FROM up ORDER BY root, position"
)
"""(position, ancestor) for every ancestor of each given position, nearest or not."""
LINEAGE_QUARANTINED_AMONG = (
    "SELECT DISTINCT event_position FROM fl_quarantined WHERE event_position IN ({marks})"
)
LINEAGE_ENTRIES_AMONG = f"SELECT {ENTRY_COLUMNS} FROM fl_memory m WHERE m.id IN ({{marks}})"


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
CONFLICT_ANY = "SELECT 1 FROM fl_conflict_policy LIMIT 1"
CONFLICT_POLICY_PUT = (
    "INSERT OR REPLACE INTO fl_conflict_policy (scope, tag, on_conflict, position, owners) "
    "VALUES (?, ?, ?, ?, ?)"
)
CONFLICT_POLICIES_FOR = "SELECT scope, on_conflict, owners FROM fl_conflict_policy WHERE tag = ?"
CONFLICT_POLICIES = (
    "SELECT scope, tag, on_conflict, position, owners FROM fl_conflict_policy ORDER BY tag, scope"
)
CONFLICT_CURRENT = (
    "SELECT c.position, f.source_adapter FROM fl_fact_current c JOIN fl_fact f "
    "ON f.position = c.position WHERE c.scope = ? AND c.run_key = ? AND c.tag = ? AND c.key = ?"
)
HELD_INSERT = (
    "INSERT INTO fl_fact_held (position, scope, run_key, tag, key, value, producer_task_id, "
    "ts_ns, content_hash, run_id, source_adapter, status, contested) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
HELD_COLUMNS = (
    "position, scope, run_key, tag, key, value, producer_task_id, ts_ns, content_hash, run_id, "
    "source_adapter, status, contested, decided_by"
)
HELD_GET = f"SELECT {HELD_COLUMNS} FROM fl_fact_held WHERE position = ?"
HELD_DECIDE = "UPDATE fl_fact_held SET status = ?, decided_by = ? WHERE position = ?"
HELD_AMONG = (
    f"SELECT {HELD_COLUMNS} FROM fl_fact_held WHERE position IN ({{marks}}) ORDER BY position"
)
HELD_MATCHING = f"SELECT {HELD_COLUMNS} FROM fl_fact_held f WHERE 1{{filters}} ORDER BY position"
"""Held versions matching `FACT_FILTER_*` fragments."""


# -- connections ----------------------------------------------------------------------------

SCRATCH_CACHE_KIB = 65536
"""Page cache of a file-backed scratch database: bounded, so memory stays flat."""


class Database:
    """A connection the read model's statements run on; SQLite errors become ours."""

    def __init__(self, conn: sqlite3.Connection, where: str, *, owned: bool) -> None:
        self._conn = conn
        self._where = where
        self._owned = owned

    def execute(self, statement: str, params: Sequence[object] = ()) -> list[Row]:
        """Run one statement and return its rows."""
        try:
            return self._conn.execute(statement, params).fetchall()
        except sqlite3.Error as exc:
            raise translate(exc, "query the read model in", self._where) from None

    def query(self, statement: str, params: Sequence[object] = ()) -> list[Row]:
        """Run one statement that only reads, inside the open transaction, and return its
        rows. One that writes, whatever it starts with (it changed a row, or it returns no
        result columns, as DDL does), is undone and refused (`ReadOnlyStoreError`): the
        projectors alone write the read model. `PRAGMA query_only` would do it too, but each
        change of that flag expires every statement the connection has prepared."""
        changes = self._conn.total_changes
        try:
            self._conn.execute(QUERY_BEGIN)
            try:
                cursor = self._conn.execute(statement, params)
                rows = cursor.fetchall()
            except BaseException:
                self._conn.execute(QUERY_UNDO)
                raise
            wrote = cursor.description is None or self._conn.total_changes != changes
            if wrote:
                self._conn.execute(QUERY_UNDO)
            self._conn.execute(QUERY_END)
        except sqlite3.Error as exc:
            raise translate(exc, "query the read model in", self._where) from None
        if wrote:
            raise ReadOnlyStoreError(
                f"a query of the read model in {self._where} may not write it (only the "
                "projectors do, as they fold the log); its changes were rolled back"
            )
        return rows

    def executemany(self, statement: str, rows: Iterable[Sequence[object]]) -> None:
        """Run one statement for many rows."""
        try:
            self._conn.executemany(statement, rows)
        except sqlite3.Error as exc:
            raise translate(exc, "write the read model in", self._where) from None

    def close(self) -> None:
        """Close the connection if this object opened it; a log's connection stays open."""
        if self._owned:
            self._conn.close()


def in_log_file(event_log: EventLog) -> Database:
    """The read model kept in the log's own SQLite file, on the log's connection: use it only
    inside the log's `transaction()` or `snapshot()`, so its rows commit with each append."""
    if not isinstance(event_log, SQLiteEventLog):
        raise StorageError(
            f"a read model in the log's own file needs a SQLite log, not {type(event_log).__name__}"
        )
    where = "in-memory database" if event_log.path == ":memory:" else f"database {event_log.path}"
    return Database(event_log.connection, where, owned=False)


def open_read_only(path: Path) -> Database:
    """Another SQLite file (a legacy store), opened read-only."""
    where = f"database {path}"
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.Error as exc:
        raise translate(exc, "read", where) from None
    return Database(conn, where, owned=True)


CACHE_BUSY_TIMEOUT_S = 30.0
"""How long a process waits for another one folding into the same cache file."""


class CacheDatabase(Database):
    """A host's read model of a log held elsewhere: a SQLite file of its own (or memory).

    Several processes may share the file. Writes take SQLite's write lock (`BEGIN
    IMMEDIATE`, waiting up to `CACHE_BUSY_TIMEOUT_S`), so folds are serialized; a read sees
    one committed state. `lock` serializes the threads sharing this handle. The file is not
    synced on every commit (`synchronous=NORMAL`): losing the last commits to a power cut
    leaves the cache behind, which catch-up repairs.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        where = "in-memory cache" if self.path == ":memory:" else f"cache {self.path}"
        try:
            if self.path != ":memory:":
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StorageError(f"cannot open {where}: {exc.strerror or exc}") from None
        try:
            conn = sqlite3.connect(
                self.path,
                timeout=CACHE_BUSY_TIMEOUT_S,
                isolation_level=None,
                check_same_thread=False,
            )
        except sqlite3.Error as exc:
            raise translate(exc, "open", where) from None
        super().__init__(conn, where, owned=True)
        self.lock = threading.RLock()
        try:
            conn.execute("PRAGMA synchronous=NORMAL")
        except sqlite3.Error as exc:
            conn.close()
            raise translate(exc, "configure", where) from None

    def use_wal(self) -> None:
        """Let readers and a writer work at once (WAL). Call it once the file is known to be
        a cache: it changes the file, and another file must be left as it was."""
        with self.lock:
            self._run("PRAGMA journal_mode=WAL", "configure")

    @property
    def in_transaction(self) -> bool:
        """Whether a read or write transaction is open on this handle."""
        return self._conn.in_transaction

    @contextmanager
    def write(self) -> Iterator[CacheDatabase]:
        """One write transaction, holding the cache's write lock: it commits on a clean exit
        and rolls back on any exception."""
        with self.lock:
            self._run("BEGIN IMMEDIATE", "lock")
            try:
                yield self
            except BaseException:
                self._conn.rollback()
                raise
            self._run("COMMIT", "commit to")

    @contextmanager
    def read(self) -> Iterator[CacheDatabase]:
        """One read transaction: every query inside sees the same committed state (the
        enclosing transaction's, when one is already open on this handle)."""
        with self.lock:
            if self._conn.in_transaction:
                yield self
                return
            self._run("BEGIN", "read")
            try:
                yield self
            finally:
                if self._conn.in_transaction:
                    self._conn.rollback()

    def _run(self, statement: str, action: str) -> None:
        try:
            self._conn.execute(statement)
        except sqlite3.Error as exc:
            raise translate(exc, action, self._where) from None

    def close(self) -> None:
        """Close the connection."""
        with self.lock:
            super().close()


class ScratchDatabase(Database):
    """A private database to fold a read model into, outside the log's file: in memory (time
    travel, history) or a temporary file beside the log (a rebuild's shadow). Never durable,
    and gone once closed."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        where = f"scratch database {path}" if path else "in-memory scratch database"
        try:
            conn = sqlite3.connect(
                str(path) if path else ":memory:", isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as exc:
            self._discard()
            raise translate(exc, "create", where) from None
        super().__init__(conn, where, owned=True)
        try:
            conn.execute("PRAGMA journal_mode=OFF")
            conn.execute("PRAGMA synchronous=OFF")
            if path:
                conn.execute(f"PRAGMA cache_size=-{SCRATCH_CACHE_KIB}")
        except sqlite3.Error as exc:
            self.close()
            raise translate(exc, "configure", where) from None
        self._sealed = False

    @classmethod
    def beside(cls, database: Path) -> ScratchDatabase:
        """A scratch database in a hidden temporary file next to `database` (same disk)."""
        try:
            handle, name = tempfile.mkstemp(
                prefix=f".{database.name}.rebuild-", suffix=".tmp", dir=database.parent
            )
        except OSError as exc:
            raise StorageError(f"cannot create a scratch file beside {database}: {exc}") from None
        os.close(handle)
        return cls(Path(name))

    def execute(self, statement: str, params: Sequence[object] = ()) -> list[Row]:
        """Run one statement; writes are refused once the database is sealed."""
        if self._sealed and not statement.lstrip().upper().startswith(("SELECT", "WITH")):
            raise ReadOnlyStoreError("this view is read-only: it shows a past state of the log")
        return super().execute(statement, params)

    def executemany(self, statement: str, rows: Iterable[Sequence[object]]) -> None:
        """Run one statement for many rows; refused once the database is sealed."""
        if self._sealed:
            raise ReadOnlyStoreError("this view is read-only: it shows a past state of the log")
        super().executemany(statement, rows)

    @contextmanager
    def bulk(self) -> Iterator[ScratchDatabase]:
        """One transaction around many writes (much faster than one per statement)."""
        self.execute("BEGIN")
        try:
            yield self
        except BaseException:
            self._conn.rollback()
            raise
        self.execute("COMMIT")

    def seal(self) -> None:
        """Refuse every write from now on."""
        self._sealed = True

    @contextmanager
    def snapshot(self) -> Iterator[ScratchDatabase]:
        """Reads, in the shape a store's snapshot has."""
        yield self

    def close(self) -> None:
        """Free the database, and delete its file if it has one."""
        super().close()
        self._discard()

    def _discard(self) -> None:
        if self.path is not None:
            self.path.unlink(missing_ok=True)

    def __enter__(self) -> ScratchDatabase:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
