"""The read model's SQL: every statement the read side runs.

The read model is SQLite on every host, whatever holds the log. Every statement is a
constant here; values are always bound, and identifiers are projector table names, never
input. `projections.database` runs them on a connection.
"""

from __future__ import annotations

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
    f"UPDATE fl_memory SET hidden = hidden | {HIDDEN_SUPERSEDED} "
    "WHERE id IN (SELECT position FROM fl_fact "
    "WHERE scope = ? AND run_key = ? AND tag = ? AND key = ? AND position >= ? AND position < ?)"
)
FACT_NEWEST_VISIBLE = (
    "SELECT max(position) FROM fl_fact WHERE scope = ? AND run_key = ? AND tag = ? AND key = ? "
    "AND quarantined = 0"
)
FACT_MIRRORS_SUPERSEDE = (
    f"UPDATE fl_memory SET hidden = (hidden & ~{HIDDEN_SUPERSEDED}) "
    f"| (CASE WHEN id < ? THEN {HIDDEN_SUPERSEDED} ELSE 0 END) "
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
QUARANTINE_SET_MEMORY = (
    f"UPDATE fl_memory SET hidden = (hidden & ~{HIDDEN_QUARANTINED}) | ? WHERE id = ?"
)
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
FILTER_NOT_SUPERSEDED = f" AND m.hidden & {HIDDEN_SUPERSEDED} = 0"

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
