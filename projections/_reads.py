"""Queries over the read model, built from constant fragments with bound values only."""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import NamedTuple, Protocol

from eventlog.checks import MAX_POSITION
from projections import _sql as sql
from projections import _sql_knowledge as sql_knowledge
from projections import _sql_reads as sql_reads
from projections._entries import Fact, MemoryEntry
from projections._sql import Queryable as Queryable
from projections._sql import Row as Row

Rank = tuple[int, float, int]
"""(tags shared with the query, importance, id): higher ranks first."""
RankedRow = tuple[Rank, sql_reads.Ranked]
"""A ranked row and its rank."""

FIRST_CHUNK = 32
"""Rows a ranked read takes from a tag's list at first (at least the limit); then it doubles."""
SIZE_COUNT_CAP = 512
"""Tag lists are counted up to at least this many entries, to choose which to read next: a
search that steps over rows it need not read reads some 50 rows for a prompt, and counting
two lists to 4,096 cost it as much again (0.7 ms), for the same reads."""
COUNT_AHEAD = 8
"""Lists are counted up to this many times the rows the search has read (the cap doubling as
it reads), never in full: a full count of a common tag grows with the log (3.9 ms a prompt at
550k events), while counting an entry costs about a sixtieth of reading one."""
_TOP = (math.inf, 0)
_BOTTOM = (-math.inf, 0)


class SnapshotSource(Protocol):
    """Gives consistent snapshots of the read model."""

    def snapshot(self) -> AbstractContextManager[Queryable]: ...


class Candidate(NamedTuple):
    """An entry ranked for the prompt path, with whether it is quarantined, and its rank."""

    entry: MemoryEntry
    quarantined: bool
    rank: Rank


def _marks(values: Sequence[object]) -> str:
    return ", ".join("?" * len(values))


def entry_from_row(row: sql_reads.Entry) -> MemoryEntry:
    """The entry a row of `fl_memory` shows."""
    return MemoryEntry(
        id=row.id,
        type=row.type,
        content=row.content,
        tags=row.tags.split(",") if row.tags else [],
        importance=row.importance,
        task_id=row.task_id,
        created_at=row.created_at,
        source_agent=row.source_agent,
        source_model=row.source_model,
        source_adapter=row.source_adapter,
        position=row.id,
        content_hash=row.content_hash,
        claims=row.legacy_claims(),
        unsigned_import=bool(row.unsigned_import),
    )


def fact_from_row(row: sql_reads.FactVersion) -> Fact:
    """The fact a row of `fl_fact` shows."""
    return Fact(
        tag=row.tag,
        key=row.key,
        value=row.value,
        scope=row.scope,
        producer_task_id=row.producer_task_id,
        ts_ns=row.ts_ns,
        content_hash=row.content_hash,
        position=row.position,
        run_id=row.run_id,
        source_adapter=row.source_adapter,
    )


