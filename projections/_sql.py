"""The read model's SQL: how a query returns its rows, and the statements every projector
shares (checkpoints, a cache's metadata, whole tables, the legacy import).

The read model is SQLite on every host, whatever holds the log. Its statements are constants
here and in `sql_knowledge`, `sql_reads` and `sql_audit`; values are always bound, and
identifiers are projector table names, never input. `projections._database` runs them on a
connection. A statement that returns rows is a `Query`, declared with the Struct each row is
read as: its fields are the statement's columns, in order and by name
(`tests/projections/test_sql.py` holds each to the other), so no other module reads a row by
position.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from types import GenericAlias
from typing import Any, Generic, Protocol, TypeVar, cast

import msgspec

from eventlog import Head, LegacyClaims, StorageError

EDITED = (
    "it was edited (`factledger verify --deep` names the row; `factledger rebuild --swap` "
    "refolds it from the log)"
)
_CLAIMS = msgspec.json.Decoder(LegacyClaims)
Row = tuple[Any, ...]
"""A row as SQLite returns it (`Queryable.execute`)."""
ID_BATCH = 500
"""Positions bound per statement by `Query.among`, well under SQLite's limit."""
BATCH = 4096
"""How much the read side handles at a time: events folded per projector call, re-linked per
chunk and per cache transaction while a cache catches up, and rows read per statement when a
whole table is read. Large enough that inserts go in bulk and statements are few, small
enough that memory stays flat however long the log."""


class Queryable(Protocol):
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

    def rows(self, db: Queryable, params: Sequence[object] = ()) -> list[R]:
        """Run the query on `db` and return its rows."""
        found = db.execute(self.text, params)
        try:
            return cast(list[R], msgspec.convert(found, self._many))
        except msgspec.ValidationError:
            raise StorageError(self._malformed(found)) from None

    def first(self, db: Queryable, params: Sequence[object] = ()) -> R | None:
        """The query's first row on `db`, or None when it returns none."""
        found = self.rows(db, params)
        return found[0] if found else None

    def one(self, db: Queryable, params: Sequence[object] = ()) -> R:
        """The one row the query returns on `db` (an aggregate, a pragma)."""
        found = self.first(db, params)
        if found is None:
            raise StorageError(f"the read model returned no {self.row.__name__} row")
        return found

    def exists(self, db: Queryable, params: Sequence[object] = ()) -> bool:
        """Whether the query returns any row on `db`."""
        return bool(db.execute(self.text, params))

    def among(self, db: Queryable, positions: Sequence[int]) -> list[R]:
        """Rows over `positions`, bound into the query's `IN ({marks})` list `ID_BATCH` at a
        time, in execution order."""
        rows: list[R] = []
        for start in range(0, len(positions), ID_BATCH):
            batch = positions[start : start + ID_BATCH]
            rows += self.format(marks=", ".join("?" * len(batch))).rows(db, batch)
        return rows

    def _malformed(self, found: list[Row]) -> str:
        """Which column does not hold its field's type, and what to do (never the value)."""
        fields = msgspec.structs.fields(self.row)
        wrong = next(
            (
                f"a row whose {field.name} is {type(value).__name__}"
                for values in found
                for field, value in zip(fields, values, strict=False)
                if not _holds(field.type, value)
            ),
            f"rows a {self.row.__name__} cannot hold",
        )
        row = self.row.__name__
        return f"the read model holds {wrong} ({row}), not what it writes there: {EDITED}"


def legacy_claims(text: str | None) -> LegacyClaims | None:
    """An import's claims as a row keeps them (JSON), or None for a row with none."""
    if text is None:
        return None
    try:
        return _CLAIMS.decode(text)
    except msgspec.DecodeError:
        problem = f"the read model holds claims that are not a legacy row's: {EDITED}"
        raise StorageError(problem) from None


def _holds(kind: Any, value: object) -> bool:
    try:
        msgspec.convert(value, kind)
    except msgspec.ValidationError:
        return False
    return True


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
    something else is drift to report (`projections._comparison`), or a projector to refold,
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
TABLE_KEPT = Query(
    "SELECT 1 AS present FROM sqlite_master WHERE type = 'table' AND name = ?", Present
)
TABLE_CLEAR = "DELETE FROM {table}"
"""Empties a table before it is dropped: one DELETE with no WHERE (SQLite's truncate
optimization) needs no statement journal, where a DROP inside a longer transaction keeps in
one (in memory: `temp_store=MEMORY`) the original of every page `secure_delete` zeroes."""
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
