"""One rule for characters a reader cannot see: they are shown as escapes, never passed on.

A character is *invisible* when its Unicode general category is Cc (control), Cf (format),
Zl or Zp (line and paragraph separators), Co (private use), Cs (surrogate) or Cn (unassigned,
noncharacters included); when it is a space other than U+0020 (category Zs: the no-break,
en, em, thin, hair, ideographic spaces, ...), which a reader cannot tell from a plain space;
when it is a symbol drawn blank (`BLANK_SYMBOLS`); or when it is a
Default_Ignorable_Code_Point (variation selectors, Hangul fillers, the combining grapheme
joiner, ...). `escape_invisible` writes each one as
`\\u{XXXX}`: its code point in upper-case hexadecimal, at least four digits. Newline and tab
are kept in running text and escaped in one-line fields.

The rendering is unambiguous: a backslash that would itself start `\\u{` is written
`\\u{005C}`, so in the output `\\u{` always begins an escape and every text can be read back
from its rendering. Two different texts never render the same.
"""

from __future__ import annotations

import bisect
import functools
import re
import unicodedata

INVISIBLE_CATEGORIES = frozenset(("Cc", "Cf", "Zl", "Zp", "Co", "Cs", "Cn"))
"""General categories escaped whole (as `unicodedata` of this Python reports them)."""

DEFAULT_IGNORABLE = (
    (0x00AD, 0x00AD),
    (0x034F, 0x034F),
    (0x061C, 0x061C),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180B, 0x180F),
    (0x200B, 0x200F),
    (0x202A, 0x202E),
    (0x2060, 0x206F),
    (0x3164, 0x3164),
    (0xFE00, 0xFE0F),
    (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0),
    (0xFFF0, 0xFFF8),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0000, 0xE0FFF),
)
"""Default_Ignorable_Code_Point as inclusive ranges: the 4,174 code points the Unicode
Character Database's DerivedCoreProperties.txt lists from Unicode 14.0 (this Python's
`unicodedata`) on. `unicodedata` does not expose the property; Unicode keeps it stable, and
unassigned members are reserved so they stay ignorable once assigned."""

BLANK_SYMBOLS = frozenset(("\u2800", "\U0001d159"))
"""Symbols whose glyph is empty: U+2800 BRAILLE PATTERN BLANK and U+1D159 MUSICAL SYMBOL NULL
NOTEHEAD (categories So), used to fake blank lines and spaces."""

_STARTS = tuple(start for start, _ in DEFAULT_IGNORABLE)
_KEPT_IN_TEXT = "\n\t"
_ESCAPE_START = "u{"


def is_invisible(char: str) -> bool:
    """Whether the one character `char` is invisible under the rule above."""
    category = unicodedata.category(char)
    if category in INVISIBLE_CATEGORIES or char in BLANK_SYMBOLS:
        return True
    if category == "Zs":
        return char != " "
    code = ord(char)
    index = bisect.bisect_right(_STARTS, code) - 1
    return index >= 0 and code <= DEFAULT_IGNORABLE[index][1]


def find_invisible(text: str) -> int | None:
    """The index of the first invisible character in `text` (newline and tab included),
    or None."""
    for match in _pattern(False).finditer(text):
        if match.group() != "\\" and is_invisible(match.group()):
            return match.start()
    return None


def hidden_characters(text: str) -> list[int]:
    """The indexes of the invisible characters of `text` that are not whitespace (a
    zero-width space, a control character): those that could split a word unseen."""
    return [
        match.start()
        for match in _pattern(True).finditer(text)
        if match.group() != "\\" and is_invisible(match.group()) and not match.group().isspace()
    ]


def escape_invisible(text: str, *, keep_newlines: bool = True) -> str:
    """`text` with every invisible character written as a visible `\\u{XXXX}` escape.

    Newline and tab are kept when `keep_newlines` (running text) and escaped otherwise
    (one-line fields: names, tags, table cells).
    """
    return _pattern(keep_newlines).sub(_escape, text)


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    if char != "\\" and ord(char) > 0xFFFF and not is_invisible(char):
        return char
    return f"\\u{{{ord(char):04X}}}"


@functools.cache
def _pattern(keep_newlines: bool) -> re.Pattern[str]:
    """Matches every invisible character of the Basic Multilingual Plane, every character
    beyond it (decided one by one: they are rare, and listing them would slow every match),
    and a backslash that starts `\\u{`."""
    ranges: list[tuple[int, int]] = []
    for code in range(0x10000):
        char = chr(code)
        if not is_invisible(char) or (keep_newlines and char in _KEPT_IN_TEXT):
            continue
        if ranges and ranges[-1][1] == code - 1:
            ranges[-1] = (ranges[-1][0], code)
        else:
            ranges.append((code, code))
    ranges.append((0x10000, 0x10FFFF))
    members = "".join(f"\\U{start:08x}-\\U{end:08x}" for start, end in ranges)
    return re.compile(f"[{members}]|\\\\(?={re.escape(_ESCAPE_START)})")
