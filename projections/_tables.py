"""Reading projector tables in primary-key order, a chunk at a time, to compare and digest them.

A table's primary key orders its rows canonically: equal tables yield equal rows in the same
order, whatever order they were written in. Rows are fetched by keyset pagination on that key,
so memory stays constant however large the table grows.
"""

from __future__ import annotations

from collections.abc import Iterator

import blake3
import msgspec

from eventlog import InvalidInputError
from projections import _sql as sql
from projections._sql import Queryable, Row

_ENCODER = msgspec.msgpack.Encoder()


def table_exists(db: Queryable, table: str, *, schema: str = "main") -> bool:
    """Whether `schema` holds a table (or view) named `table`."""
    return sql.TABLE_INFO.exists(db, (table, schema))


def table_chunks(db: Queryable, table: str, *, schema: str = "main") -> Iterator[list[Row]]:
    """Every row of `table` (a projector's own table name) in primary-key order, in chunks."""
    info = sql.TABLE_INFO.rows(db, (table, schema))
    ranked = sorted(
        (column.pk, index, column.name) for index, column in enumerate(info) if column.pk
    )
    if not ranked:
        raise InvalidInputError(f"table {schema}.{table} is missing or has no primary key")
    key = ", ".join(f'"{name}"' for _, _, name in ranked)
    positions = [index for _, index, _ in ranked]
    first = sql.TABLE_CHUNK_FIRST.format(schema=schema, table=table, key=key)
    after = sql.TABLE_CHUNK_AFTER.format(
        schema=schema, table=table, key=key, marks=", ".join("?" * len(positions))
    )
    size = sql.BATCH
    rows = db.execute(first, (size,))
    while rows:
        yield rows
        if len(rows) < size:
            return
        last = rows[-1]
        rows = db.execute(after, (*(last[i] for i in positions), size))


def table_rows(db: Queryable, table: str, *, schema: str = "main") -> Iterator[Row]:
    """Every row of `table`, in primary-key order."""
    for chunk in table_chunks(db, table, schema=schema):
        yield from chunk


def table_digest(db: Queryable, table: str, *, schema: str = "main") -> str:
    """BLAKE3 over the msgpack encodings of `table`'s rows in primary-key order, concatenated.

    Equal tables have equal digests. Each chunk is encoded as one msgpack array whose header is
    skipped: what is left is, byte for byte, its rows' encodings one after another.
    """
    hasher = blake3.blake3()
    for chunk in table_chunks(db, table, schema=schema):
        encoded = _ENCODER.encode(chunk)
        hasher.update(memoryview(encoded)[_array_header_size(len(chunk)) :])
    return hasher.hexdigest()


def _array_header_size(length: int) -> int:
    """Bytes of the msgpack header of an array of `length` items (fixarray, array 16, 32)."""
    if length < 16:
        return 1
    return 3 if length < 2**16 else 5
