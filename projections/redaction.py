"""Masking personal data in values shown to people. Stored data is never changed."""

from __future__ import annotations

import re

MASK = "[REDACTED]"

_CARD = re.compile(r"(?<![\w-])\d(?:[ -]?\d){12,18}(?![\w-])")
_SSN = re.compile(r"(?<![\w-])(?!000|666|9\d\d)\d{3}-(?!00)\d{2}-(?!0000)\d{4}(?![\w-])")
_PHONE = re.compile(
    r"(?<![\w+])(?:"
    r"(?:\+?1[ .-]?)?(?:\(\d{3}\)[ .-]?|\d{3}[ .-])\d{3}[ .-]\d{4}"
    r"|\+\d(?:[ .-]?\d){7,14}"
    r")(?![\w-])"
)
_EMAIL = re.compile(
    r"(?<![\w.+%-])[A-Za-z0-9._%+-]+@"
    r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*"
    r"\.[A-Za-z]{2,}(?![\w-])"
)


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


def _card(match: re.Match[str]) -> str:
    digits = re.sub(r"\D", "", match.group())
    return MASK if 13 <= len(digits) <= 19 and luhn_valid(digits) else match.group()


def redact_value(text: str) -> str:
    """`text` with e-mail addresses, phone numbers, US SSNs and Luhn-valid card numbers
    replaced by [REDACTED]."""
    text = _CARD.sub(_card, text)
    text = _SSN.sub(MASK, text)
    text = _PHONE.sub(MASK, text)
    return _EMAIL.sub(MASK, text)
