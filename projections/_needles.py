"""Needles: literals a regular expression cannot match without, to skip searches that cannot
find anything.

A search for a pattern that has no literal at its start walks the text character by
character; `needles(pattern)` reads the pattern's parse tree and returns substrings of
which every match holds at least one (None when it finds none), so a scan of an ASCII text
holding none of them may skip the search: `str.__contains__` is far cheaper. Only literals a
match consumes count (a run of them in sequence, every branch of an alternation, the body
of a repetition of at least one); lookarounds, classes and anything not understood give
nothing. Literals under IGNORECASE come out lowered and marked, to be looked for in the
lowered text, and only for an ASCII text: Unicode case folding lets some non-ASCII letters
match ASCII ones.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from re import _parser as parser  # type: ignore[attr-defined]
from typing import Any, NamedTuple


class Needle(NamedTuple):
    """A substring every match holds (`folded`: in the lowered text)."""

    text: str
    folded: bool


Needles = frozenset[Needle]


@dataclass(frozen=True, slots=True)
class Search:
    """A pattern's needles: looked for in the text, and (`folded`) in the lowered text."""

    plain: frozenset[str]
    folded: frozenset[str]

    def may_match(self, present: Present) -> bool:
        """Whether a text holding the needles `present` may hold a match."""
        return not (self.plain.isdisjoint(present.plain) and self.folded.isdisjoint(present.folded))


@dataclass(frozen=True, slots=True)
class Present:
    """The needles an ASCII text holds, of those looked for."""

    plain: set[str]
    folded: set[str]


def present(looked_for: Search, text: str) -> Present:
    """Which of the needles `looked_for` (every pattern's, merged) the ASCII `text` holds:
    each looked for once, however many patterns share it."""
    lowered = text.lower()
    return Present(
        {needle for needle in looked_for.plain if needle in text},
        {needle for needle in looked_for.folded if needle in lowered},
    )


def merged(searches: Iterable[Search]) -> Search:
    """The needles of all `searches`, to look each up once (`present`)."""
    plain: set[str] = set()
    folded: set[str] = set()
    for search in searches:
        plain |= search.plain
        folded |= search.folded
    return Search(frozenset(plain), frozenset(folded))


def needles(pattern: re.Pattern[str]) -> Search | None:
    """Substrings of which every match of `pattern` holds one, or None when none is known."""
    try:
        tree = parser.parse(pattern.pattern, pattern.flags)
    except re.error:
        return None
    found = _sequence(list(tree), bool(pattern.flags & re.IGNORECASE))
    if found is None:
        return None
    return Search(
        plain=_shortest(n.text for n in found if not n.folded),
        folded=_shortest(n.text for n in found if n.folded),
    )


def _shortest(texts: Iterable[str]) -> frozenset[str]:
    """`texts` without those holding another of them: a text that holds `password` holds
    `pass`, so looking for `pass` alone says as much."""
    found = set(texts)
    return frozenset(t for t in found if not any(o != t and o in t for o in found))


def _sequence(items: list[tuple[Any, Any]], folded: bool) -> Needles | None:
    """The best needles of a sequence: its longest literal run, or an element's needles."""
    candidates: list[Needles | None] = []
    run: list[str] = []
    for op, argument in items:
        if op is parser.LITERAL:
            run.append(chr(argument))
            continue
        candidates.append(_literal("".join(run), folded))
        run = []
        candidates.append(_element(op, argument, folded))
    candidates.append(_literal("".join(run), folded))
    found = [c for c in candidates if c]
    if not found:
        return None
    return max(found, key=lambda needles: min(len(needle.text) for needle in needles))


def _element(op: Any, argument: Any, folded: bool) -> Needles | None:
    if op is parser.SUBPATTERN:
        _group, added, removed, body = argument
        if added & re.IGNORECASE:
            folded = True
        if removed & re.IGNORECASE:
            folded = False
        return _sequence(list(body), folded)
    if op is parser.BRANCH:
        _unused, branches = argument
        union: set[Needle] = set()
        for branch in branches:
            found = _sequence(list(branch), folded)
            if found is None:
                return None
            union |= found
        return frozenset(union)
    if op in (parser.MAX_REPEAT, parser.MIN_REPEAT, getattr(parser, "POSSESSIVE_REPEAT", None)):
        least, _most, body = argument
        return _sequence(list(body), folded) if least >= 1 else None
    return None


def _literal(run: str, folded: bool) -> Needles | None:
    """A run of literals as a needle; none for a folded run that is not ASCII (a long s matches
    `s` under IGNORECASE, and does not lower to it)."""
    if not run or (folded and not run.isascii()):
        return None
    return frozenset((Needle(run.lower() if folded else run, folded),))
