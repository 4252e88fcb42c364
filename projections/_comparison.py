"""A read model compared with the log refolded: the one comparison `rebuild` and `verify
--deep` both make.

`compare_tables` holds each table of a live read model to the same table of a refold (a
scratch database the log was folded into, up to the position the live side shows), by
digest (`projections._tables.table_digest`): equal tables have equal digests. `table_drift`
names the rows of a table that differ, walking both sides in primary-key order: a row
missing, unexpected or different, visibility flags included.

`read_model_drift` (`verify --deep`) folds the log into a temporary file outside the log's
directory, up to the position each projector's checkpoint names, compares every table and
names the rows of each that differs, so an entry hidden or shown against the log's remove
and quarantine events is found. It compares every projector or reports, as drift, each one it
could not: no checkpoint, or one at another version of its code than this one (an edit, or a
file not yet opened since an upgrade), so a checkpoint table edited to make the comparison
skip the tables never passes. `checkpoint_drift` is the cheap part: projector checkpoints
folded past the log's head, or at a chain value the log does not hold, show a log cut or
rewritten under its read model, and a projector's tables kept with no checkpoint show the
checkpoint table edited. The log's file is only read.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterable, Iterator
from itertools import zip_longest
from pathlib import Path
from typing import Any

import msgspec

from eventlog import EventLog, Head, LogSnapshot, RecordedEvent, SQLiteEventLog, chain_at
from eventlog.stored import genesis_of
from projections import _sql as sql
from projections._database import ScratchDatabase, in_log_file
from projections._drift import same_text
from projections._projector import Projector, checkpoint_rows, fold, tables_kept
from projections._reads import Queryable, Row
from projections._tables import table_digest, table_exists, table_rows
from projections._view import default_projectors

SHOWN_DRIFT = 20
"""Differences a drift report names one by one; the rest are counted."""
SHOWN_VALUE_CHARS = 64
"""Values at most this long are quoted in a drift report; longer ones are only named."""
CHECKPOINTS = "fl_projector_checkpoint"


class Drift(msgspec.Struct, frozen=True, kw_only=True):
    """One row of the read model in a log's file that differs from the log refolded."""

    table: str
    row: str
    """The row's primary key as `column=value` pairs ('' for the table as a whole)."""
    reason: str


class TableComparison(msgspec.Struct, frozen=True, kw_only=True):
    """One projector table: the live digest (None when the table is missing) and the
    rebuilt one (the log refolded)."""

    table: str
    live: str | None
    rebuilt: str
    matches: bool


class DriftReport(msgspec.Struct, frozen=True, kw_only=True):
    """How the read model kept in a log's file compares with the log refolded."""

    compared: list[str]
    """The tables compared row by row."""
    differences: int
    """Rows that differ, checkpoints the log does not bear out, and projectors that could not
    be compared (named in `drift` under `fl_projector_checkpoint`)."""
    drift: list[Drift]
    """The first `SHOWN_DRIFT` of them."""


def checkpoint_drift(event_log: SQLiteEventLog) -> list[Drift]:
    """Projector checkpoints in the log's file that the log does not bear out: folded past
    its head, or at a chain value it does not hold. Cheap: one row per projector."""
    with event_log.snapshot() as snap:
        return _checkpoint_drift(in_log_file(event_log), snap, event_log, deep=False)[0]


def table_digests(db: Queryable, tables: Iterable[str]) -> dict[str, str | None]:
    """Each table's digest in `db`, None for a table it lacks."""
    return {table: table_digest(db, table) if table_exists(db, table) else None for table in tables}


def compare_tables(
    live: dict[str, str | None], rebuilt: Queryable, tables: Iterable[str]
) -> list[TableComparison]:
    """Each of `tables` held to the log refolded into `rebuilt`, by the live side's digests
    (`table_digests`, taken in the read the refold was folded up to)."""
    comparisons = []
    for table in tables:
        digest = table_digest(rebuilt, table)
        comparisons.append(
            TableComparison(
                table=table, live=live[table], rebuilt=digest, matches=live[table] == digest
            )
        )
    return comparisons


