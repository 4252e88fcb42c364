"""Masking personal data in values shown to people. Stored data is never changed.

Matching runs on a normalized reading of the text (NFKC, so a fullwidth at sign and digits
read as ASCII; invisible characters other than whitespace left out, so a zero-width space, a
soft hyphen or a bidi control cannot split a number; a character whose compatibility form
holds a space, a spacing accent say, is read as itself), and each match masks the whole stretch
of the original text it came from. Everything outside a match is shown exactly as it was.

What is masked, on that reading:
- e-mail addresses, Unicode ones included: a local part of any characters but whitespace
  and the delimiters ``@<>()[]\\,;:"`{|}/`` (RFC 6531 allows any non-ASCII character), or
  a quoted one of up to 64 characters on one line; a
  domain of dot-separated labels of letters, digits, combining marks, hyphens and the
  punctuation IDNA allows in context (the ideographic full stop counts as a dot) whose last
  label starts with a letter, so IDN and punycode domains match and ``user@10.0.0.1`` does
  not;
- payment card numbers: 13 to 19 digits passing the Luhn check, digits split by up to three
  separators each (whitespace, newline and tab included, dots, slashes, underscores and any
  dash); an ISO date or a dotted IPv4 address is no part of one, and where the digits
  around a card hide it (a number before it, another group after), the first run of whole
  groups of three or more digits that passes is masked;
- US social security numbers `AAA-GG-SSSS` with any dash between the groups (every
  Unicode dash punctuation character and the minus sign: NFKC folds only the fullwidth and
  small hyphen-minus to `-`, and U+2011 only to U+2010);
- phone numbers: international ones whole from their `+`, with groups in parentheses (a
  trunk prefix `(0)`, an area code), and North American ones.

Every pattern is linear: each repeated piece is told from what follows it by a character it
cannot contain, so there is no nested backtracking, and a match can only start where the
character before cannot continue it.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Callable
from typing import NamedTuple

from projections._visible import find_invisible, is_invisible

MASK = "[REDACTED]"

_PLAIN = re.compile(r"[\t-\r\x1c-\x7e]+")
"""ASCII that normalizes to itself and is not left out: read as it is."""
_RUNS = re.compile(r"([\t-\r\x1c-\x7e]+)|([^\x00-\x7f]+)|([\s\S])")
_HOLE = "\ue000"
"""Stands in for a match while the next patterns run: private use, so never in the reading,
and like `[` to every pattern (no word character, no digit)."""
_DIGIT = re.compile(r"\d")
"""Every pattern but the e-mail one needs a digit; the e-mail one needs `@`."""
_GROUP = re.compile(r"\d+")
_NOT_CARD = re.compile(
    r"(?<!\d)(?:1[6-9]|20)\d\d([-/.])(?:0[1-9]|1[0-2])\1(?:0[1-9]|[12]\d|3[01])(?!\d)"
    r"|(?<![\d.])(?:(?:25[0-5]|2[0-4]\d|1?\d?\d)\.){3}(?:25[0-5]|2[0-4]\d|1?\d?\d)(?!\d)"
)
"""An ISO date or a dotted IPv4 address: digits that read as one are not a card number."""
_LAST_MARKED = 0x30000
"""Combining marks are looked for below this code point: above it, only the variation
selectors supplement has marks, and those are invisible, so never in the reading."""
_EXTRA_DASHES = "\u2212"
_CONTEXT_DOTS = "\u00b7\u0375\u05f3\u05f4\u30fb"
"""Punctuation IDNA allows inside a domain label in context (Catalan middle dot, Greek
keraia, Hebrew geresh and gershayim, katakana middle dot)."""
"""Dash-like characters outside the dash punctuation category: the minus sign."""


class _Patterns(NamedTuple):
    international_phone: re.Pattern[str]
    card: re.Pattern[str]
    ssn: re.Pattern[str]
    phone: re.Pattern[str]
    email: re.Pattern[str]


def luhn_valid(digits: str) -> bool:
    """Whether a digit string passes the Luhn checksum payment card numbers carry."""
    total = 0
    for index, char in enumerate(reversed(digits)):
        number = int(char)
        if index % 2:
            number *= 2
            if number > 9:
                number -= 9
        total += number
    return total % 10 == 0


def redact_value(text: str) -> str:
    """`text` with e-mail addresses, phone numbers (international ones whole), US SSNs and
    Luhn-valid card numbers replaced by [REDACTED], found in its normalized reading."""
    reading, origin = _reading(text)
    numbered = _DIGIT.search(reading) is not None
    if not numbered and "@" not in reading:
        return text
    patterns = _patterns()
    spans: list[tuple[int, int]] = []

    def mask(match: re.Match[str]) -> str:
        spans.append(match.span())
        return _HOLE * len(match.group())

    if numbered:
        reading = patterns.international_phone.sub(mask, reading)
        reading = _cards(patterns.card, reading, spans)
        reading = patterns.ssn.sub(mask, reading)
        reading = patterns.phone.sub(mask, reading)
    reading = patterns.email.sub(mask, reading)
    if not spans:
        return text
    shown, done = [], 0
    for start, end in sorted(spans):
        first, last = (start, end) if origin is None else (origin[start], origin[end - 1] + 1)
        shown += [text[done:first], MASK]
        done = last
    shown.append(text[done:])
    return "".join(shown)


def _cards(card: re.Pattern[str], reading: str, spans: list[tuple[int, int]]) -> str:
    """`reading` with each card number in holes, its span added to `spans`. A candidate
    holding a date or an IPv4 address is looked at again right after it, so a card written
    after a date is still found."""
    pieces, done, start = [], 0, 0
    while found := card.search(reading, start):
        shape = _NOT_CARD.search(found.group())
        if shape is not None:
            start = found.start() + shape.end()
            continue
        span = _card_in(found.group())
        if span is not None:
            first, last = found.start() + span[0], found.start() + span[1]
            spans.append((first, last))
            pieces += [reading[done:first], _HOLE * (last - first)]
            done = last
        start = found.end()
    return "".join([*pieces, reading[done:]])


def _card_in(candidate: str) -> tuple[int, int] | None:
    """Where in `candidate` (digits and separators) a card number is: all of it when its
    digits pass, else the first run of whole groups of three or more digits that does (so
    digits written before or after a grouped card do not hide it); None if none does."""
    groups = [group.span() for group in _GROUP.finditer(candidate)]
    windows = [(0, len(groups))]
    for first in range(len(groups)):
        last = first
        while last < len(groups) and groups[last][1] - groups[last][0] >= 3:
            last += 1
        windows += [(first, end) for end in range(last, first, -1)]
    for first, last in windows:
        if 13 <= sum(end - start for start, end in groups[first:last]) <= 19:
            digits = "".join(candidate[start:end] for start, end in groups[first:last])
            if luhn_valid(digits):
                return groups[first][0], groups[last - 1][1]
    return None


@functools.cache
def _patterns() -> _Patterns:
    """The patterns, built once: their classes of dashes and combining marks come from this
    Python's Unicode database."""
    dashes = "".join(_ranges(lambda char: unicodedata.category(char) == "Pd"))
    dashes += "".join(f"\\u{ord(char):04x}" for char in _EXTRA_DASHES)
    marks = "".join(_ranges(lambda char: unicodedata.category(char) in ("Mn", "Mc", "Me")))
    word = f"\\w{marks}{_CONTEXT_DOTS}"
    local = f'[^\\s@<>()\\[\\]\\\\,;:"`{{|}}/{_HOLE}]'
    label = f"[{word}][{word}\\-]*"
    top = f"[^\\W\\d_][{word}\\-]*"
    dot = "[.\u3002]"
    separator = f"[\\s._/{dashes}]"
    phone_separator = f"[ \\t./{dashes}]"
    short = f"[ .{dashes}]"
    return _Patterns(
        international_phone=re.compile(
            f"(?<![\\w+])\\+\\d(?:{phone_separator}{{0,2}}(?:\\(\\d{{1,4}}\\)|\\d)){{7,14}}(?!\\w)"
        ),
        card=re.compile(f"(?<!\\w)\\d(?:{separator}{{0,3}}\\d){{12,18}}(?!\\w)"),
        ssn=re.compile(
            f"(?<![\\w{dashes}])(?!000|666|9\\d\\d)\\d{{3}}[{dashes}](?!00)\\d{{2}}"
            f"[{dashes}](?!0000)\\d{{4}}(?![\\w{dashes}])"
        ),
        phone=re.compile(
            f"(?<![\\w+])(?:\\+?1{short}?)?(?:\\(\\d{{3}}\\){short}?|\\d{{3}}{short})"
            f"\\d{{3}}{short}\\d{{4}}(?![\\w{dashes}])"
        ),
        email=re.compile(
            f'(?:"[^"\\n]{{1,64}}"|(?<!{local}){local}+)@{label}(?:{dot}{label})*{dot}{top}'
        ),
    )


