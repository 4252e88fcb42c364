"""Queries over the read model, built from constant fragments with bound values only."""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any, NamedTuple, Protocol

import msgspec

from eventlog import LegacyClaims
from eventlog.checks import MAX_POSITION
from projections import sql
from projections.entries import Fact, MemoryEntry

Row = tuple[Any, ...]
Rank = tuple[int, float, int]
"""(tags shared with the query, importance, id): higher ranks first."""

FIRST_CHUNK = 32
"""Rows a ranked read takes from a tag's list at first (at least the limit); then it doubles."""
ID_BATCH = 500
"""Entries read by id per statement, well under SQLite's limit on bound values."""
SIZE_COUNT_CAP = 4096
"""Tag lists are counted up to this many entries, to choose which to read next."""
FULL_COUNT_AFTER = 256
"""Rows a search reads before it counts lists tied at that cap in full: cheap queries stop
first, and expensive ones learn which long list is the shortest."""
_TOP = (math.inf, 0)
_CLAIMS = msgspec.json.Decoder(LegacyClaims)


class Readable(Protocol):
    """Something read-model queries can run against."""

    def execute(self, statement: str, params: Sequence[object] = ()) -> list[Row]: ...


class Reader(Protocol):
    """Gives consistent snapshots of the read model."""

    def snapshot(self) -> AbstractContextManager[Readable]: ...


class Candidate(NamedTuple):
    """An entry ranked for the prompt path, with whether it is quarantined, and its rank."""

    entry: MemoryEntry
    quarantined: bool
    rank: Rank


def _marks(values: Sequence[object]) -> str:
    return ", ".join("?" * len(values))


def entry_from_row(row: Row) -> MemoryEntry:
    """Build an entry from the columns `sql.ENTRY_COLUMNS` names."""
    return MemoryEntry(
        id=row[0],
        type=row[1],
        content=row[2],
        tags=row[3].split(",") if row[3] else [],
        importance=row[4],
        task_id=row[5],
        created_at=row[6],
        source_agent=row[7],
        source_model=row[8],
        source_adapter=row[9],
        position=row[0],
        content_hash=row[10],
        claims=None if row[11] is None else _CLAIMS.decode(row[11]),
        unsigned_import=bool(row[12]),
    )


def fact_from_row(row: Row) -> Fact:
    """Build a fact from the columns `sql.FACT_COLUMNS` names."""
    return Fact(*row[:10])


def entries(
    db: Readable,
    *,
    type: str | None,
    tags: Sequence[str],
    adapters: Sequence[str] | None,
    limit: int,
    before: int | None = None,
) -> list[MemoryEntry]:
    """Visible entries, newest first, of `type`, with any of `tags`, from `adapters` (and
    older than the entry `before`, to read on from where an earlier call stopped)."""
    filters = ""
    params: list[object] = []
    if before is not None:
        filters += sql.FILTER_BEFORE
        params.append(before)
    if type is not None:
        filters += sql.FILTER_TYPE
        params.append(type)
    if tags:
        filters += sql.FILTER_TAGS.format(marks=_marks(tags))
        params.extend(tags)
    if adapters is not None:
        filters += sql.FILTER_ADAPTERS.format(marks=_marks(adapters))
        params.extend(adapters)
    statement = sql.ENTRIES.format(filters=filters)
    return [entry_from_row(row) for row in db.execute(statement, [*params, limit])]


def relevant(
    db: Readable,
    *,
    tags: Sequence[str],
    adapters: Sequence[str] | None,
    limit: int,
) -> list[MemoryEntry]:
    """Visible entries ranked by shared tags, importance, then recency (newest with no tags)."""
    filters = sql.FILTER_VISIBLE
    params: list[object] = []
    if adapters is not None:
        filters += sql.FILTER_ADAPTERS.format(marks=_marks(adapters))
        params.extend(adapters)
    ranked = _ranked(db, tags, filters, params, limit, _everything)[:limit]
    found = _entries_by_id(db, [row[0] for _, row in ranked])
    return [found[row[0]] for _, row in ranked]