REPORT_EVERY = 1 << 14
"""Events refolded between progress reports."""


def read_model_drift(
    event_log: SQLiteEventLog,
    *,
    progress: Callable[[int, int], object] | None = None,
    phase: Callable[[str], object] | None = None,
) -> DriftReport:
    """Compare every projector's tables in the log's file with the log refolded up to that
    projector's checkpoint, in one read of the file, naming the rows of each table that
    differs; a projector that cannot be compared is drift. The refold goes to a temporary
    file outside the log's directory; the log's file is only read. `phase('refolding')`
    and `phase('comparing')` are called as each begins, `progress(position, last)` while
    refolding."""
    live = in_log_file(event_log)
    with event_log.snapshot() as snap:
        drift, groups = _checkpoint_drift(live, snap, event_log, deep=True)
        differences = len(drift)
        compared: list[str] = []
        for at, projectors in groups.items():
            with ScratchDatabase.beside(Path(tempfile.gettempdir()) / "factledger") as fresh:
                if phase is not None:
                    phase("refolding")
                with fresh.bulk():
                    events = snap.read(until=at.position)
                    fold(fresh, projectors, _reported(events, at.position, progress))
                if phase is not None:
                    phase("comparing")
                tables = [t for p in projectors for t in p.tables]
                for table in compare_tables(table_digests(live, tables), fresh, tables):
                    compared.append(table.table)
                    if table.matches:
                        continue
                    for found in _table_drift(live, fresh, table.table):
                        differences += 1
                        if len(drift) < SHOWN_DRIFT:
                            drift.append(found)
    return DriftReport(compared=compared, differences=differences, drift=drift)


def _reported(
    events: Iterable[RecordedEvent], last: int, progress: Callable[[int, int], object] | None
) -> Iterator[RecordedEvent]:
    """`events`, calling `progress(position, last)` every `REPORT_EVERY` events and at the end."""
    position = 0
    for position, event in enumerate(events, start=1):
        if progress is not None and position % REPORT_EVERY == 0:
            progress(event.position, last)
        yield event
    if progress is not None and position:
        progress(last, last)


def _checkpoint_drift(
    live: Queryable, snap: LogSnapshot, event_log: EventLog, *, deep: bool
) -> tuple[list[Drift], dict[Head, list[Projector]]]:
    """Checkpoints the log does not bear out (and, when `deep`, projectors that cannot be
    compared), and the projectors that can be, grouped by the position their checkpoints
    name."""
    drift: list[Drift] = []
    groups: dict[Head, list[Projector]] = {}
    head = snap.head()
    folded = checkpoint_rows(live)
    for projector in default_projectors(event_log.log_id):
        where = f"name={projector.name!r}"
        if projector.name not in folded:
            kept = tables_kept(live, projector)
            if kept:
                reason = (
                    f"no checkpoint, though its tables are kept ({', '.join(kept)}): the "
                    "checkpoint table was edited, and how far they were folded is unknown"
                )
                drift.append(Drift(table=CHECKPOINTS, row=where, reason=reason))
            elif deep:
                reason = (
                    f"not compared: no read model of it is kept in this file (opening a store "
                    f"on the file folds {', '.join(projector.tables)})"
                )
                drift.append(Drift(table=CHECKPOINTS, row=where, reason=reason))
            continue
        checkpoint = folded[projector.name]
        position, version = checkpoint.position, checkpoint.version
        if not isinstance(position, int) or position < 0 or position > head.position:
            reason = (
                f"folded up to position {position}, past the log's head {head.position}: "
                "events the read model saw are gone from the log"
            )
            drift.append(Drift(table=CHECKPOINTS, row=where, reason=reason))
            continue
        held = genesis_of(event_log).hex() if position == 0 else chain_at(snap, position)
        chain_hash = checkpoint.chain_hash
        if held is None or not isinstance(chain_hash, str) or not same_text(chain_hash, held):
            reason = (
                f"folded up to position {position} at a chain value the log does not hold "
                "there: the log's history differs from what was folded"
            )
            drift.append(Drift(table=CHECKPOINTS, row=where, reason=reason))
            continue
        if version != projector.version:
            if deep:
                reason = (
                    f"not compared: {', '.join(projector.tables)} were folded by version "
                    f"{version!r} of its code, not {projector.version}; edited, unless the "
                    "file was not opened since an upgrade (opening a store refolds them)"
                )
                drift.append(Drift(table=CHECKPOINTS, row=where, reason=reason))
            continue
        groups.setdefault(Head(position=position, chain_hash=held), []).append(projector)
    return drift, groups


