"""The knowledge projector's SQL (`projections._knowledge`, `projections._conflicts`,
`projections._operators`): its tables, what it folds into them, and the queries folding asks."""

from __future__ import annotations

from projections._sql import Columns, Count, Position, Present, Query

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
    "fl_unreadable",
    "fl_erasure",
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
    # `identity` is what the row claims to be (`projections._legacy.legacy_identity`), never
    # a hash of its text.
    # Rows this version could not decode: they change nothing, and history names them.
    """CREATE TABLE fl_unreadable (
        position INTEGER PRIMARY KEY,
        claimed_kind TEXT,
        source_adapter TEXT,
        producer_task_id TEXT NOT NULL,
        reason TEXT NOT NULL
    )""",
    """CREATE TABLE fl_import (
        identity TEXT NOT NULL,
        signed INTEGER NOT NULL,
        position INTEGER NOT NULL,
        PRIMARY KEY (identity, signed)
    ) WITHOUT ROWID""",
    # Positions whose text an authorized erasure removed, and the erasure's position. An
    # erased version is also covered in `fl_quarantined` by its erasure, which nothing can
    # release, so every read that skips a quarantined version skips it.
    """CREATE TABLE fl_erasure (
        position INTEGER PRIMARY KEY,
        erasure_position INTEGER NOT NULL
    )""",
    "CREATE INDEX fl_erasure_by ON fl_erasure (erasure_position)",
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
ERASURE_INSERT = "INSERT OR IGNORE INTO fl_erasure (position, erasure_position) VALUES (?, ?)"
ERASURE_BLANK_MEMORY = "UPDATE fl_memory SET content = '' WHERE id = ?"
ERASURE_BLANK_FACT = "UPDATE fl_fact SET value = '' WHERE position = ?"
ERASURE_BLANK_HELD = (
    "UPDATE fl_fact_held SET value = '', "
    "status = CASE WHEN status = 'pending' THEN 'erased' ELSE status END WHERE position = ?"
)
ERASURE_PRESENT = Query(
    "SELECT id AS position FROM fl_memory WHERE id = ? "
    "UNION SELECT position FROM fl_fact WHERE position = ?",
    Position,
)


class Erased(Columns, frozen=True):
    """A position whose text an erasure removed, and the erasure's position."""

    position: int
    erasure_position: int


ERASED_AMONG = Query(
    "SELECT position, erasure_position FROM fl_erasure WHERE position IN ({marks})", Erased
)
ERASED_ALL = Query("SELECT position, erasure_position FROM fl_erasure ORDER BY position", Erased)
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


UNREADABLE_INSERT = (
    "INSERT INTO fl_unreadable (position, claimed_kind, source_adapter, producer_task_id, "
    "reason) VALUES (?, ?, ?, ?, ?)"
)


class UnreadableRow(Columns, frozen=True):
    """A row this version could not decode, and the writer its body names."""

    position: int
    claimed_kind: str | None
    source_adapter: str | None
    producer_task_id: str
    reason: str


UNREADABLE_ALL = Query(
    "SELECT position, claimed_kind, source_adapter, producer_task_id, reason "
    "FROM fl_unreadable ORDER BY position",
    UnreadableRow,
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
IMPORT_INSERT = "INSERT OR IGNORE INTO fl_import (identity, signed, position) VALUES (?, ?, ?)"


class Imported(Columns, frozen=True):
    """A legacy row imported with effect."""

    identity: str
    """`projections._legacy.legacy_identity` of the row."""


IMPORT_ALL = Query("SELECT identity FROM fl_import WHERE signed >= ?", Imported)


QUARANTINE_MATCH_POSITIONS = (" AND id IN ({marks})", " AND position IN ({marks})")
QUARANTINE_MATCH_PRODUCER = (" AND producer_task_id = ?", " AND producer_task_id = ?")
QUARANTINE_MATCH_ADAPTER = (" AND source_adapter = ?", " AND source_adapter = ?")
"""(memory entry condition, fact version condition) pairs for `QUARANTINE_CANDIDATES`."""


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