def _ranges(member: Callable[[str], bool]) -> list[str]:
    """Regular expression class ranges of the characters below `_LAST_MARKED` that
    `member` accepts."""
    ranges: list[tuple[int, int]] = []
    for code in range(_LAST_MARKED):
        if not member(chr(code)):
            continue
        if ranges and ranges[-1][1] == code - 1:
            ranges[-1] = (ranges[-1][0], code)
        else:
            ranges.append((code, code))
    return [f"\\U{start:08x}-\\U{end:08x}" for start, end in ranges]


def _reading(text: str) -> tuple[str, list[int] | None]:
    """The text patterns run on, and for each of its characters the index of the character
    of `text` it came from (None: the same text)."""
    if _PLAIN.fullmatch(text) or not text:
        return text, None
    pieces: list[str] = []
    origin: list[int] = []
    for match in _RUNS.finditer(text):
        run, start = match.group(), match.start()
        if match.group(1) is not None or (
            match.group(2) is not None
            and unicodedata.is_normalized("NFKC", run)
            and find_invisible(run) is None
        ):
            pieces.append(run)
            origin.extend(range(start, match.end()))
            continue
        for offset, char in enumerate(run):
            if is_invisible(char) and not char.isspace():
                continue
            piece = unicodedata.normalize("NFKC", char)
            if not char.isspace() and any(part.isspace() for part in piece):
                piece = char
            pieces.append(piece)
            origin.extend([start + offset] * len(piece))
    return "".join(pieces), origin