def _table_drift(live: Queryable, fresh: Queryable, table: str) -> Iterator[Drift]:
    """The rows where `live`'s `table` differs from `fresh`'s, in primary-key order."""
    info = sql.TABLE_INFO.rows(fresh, (table, "main"))
    columns = [column.name for column in info]
    keys = [index for _, index in sorted((c.pk, i) for i, c in enumerate(info) if c.pk)]
    if not table_exists(live, table):
        yield Drift(table=table, row="", reason="the table is missing")
        return
    if [column.name for column in sql.TABLE_INFO.rows(live, (table, "main"))] != columns:
        yield Drift(table=table, row="", reason="its columns are not the ones the code creates")
        return
    ours, theirs = table_rows(live, table), table_rows(fresh, table)
    here, there = next(ours, None), next(theirs, None)
    while here is not None or there is not None:
        here_key = None if here is None else _order(here, keys)
        there_key = None if there is None else _order(there, keys)
        if there_key is None or (here_key is not None and here_key < there_key):
            assert here is not None
            yield _drift(table, columns, keys, here, "the log refolded holds no such row")
            here = next(ours, None)
        elif here_key is None or there_key < here_key:
            assert there is not None
            yield _drift(table, columns, keys, there, "the row is missing: the log holds it")
            there = next(theirs, None)
        else:
            assert here is not None and there is not None
            if not _same_row(here, there):
                yield _drift(table, columns, keys, here, _differences(columns, here, there))
            here, there = next(ours, None), next(theirs, None)


def _drift(table: str, columns: list[str], keys: list[int], row: Row, reason: str) -> Drift:
    where = ", ".join(f"{columns[i]}={row[i]!r}" for i in keys)
    return Drift(table=table, row=where, reason=reason)


def _differences(columns: list[str], here: Row, there: Row) -> str:
    parts = []
    for name, mine, theirs in zip_longest(columns, here, there):
        if _same_value(mine, theirs):
            continue
        if _short(mine) and _short(theirs):
            parts.append(f"{name} is {mine!r} here, {theirs!r} in the log refolded")
        else:
            parts.append(f"{name} differs from the log refolded")
    return "; ".join(parts)


def _short(value: object) -> bool:
    return len(repr(value)) <= SHOWN_VALUE_CHARS


def _same_row(here: Row, there: Row) -> bool:
    return len(here) == len(there) and all(map(_same_value, here, there))


def _same_value(first: object, second: object) -> bool:
    """Equal as SQLite stores them: the same storage class and value (1 is not '1')."""
    return _order_value(first) == _order_value(second)


def _order(row: Row, keys: list[int]) -> tuple[tuple[int, Any], ...]:
    return tuple(_order_value(row[i]) for i in keys)


def _order_value(value: object) -> tuple[int, Any]:
    """SQLite's order across storage classes: NULL, numbers, text, then blobs (text in
    code point order, as UTF-8 under the BINARY collation)."""
    if value is None:
        return (0, 0)
    if isinstance(value, (int, float)):
        return (1, value)
    if isinstance(value, str):
        return (2, value)
    return (3, bytes(value) if isinstance(value, (bytes, bytearray, memoryview)) else repr(value))
