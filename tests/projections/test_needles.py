"""Needles: the literals a pattern cannot match without, and a scan that skips a search only
where its pattern could not match: findings are the same with and without them."""

from __future__ import annotations

import dataclasses
import re

import pytest

from projections import _secrets as secrets
from projections._needles import Search, needles
from tests.bench.corpus import Corpus
from tests.projections.test_secrets import SECRETS


def test_needles_are_the_literals_a_match_consumes() -> None:
    """A literal run, every branch's literals, a repeated body's; lowered under IGNORECASE."""
    assert search({"sk-ant-"}) == needles(re.compile(r"sk-ant-[a-z]+"))
    assert search({"AC", "SK"}) == needles(re.compile(r"(?:AC[a-z]{4})|(?:SK[a-z]{4})"))
    assert search(set(), {"token="}) == needles(re.compile(r"(?i)[?&]TOKEN="))
    assert search({"x"}, {"aws"}) == needles(re.compile(r"(?:x\d)|(?i:AWS\d)"))
    assert search({"-"}) == needles(re.compile(r"(?:\d+-)+"))
    # A needle holding another says nothing more: the shorter is looked for alone.
    assert search({"pass"}) == needles(re.compile(r"(?:xpassword|pass)\d"))


def search(plain: set[str], folded: frozenset[str] | set[str] = frozenset()) -> Search:
    return Search(frozenset(plain), frozenset(folded))


@pytest.mark.parametrize(
    "source",
    [
        r"(?<=abc)\d+",  # a lookbehind consumes nothing
        r"(?=abc)\w+",  # nor a lookahead
        r"(?:abc)?\d",  # an optional group may be absent
        r"(?:abc)*\d",
        r"abc|\d+",  # a branch without a literal
        r"[A-Z]{4}",  # a class is not a literal
        r"(?i)\u017fecret",  # a folded run that is not ASCII: a long s matches s
    ],
)
def test_no_needles_where_a_match_need_not_hold_a_literal(source: str) -> None:
    """Only literals every match consumes are needles; without one, the pattern is searched."""
    found = needles(re.compile(source))
    assert found is None or all(
        n.isascii() and n not in ("abc",) for n in (*found.plain, *found.folded)
    )
    if source.startswith(("(?<=", "(?=", "(?:abc)", "abc|", "[A-Z]")):
        assert found is None


def texts() -> list[str]:
    """Ordinary notes, each kind of secret in prose, upper- and lower-cased, and non-ASCII."""
    notes = [m.content for m in Corpus().memories(300)]
    found = list(notes)
    for secret in SECRETS.values():
        for text in (secret, secret.upper(), secret.lower()):
            found.append(f"the deploy note says {text} and more")
    found += [
        "see https://x.io/?pa\u017f\u017fword=hunter2abc now",  # long s: folded match
        "see https://x.io/?PASSWORD=hunter2abc now",
        "AWS key='" + "A" * 40 + "' \u00e9",
        "\u212aey: sk-ant-api03-" + "Zx8yW7vU6tS5rQ4pO3nM2lK1",
    ]
    return found


def test_the_scan_finds_the_same_with_and_without_needles(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every text gives the same findings whether searches are skipped by needles or not."""
    with_needles = [secrets.find_secrets(text) for text in texts()]
    assert all(p.needles is not None for p in secrets._patterns())
    bare = tuple(dataclasses.replace(p, needles=None) for p in secrets._patterns())
    monkeypatch.setattr(secrets, "_patterns", lambda: bare)
    assert with_needles == [secrets.find_secrets(text) for text in texts()]
    assert sum(1 for found in with_needles if found) >= len(SECRETS) + 2