def prompt_candidates(
    db: Readable,
    *,
    tags: Sequence[str],
    trusts: Callable[[str | None, bool], bool],
    limit: int,
    refused_limit: int,
) -> tuple[list[Candidate], list[Candidate]]:
    """The top `limit` trusted entries, and the best `refused_limit` refused ones (untrusted or
    quarantined) among those ranked above the last trusted one (among all, when fewer than
    `limit` are trusted). One ranked pass serves both.

    `trusts(adapter, unsigned_import)` says whether the policy trusts what was written under
    an adapter (None: none), by an import no operator signed or not; it is asked once per
    pair.
    """
    verdicts: dict[tuple[str | None, bool], bool] = {}

    def admitted(row: Row) -> bool:
        if row[3]:
            return False
        writer = (row[4], bool(row[5]))
        found = verdicts.get(writer)
        if found is None:
            found = verdicts[writer] = trusts(*writer)
        return found

    trusted: list[tuple[Rank, Row]] = []
    refused: list[tuple[Rank, Row]] = []
    for item in _ranked(db, tags, sql.FILTER_NOT_SUPERSEDED, [], limit, admitted):
        (trusted if admitted(item[1]) else refused).append(item)
    refused = refused[:refused_limit]
    found = _entries_by_id(db, [row[0] for _, row in trusted + refused])
    return (
        [Candidate(found[row[0]], False, rank) for rank, row in trusted],
        [
            Candidate(found[row[0]], bool(row[3] & sql.HIDDEN_QUARANTINED), rank)
            for rank, row in refused
        ],
    )


def over_positions(db: Readable, statement: str, positions: Sequence[int]) -> list[Row]:
    """Rows of `statement` (with an `IN ({marks})` list) over `positions`, `ID_BATCH` bound
    values per execution, in execution order."""
    rows: list[Row] = []
    for start in range(0, len(positions), ID_BATCH):
        batch = positions[start : start + ID_BATCH]
        rows += db.execute(statement.format(marks=_marks(batch)), batch)
    return rows


def _entries_by_id(db: Readable, ids: Sequence[int]) -> dict[int, MemoryEntry]:
    return {row[0]: entry_from_row(row) for row in over_positions(db, sql.ENTRIES_BY_ID, ids)}


def _everything(row: Row) -> bool:
    return True


def _ranked(
    db: Readable,
    tags: Sequence[str],
    filters: str,
    params: list[object],
    limit: int,
    admitted: Callable[[Row], bool],
) -> list[tuple[Rank, Row]]:
    """Ranked rows (`sql.RANK_COLUMNS`) the filters pass, best first: the `limit` best admitted
    ones and every row ranked above the last of them (all, when fewer are admitted)."""
    if tags:
        return _search(db, tags, filters, params, limit, admitted)
    return _newest(db, filters, params, limit, admitted)


def _newest(
    db: Readable, filters: str, params: list[object], limit: int, admitted: Callable[[Row], bool]
) -> list[tuple[Rank, Row]]:
    """With no tags, recency alone ranks: read newest first until `limit` rows are admitted."""
    ranked: list[tuple[Rank, Row]] = []
    found = 0
    chunk = limit
    rows = db.execute(sql.NEWEST_FIRST.format(filters=filters), [*params, chunk])
    while True:
        for row in rows:
            ranked.append(((0, 0.0, row[0]), row))
            found += admitted(row)
            if found == limit:
                return ranked
        if len(rows) < chunk:
            return ranked
        chunk = min(2 * chunk, MAX_POSITION)
        statement = sql.NEWEST_AFTER.format(filters=filters)
        rows = db.execute(statement, [rows[-1][0], *params, chunk])


class _TagList:
    """One query tag's entries, read in rank order (importance, then id, both descending)."""

    __slots__ = ("cap", "chunk", "exhausted", "reached", "size", "tag", "taken")

    def __init__(self, tag: str, chunk: int) -> None:
        self.tag = tag
        self.reached: tuple[float, int] = _TOP
        """The (importance, id) of the last entry read: every entry above it has been read."""
        self.chunk = chunk
        self.size: int | None = None
        self.cap = 0
        self.taken = 0
        self.exhausted = False

    def count(self, db: Readable, cap: int) -> int:
        """How long the list is, counted up to `cap` entries."""
        if self.size is None or (self.size == self.cap and cap > self.cap):
            self.size = db.execute(sql.TAG_COUNT_UPTO, (self.tag, cap))[0][0]
            self.cap = cap
        return self.size

    def read(self, db: Readable, filters: str, params: list[object]) -> list[Row]:
        """The next chunk of entries the filters pass; chunks double as the read goes on."""
        if self.reached is _TOP:
            statement = sql.RANKED_FIRST.format(filters=filters)
            rows = db.execute(statement, [self.tag, *params, self.chunk])
        else:
            statement = sql.RANKED_AFTER.format(filters=filters)
            rows = db.execute(statement, [self.tag, *self.reached, *params, self.chunk])
        if len(rows) < self.chunk:
            self.exhausted = True
        else:
            self.reached = (rows[-1][6], rows[-1][0])
        self.taken += len(rows)
        self.chunk = min(2 * self.chunk, MAX_POSITION)
        return rows


