"""Which tags and keys a reader may use: the tag listing, trust-filtered, with counts.

A model guesses tags and keys unless it can list them. `list_tags` lists, under one scope,
each tag with the keys of its current facts and how many memory entries carry it, from what
the reading shows: for an agent, only what its trust policy trusts (a key whose current
version it may not trust is listed when an earlier version is trusted, as `read_facts`
shows it). It composes the agent reads' own selections (`projections._reading`), so the
listing follows the same rule, and it is receipted like every other read: the positions
behind the listing, those kept out and why. Bounded: at most `MAX_TAGS` tags with facts,
`MAX_ENTRIES` newest entries, `MAX_KEYS` keys a tag; `truncated` says when a bound cut it.
"""

from __future__ import annotations

from collections import Counter, defaultdict

import msgspec

from projections import _reading as reading
from projections import _sql_reads as sql_reads
from projections._entries import Fact, MemoryEntry
from projections._knowledge import run_key
from projections._view import MemoryView
from projections._visible import escape_invisible

MAX_TAGS = 1000
"""The most tags with facts a listing reads."""
MAX_ENTRIES = 1000
"""The most entries (newest first) a listing counts."""
MAX_KEYS = 200
"""The most keys listed under one tag (its count says how many there are)."""

Row = Fact | MemoryEntry


class TagCount(msgspec.Struct, frozen=True, kw_only=True):
    """One tag: how many current facts and entries carry it, and its facts' keys (at most
    `MAX_KEYS`, in order)."""

    tag: str
    facts: int
    entries: int
    keys: list[str]


class TagListing(msgspec.Struct, frozen=True, kw_only=True):
    """The tags under a scope as a reader may see them, and the read's receipt."""

    scope: str
    tags: list[TagCount]
    kept_out: int
    """Rows passed over because the reader's policy does not trust them."""
    truncated: bool
    """Whether a bound (`MAX_TAGS`, `MAX_ENTRIES`, `MAX_KEYS`) cut the listing."""
    receipt_position: int | None
    """The receipt of an agent's listing (None: an operator's audit)."""


def list_tags(store: MemoryView, how: reading.Reading, scope: str, run_id: str) -> TagListing:
    """The tags under `scope` (the run `run_id` for scope 'run') as `how` reads them; `scope`
    and `run_id` are checked by the caller."""
    found = reading.read(
        store,
        how,
        _selection((scope, run_key(scope, run_id))),
        tags=(),
        limit=reading.NO_LIMIT,
        show=_listed,
    )
    counts, cut = found.shown
    return TagListing(
        scope=scope,
        tags=counts,
        kept_out=len(found.kept_out),
        truncated=cut or found.more,
        receipt_position=found.receipt_position,
    )


def _selection(where: tuple[str, str]) -> reading.Select[Row]:
    """Each tag's current facts as `reading.current_facts` selects them, and the newest
    entries as `reading.newest_entries` does (less the entries that mirror those facts)."""

    def select(judge: reading.Judge) -> reading.Selection[Row]:
        names = sql_reads.FACT_TAGS_IN_SCOPE.rows(judge.snap, (*where, MAX_TAGS + 1))
        parts: list[reading.Selection[Fact] | reading.Selection[MemoryEntry]] = [
            reading.current_facts((*where, name.tag), None)(judge) for name in names[:MAX_TAGS]
        ]
        entries = reading.newest_entries(None, (), None, MAX_ENTRIES)(judge)
        seen = [e.position for e in entries.rows] + [e.position for e in entries.kept_out]
        mirrors = {r.position for r in sql_reads.FACTS_AT.among(judge.snap, seen)}
        kept = [i for i, entry in enumerate(entries.rows) if entry.position not in mirrors]
        parts.append(
            reading.Selection(
                [entries.rows[i] for i in kept],
                [entries.trust[i] for i in kept],
                [entries.shows[i] for i in kept],
                [e for e in entries.kept_out if e.position not in mirrors],
                entries.more,
            )
        )
        rows: list[Row] = [row for part in parts for row in part.rows]
        return reading.Selection(
            rows,
            [verdict for part in parts for verdict in part.trust],
            [shown for part in parts for shown in part.shows],
            [exclusion for part in parts for exclusion in part.kept_out],
            len(names) > MAX_TAGS or entries.more,
        )

    return select


def _listed(rows: list[Row]) -> tuple[tuple[list[TagCount], bool], bytes]:
    """The rows counted per tag, names escaped, and whether `MAX_KEYS` cut a tag's keys."""
    keys: defaultdict[str, set[str]] = defaultdict(set)
    entries: Counter[str] = Counter()
    for row in rows:
        if isinstance(row, Fact):
            keys[row.tag].add(row.key)
        else:
            entries.update(row.tags)
    counts = [
        TagCount(
            tag=_name(tag),
            facts=len(keys[tag]),
            entries=entries[tag],
            keys=[_name(key) for key in sorted(keys[tag])[:MAX_KEYS]],
        )
        for tag in sorted(keys.keys() | entries.keys())
    ]
    cut = any(len(found) > MAX_KEYS for found in keys.values())
    return (counts, cut), msgspec.json.encode(counts)


def _name(text: str) -> str:
    return escape_invisible(text, keep_newlines=False)
