"""Masking personal data in values shown to people. Stored data is never changed.

Matching runs on a normalized reading of the text (NFKC, so a fullwidth at sign and digits
read as ASCII; invisible characters other than whitespace left out, so a zero-width space
cannot split a number), and each match masks the whole stretch of the original text it came
from. Everything outside a match is shown exactly as it was.
"""

from __future__ import annotations

import re
import unicodedata

from projections._visible import find_invisible, is_invisible

MASK = "[REDACTED]"

_INTERNATIONAL_PHONE = re.compile(r"(?<![\w+])\+\d(?:[ .-]?\d){7,14}(?![\w-])")
_CARD = re.compile(r"(?<![\w-])\d(?:[ -]?\d){12,18}(?![\w-])")
_SSN = re.compile(r"(?<![\w-])(?!000|666|9\d\d)\d{3}-(?!00)\d{2}-(?!0000)\d{4}(?![\w-])")
_PHONE = re.compile(
    r"(?<![\w+])(?:\+?1[ .-]?)?(?:\(\d{3}\)[ .-]?|\d{3}[ .-])\d{3}[ .-]\d{4}(?![\w-])"
)
_EMAIL = re.compile(
    r"(?<![\w.+%-])[A-Za-z0-9._%+-]+@"
    r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*"
    r"\.[A-Za-z]{2,}(?![\w-])"
)
_PLAIN = re.compile(r"[\t-\r\x1c-\x7e]+")
"""ASCII that normalizes to itself and is not left out: read as it is."""
_RUNS = re.compile(r"([\t-\r\x1c-\x7e]+)|([^\x00-\x7f]+)|([\s\S])")
_HOLE = "\ue000"
"""Stands in for a match while the next patterns run: private use, so never in the reading,
and like `[` to every pattern (no word character, no digit)."""


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
    spans: list[tuple[int, int]] = []

    def mask(match: re.Match[str]) -> str:
        spans.append(match.span())
        return _HOLE * len(match.group())

    def card(match: re.Match[str]) -> str:
        digits = re.sub(r"\D", "", match.group())
        return mask(match) if 13 <= len(digits) <= 19 and luhn_valid(digits) else match.group()

    reading = _INTERNATIONAL_PHONE.sub(mask, reading)
    reading = _CARD.sub(card, reading)
    for pattern in (_SSN, _PHONE, _EMAIL):
        reading = pattern.sub(mask, reading)
    if not spans:
        return text
    shown, done = [], 0
    for start, end in sorted(spans):
        first, last = (start, end) if origin is None else (origin[start], origin[end - 1] + 1)
        shown += [text[done:first], MASK]
        done = last
    shown.append(text[done:])
    return "".join(shown)


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
            pieces.append(piece)
            origin.extend([start + offset] * len(piece))
    return "".join(pieces), origin