def _search(
    db: Readable,
    tags: Sequence[str],
    filters: str,
    params: list[object],
    limit: int,
    admitted: Callable[[Row], bool],
) -> list[tuple[Rank, Row]]:
    """A threshold search over the query tags' lists, each read in rank order.

    A row not read yet is in none of the exhausted lists, so it shares at most j tags, j the
    number of lists left; and sharing all j, it sits below the point each of them has
    reached. So it ranks below (j, the lowest of those points), and once the `limit`-th best
    admitted row ranks at least that high, no unread row can displace it. Until then the
    shortest list left is read next: it runs out soonest, and holds the densest share of
    entries sharing several tags. The cost is the rows read, not the rows the tags cover.
    """
    wanted = frozenset(tags)
    lists = [_TagList(tag, max(FIRST_CHUNK, limit)) for tag in tags]
    seen: dict[int, tuple[Rank, Row]] = {}
    best: list[Rank] = []
    """The `limit` best admitted ranks, as a heap: best[0] is the worst of them."""
    while lists:
        if len(best) == limit:
            shared, importance, entry_id = best[0]
            if len(lists) < shared:
                break
            if len(lists) == shared and (importance, entry_id) >= min(t.reached for t in lists):
                break
        source = lists[0] if len(lists) == 1 else _shortest(db, lists)
        for row in source.read(db, filters, params):
            if row[0] in seen:
                continue
            rank = (len(wanted.intersection(row[1].split(","))), row[2], row[0])
            seen[row[0]] = (rank, row)
            if not admitted(row):
                continue
            if len(best) < limit:
                heapq.heappush(best, rank)
            elif rank > best[0]:
                heapq.heapreplace(best, rank)
        if source.exhausted:
            lists.remove(source)
    ranked = sorted(seen.values(), key=_rank_of, reverse=True)
    if len(best) == limit:
        return [item for item in ranked if item[0] >= best[0]]
    return ranked


def _shortest(db: Readable, lists: list[_TagList]) -> _TagList:
    """The list to read next: the shortest, then the least read. Lists are counted up to
    SIZE_COUNT_CAP entries; once a search proves long, lists tied there are counted in full,
    which costs far less than reading the longer of them by mistake."""
    shortest = min(lists, key=lambda t: (t.count(db, SIZE_COUNT_CAP), t.taken))
    if (
        shortest.size == SIZE_COUNT_CAP
        and sum(t.size == SIZE_COUNT_CAP for t in lists) > 1
        and sum(t.taken for t in lists) >= FULL_COUNT_AFTER
    ):
        shortest = min(lists, key=lambda t: (t.count(db, MAX_POSITION), t.taken))
    return shortest


def _rank_of(item: tuple[Rank, Row]) -> Rank:
    return item[0]


def current_facts(
    db: Readable, identity: tuple[str, str, str], adapters: Sequence[str] | None
) -> list[Fact]:
    """One fact per key under (scope, run_key, tag): the newest visible version, newest first.

    With an allow-list, the newest version written by an allowed adapter.
    """
    if adapters is None:
        return [fact_from_row(row) for row in db.execute(sql.FACTS_CURRENT, identity)]
    statement = sql.FACTS_CURRENT_ALLOWED.format(marks=_marks(adapters))
    return [fact_from_row(row) for row in db.execute(statement, [*identity, *adapters])]


def fact_history(db: Readable, identity: tuple[str, str, str, str]) -> list[Fact]:
    """Every version published under one identity, oldest first."""
    return [fact_from_row(row) for row in db.execute(sql.FACT_HISTORY, identity)]