def entries(
    db: Queryable,
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
        filters += sql_reads.FILTER_BEFORE
        params.append(before)
    if type is not None:
        filters += sql_reads.FILTER_TYPE
        params.append(type)
    if tags:
        filters += sql_reads.FILTER_TAGS.format(marks=_marks(tags))
        params.extend(tags)
    if adapters is not None:
        filters += sql_reads.FILTER_ADAPTERS.format(marks=_marks(adapters))
        params.extend(adapters)
    found = sql_reads.ENTRIES.format(filters=filters).rows(db, [*params, limit])
    return [entry_from_row(row) for row in found]


def relevant(
    db: Queryable,
    *,
    tags: Sequence[str],
    adapters: Sequence[str] | None,
    limit: int,
) -> list[MemoryEntry]:
    """Visible entries ranked by shared tags, importance, then recency (newest with no tags)."""
    filters = sql_reads.FILTER_VISIBLE
    params: list[object] = []
    if adapters is not None:
        filters += sql_reads.FILTER_ADAPTERS.format(marks=_marks(adapters))
        params.extend(adapters)
    ranked = _ranked(db, tags, filters, params, limit, _everything)[:limit]
    found = _entries_by_id(db, [row.id for _, row in ranked])
    return [found[row.id] for _, row in ranked]


def prompt_candidates(
    db: Queryable,
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

    def admitted(row: sql_reads.Ranked) -> bool:
        if row.hidden:
            return False
        writer = (row.source_adapter, bool(row.unsigned_import))
        found = verdicts.get(writer)
        if found is None:
            found = verdicts[writer] = trusts(*writer)
        return found

    trusted: list[RankedRow] = []
    refused: list[RankedRow] = []
    for rank, row in _ranked(db, tags, sql_reads.FILTER_NOT_SUPERSEDED, [], limit, admitted):
        (trusted if admitted(row) else refused).append((rank, row))
    refused = refused[:refused_limit]
    found = _entries_by_id(db, [row.id for _, row in trusted + refused])
    return (
        [Candidate(found[row.id], False, rank) for rank, row in trusted],
        [
            Candidate(found[row.id], bool(row.hidden & sql_knowledge.HIDDEN_QUARANTINED), rank)
            for rank, row in refused
        ],
    )


def _entries_by_id(db: Queryable, ids: Sequence[int]) -> dict[int, MemoryEntry]:
    return {row.id: entry_from_row(row) for row in sql_reads.ENTRIES_BY_ID.among(db, ids)}


def _everything(row: sql_reads.Ranked) -> bool:
    return True


def _ranked(
    db: Queryable,
    tags: Sequence[str],
    filters: str,
    params: list[object],
    limit: int,
    admitted: Callable[[sql_reads.Ranked], bool],
) -> list[RankedRow]:
    """Ranked rows the filters pass, best first: the `limit` best admitted ones and every row
    ranked above the last of them (all, when fewer are admitted)."""
    if tags:
        return _search(db, tags, filters, params, limit, admitted)
    return _newest(db, filters, params, limit, admitted)


def _newest(
    db: Queryable,
    filters: str,
    params: list[object],
    limit: int,
    admitted: Callable[[sql_reads.Ranked], bool],
) -> list[RankedRow]:
    """With no tags, recency alone ranks: read newest first until `limit` rows are admitted."""
    ranked: list[RankedRow] = []
    found = 0
    chunk = limit
    after = sql_reads.NEWEST_AFTER.format(filters=filters)
    rows = sql_reads.NEWEST_FIRST.format(filters=filters).rows(db, [*params, chunk])
    while True:
        for row in rows:
            ranked.append(((0, 0.0, row.id), row))
            found += admitted(row)
            if found == limit:
                return ranked
        if len(rows) < chunk:
            return ranked
        chunk = min(2 * chunk, MAX_POSITION)
        rows = after.rows(db, [rows[-1].id, *params, chunk])


class _Walk(NamedTuple):
    """The statements a ranked read walks a tag's list with, its filters filled in."""

    first: sql.Query[sql_reads.TagRanked]
    after: sql.Query[sql_reads.TagRanked]
    filters: str
    """For `RANKED_BEATING`, filled in with the other lists' tags at each read."""


class _TagList:
    """One query tag's entries, read in rank order (importance, then id, both descending)."""

    __slots__ = (
        "beating",
        "cap",
        "chunk",
        "exhausted",
        "reach",
        "reached",
        "size",
        "tag",
        "taken",
    )

    def __init__(self, tag: str, limit: int) -> None:
        self.tag = tag
        self.reached: tuple[float, int] = _TOP
        """The (importance, id) of the last entry read: every entry above it that could still
        displace the worst of the best rows has been read."""
        self.chunk = max(FIRST_CHUNK, limit)
        self.beating = limit
        """Rows a read of only those that could displace the worst takes (then it doubles):
        `limit` of them, displacing every row held, is often the last read."""
        self.size: int | None = None
        self.cap = 0
        self.reach: tuple[float, int] = _TOP
        """The (importance, id) of the `cap`-th entry, in a list holding that many: the lower,
        the sparser the list's top."""
        self.taken = 0
        self.exhausted = False

    def count(self, db: Queryable, cap: int) -> int:
        """How long the list is, counted up to `cap` entries (a list that long notes where
        its `cap`-th entry sits, its `reach`)."""
        if self.size is None or (self.size == self.cap and cap > self.cap):
            mark = sql_reads.TAG_MARK_AT.first(db, (self.tag, cap - 1))
            if mark is None:
                self.size = sql_reads.TAG_COUNT.one(db, (self.tag,)).count
            else:
                self.size, self.reach = cap, (mark.importance, mark.entry_id)
            self.cap = cap
        return self.size

    def read(
        self,
        db: Queryable,
        walk: _Walk,
        params: list[object],
        worst: Rank | None = None,
        others: Sequence[str] = (),
    ) -> list[sql_reads.TagRanked]:
        """The next chunk of entries the walk's filters pass; chunks double as it goes on.

        Given `worst`, the worst of a full set of best rows, and the tags of the other lists
        still read, only entries that could displace it: sharing more tags, or as many and
        ranked higher (below it, none can when it shares more tags than a row left to read
        can). Rows read no further can never displace a later worst (it only rises), so
        `reached` and `exhausted` say where every entry that still could has been read."""
        if worst is not None:
            shared, importance, entry_id = worst
            floor = (importance, entry_id) if shared > len(others) else _BOTTOM
            query = sql_reads.RANKED_BEATING.format(filters=walk.filters, marks=_marks(others))
            bounds = [self.tag, *self.reached, *floor, *others, importance, entry_id, shared]
            size, self.beating = self.beating, min(2 * self.beating, MAX_POSITION)
            rows = query.rows(db, [*bounds, *params, size])
        else:
            size, self.chunk = self.chunk, min(2 * self.chunk, MAX_POSITION)
            if self.reached is _TOP:
                rows = walk.first.rows(db, [self.tag, *params, size])
            else:
                rows = walk.after.rows(db, [self.tag, *self.reached, *params, size])
        if len(rows) < size:
            self.exhausted = True
        else:
            self.reached = (rows[-1].listed_importance, rows[-1].id)
        self.taken += len(rows)
        return rows


def _search(
    db: Queryable,
    tags: Sequence[str],
    filters: str,
    params: list[object],
    limit: int,
    admitted: Callable[[sql_reads.Ranked], bool],
) -> list[RankedRow]:
    """A threshold search over the query tags' lists, each read in rank order.

    A row not read yet is in none of the exhausted lists, so it shares at most j tags, j the
    number of lists left; and sharing all j, it sits below the point each of them has
    reached. So it ranks below (j, the lowest of those points), and once the `limit`-th best
    admitted row ranks at least that high, no unread row can displace it. Until then the
    shortest list left is read next: it runs out soonest, and holds the densest share of
    entries sharing several tags. The cost is the rows read, not the rows the tags cover.

    Once `limit` admitted rows are held, a list is read on only for rows that could displace
    the worst of them (`_TagList.read`), their other tags looked up in the tag index: when
    fewer than `limit` rows share every tag, proving no other does meant reading a whole
    list, which grows with the log (a 3-tag prompt at 550k events read 5,140 rows).
    """
    wanted = frozenset(tags)
    walk = _Walk(
        sql_reads.RANKED_FIRST.format(filters=filters),
        sql_reads.RANKED_AFTER.format(filters=filters),
        filters,
    )
    lists = [_TagList(tag, limit) for tag in tags]
    seen: dict[int, RankedRow] = {}
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
        worst = best[0] if len(best) == limit else None
        others = sorted({t.tag for t in lists} - {source.tag}) if worst else []
        for row in source.read(db, walk, params, worst, others):
            if row.id in seen:
                continue
            rank = (len(wanted.intersection(row.tags.split(","))), row.importance, row.id)
            seen[row.id] = (rank, row)
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


def _shortest(db: Queryable, lists: list[_TagList]) -> _TagList:
    """The list to read next: the shortest; among lists longer than the cap, the one whose
    top is sparsest (its cap-th entry ranks lowest: it reaches a given rank in the fewest
    rows, and a row sharing every list's tag is found in whichever list reaches it first);
    then the least read. Lists are counted up to a cap of `COUNT_AHEAD` times the rows read
    so far (at least `SIZE_COUNT_CAP`, doubling), so counting costs a bounded share of the
    reading. Told apart by size alone, lists longer than the cap tied and were read in turn,
    and once a log's common tags all outgrew it (550k events) a prompt read a third more rows
    than at 100k."""
    cap, wanted = SIZE_COUNT_CAP, COUNT_AHEAD * sum(t.taken for t in lists)
    while cap < wanted and cap < MAX_POSITION:
        cap *= 2
    return min(lists, key=lambda t: (t.count(db, min(cap, MAX_POSITION)), t.reach, t.taken))


def _rank_of(item: RankedRow) -> Rank:
    return item[0]


def current_facts(
    db: Queryable, identity: tuple[str, str, str], adapters: Sequence[str] | None
) -> list[Fact]:
    """One fact per key under (scope, run_key, tag): the newest visible version, newest first.

    With an allow-list, the newest version written by an allowed adapter.
    """
    if adapters is None:
        return [fact_from_row(row) for row in sql_reads.FACTS_CURRENT.rows(db, identity)]
    query = sql_reads.FACTS_CURRENT_ALLOWED.format(marks=_marks(adapters))
    return [fact_from_row(row) for row in query.rows(db, [*identity, *adapters])]


def fact_history(db: Queryable, identity: tuple[str, str, str, str]) -> list[Fact]:
    """Every version published under one identity, oldest first."""
    return [fact_from_row(row) for row in sql_reads.FACT_HISTORY.rows(db, identity)]
