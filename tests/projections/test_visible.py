"""escape_invisible: one rule, by Unicode property, over every code point; and a rendering
that can be read back, so two different texts never look the same."""

from __future__ import annotations

import itertools
import re
import sys
import unicodedata

from hypothesis import given
from hypothesis import strategies as st

from projections import escape_invisible
from projections._visible import DEFAULT_IGNORABLE, find_invisible, is_invisible

CATEGORIES = {"Cc", "Cf", "Zl", "Zp", "Co", "Cs", "Cn"}
BLANK = {0x2800, 0x1D159}
"""BRAILLE PATTERN BLANK and MUSICAL SYMBOL NULL NOTEHEAD: symbols drawn as nothing."""
ESCAPE = re.compile(r"\\u\{([0-9A-F]{4,6})\}")


def default_ignorable() -> set[int]:
    return {code for start, end in DEFAULT_IGNORABLE for code in range(start, end + 1)}


def escaped(code: int) -> str:
    return f"\\u{{{code:04X}}}"


def read_back(rendered: str) -> str:
    """The inverse of escape_invisible: every `\\u{X}` is an escape, everything else itself."""
    return ESCAPE.sub(lambda match: chr(int(match.group(1), 16)), rendered)


def test_default_ignorable_table_is_the_published_one() -> None:
    """The table holds the 4,174 code points of DerivedCoreProperties.txt in sorted, disjoint
    ranges, the variation selectors, fillers and joiner named in the issue among them."""
    assert 4174 == sum(end - start + 1 for start, end in DEFAULT_IGNORABLE)
    assert all(a[1] < b[0] for a, b in itertools.pairwise(DEFAULT_IGNORABLE))
    named = [0xFE00, 0xFE0F, 0xE0100, 0xE01EF, 0x3164, 0x115F, 0x1160, 0xFFA0, 0x034F, 0x180F]
    assert set(named) <= default_ignorable()
    assert "14.0.0" <= unicodedata.unidata_version


def hidden_by_rule(code: int, ignorable: set[int]) -> bool:
    """The rule, restated: category Cc, Cf, Zl, Zp, Co, Cs or Cn; a Zs space but U+0020; a
    blank symbol; or default-ignorable."""
    category = unicodedata.category(chr(code))
    return (
        code in ignorable
        or category in CATEGORIES
        or (category == "Zs" and code != 0x20)
        or code in BLANK
    )


def test_every_code_point_maps_to_itself_or_its_escape() -> None:
    """Over 0..0x10FFFF: a code point whose category is Cc, Cf, Zl, Zp, Co, Cs or Cn, a space
    other than U+0020, a blank symbol, or a default-ignorable code point becomes `\\u{XXXX}`
    (but newline and tab, in running text); every other code point is itself; and the output
    holds none of those characters."""
    ignorable = default_ignorable()
    hidden = [code for code in range(sys.maxunicode + 1) if hidden_by_rule(code, ignorable)]
    pieces = list(map(chr, range(sys.maxunicode + 1)))
    everything = "".join(pieces)
    for code in hidden:
        if chr(code) not in "\n\t":
            pieces[code] = escaped(code)
    shown = escape_invisible(everything)
    assert "".join(pieces) == shown
    assert {"\n", "\t"} == set(shown) & set(map(chr, hidden))


def test_the_characters_the_issue_found_are_escaped() -> None:
    """Variation selectors, line and paragraph separators, Hangul fillers and the combining
    grapheme joiner are escaped; visible text around them is kept."""
    text = "a\ufe0f\U000e0100\u2028\u2029\u3164\u115f\u034fz"
    assert "a\\u{FE0F}\\u{E0100}\\u{2028}\\u{2029}\\u{3164}\\u{115F}\\u{034F}z" == escape_invisible(
        text
    )


def test_every_space_but_the_plain_one_and_blank_symbols_are_escaped() -> None:
    """No-break, en, em, thin, hair, narrow, medium mathematical, ogham and ideographic
    spaces, the braille blank and the null notehead: each a reader cannot tell from a space
    or from nothing, so each is escaped; U+0020 is itself."""
    spaces = [code for code in range(sys.maxunicode + 1) if unicodedata.category(chr(code)) == "Zs"]
    assert 0x20 in spaces and {0xA0, 0x1680, 0x2000, 0x200A, 0x202F, 0x205F, 0x3000} <= set(spaces)
    for code in [*spaces, *BLANK]:
        expected = " " if code == 0x20 else escaped(code)
        assert f"a{expected}b" == escape_invisible(f"a{chr(code)}b")
        assert (code != 0x20) == is_invisible(chr(code))


def test_a_literal_escape_is_not_mistaken_for_one() -> None:
    """Text that already reads `\\u{200B}` renders differently from a zero-width space: its
    backslash is escaped. Other backslashes (paths, regular expressions) are left alone."""
    assert "\\u{200B}" == escape_invisible("\u200b")
    assert "\\u{005C}u{200B}" == escape_invisible("\\u{200B}")
    assert "C:\\users\\x \\d+ \\u00e9 \\\\" == escape_invisible("C:\\users\\x \\d+ \\u00e9 \\\\")


def test_newline_and_tab_are_kept_only_in_running_text() -> None:
    """keep_newlines=False (names, tags, table cells) escapes newline and tab too."""
    assert "a\nb\tc" == escape_invisible("a\nb\tc")
    assert "a\\u{000A}b\\u{0009}c" == escape_invisible("a\nb\tc", keep_newlines=False)


def test_find_invisible_names_the_first_one() -> None:
    """find_invisible gives the index of the first invisible character, or None."""
    assert None is find_invisible("plain 日本語 \U0001f642 \\u{200B}")
    assert 3 == find_invisible("api\u200b\ufe0f")
    assert 1 == find_invisible("a\nb")
    assert is_invisible("\U000e0041") and not is_invisible("\U0001f642")


TRICKY = st.sampled_from(["\\", "u", "{", "}", "0", "A", "\u200b", "\n", "\t", "\ud800"])
TEXT = st.text(alphabet=st.one_of(TRICKY, st.characters(exclude_categories=())), max_size=60)


@given(TEXT, st.booleans())
def test_the_rendering_reads_back_to_the_text(text: str, keep_newlines: bool) -> None:
    """Every rendering reads back to exactly its text, so two different texts never render
    the same; and nothing invisible survives in it."""
    shown = escape_invisible(text, keep_newlines=keep_newlines)
    assert text == read_back(shown)
    assert all(char in "\n\t" and keep_newlines for char in shown if is_invisible(char))


@given(TEXT, TEXT)
def test_different_texts_render_differently(first: str, second: str) -> None:
    """Injective: equal renderings only for equal texts."""
    assert (first == second) == (escape_invisible(first) == escape_invisible(second))
