"""Reading projector tables whole, in a canonical order, to compare and digest them."""

from __future__ import annotations

from collections.abc import Iterator

import blake3
import msgspec

from projections import sql
from projections.reads import Readable, Row

_ENCODER = msgspec.msgpack.Encoder()


def table_rows(db: Readable, table: str) -> Iterator[Row]:
    """Every row of `table` (a projector's own table name), ordered by all its columns."""
    columns = [row[0] for row in db.execute(sql.TABLE_COLUMNS, (table,))]
    order = ", ".join(f'"{column}"' for column in columns)
    yield from db.execute(sql.TABLE_ROWS.format(table=table, columns=order))


def table_digest(db: Readable, table: str) -> str:
    """BLAKE3 over the canonical rows of `table`; equal tables have equal digests."""
    hasher = blake3.blake3()
    for row in table_rows(db, table):
        hasher.update(_ENCODER.encode(row))
    return hasher.hexdigest()
