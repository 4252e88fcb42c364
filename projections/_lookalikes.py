"""One rule for the names memory is found by (tags and fact keys): two names that look
alike are the same name, or one of them is refused.

- **NFC.** A name is normalized to Unicode NFC on every write and every read, so `café`
  typed as `e` + U+0301 (NFD, as macOS file names hold it) is the key `café` (U+00E9).
- **One script.** A name whose letters come from more than one script is refused: `users`
  written with a Cyrillic U+0435 for its `e` would print as `users` and be another key.
  Latin may mix with Han, Hiragana and Katakana (Japanese), with Han and Bopomofo
  (Chinese), and with Han and Hangul (Korean), as those languages are written (the Highly
  Restrictive level of Unicode TR39). Digits, punctuation, symbols, spaces and marks mix
  with any script.

A letter's script is read from its Unicode name (the standard library keeps no Script
property): the name's first word (`LATIN`, `CYRILLIC`, `GREEK`, `ARMENIAN`, `HEBREW`,
`HANGUL`, ...), after `FULLWIDTH` or `HALFWIDTH`; `CJK` and `IDEOGRAPHIC` are Han. Letters
named as symbols (`MATHEMATICAL BOLD SMALL A`, `SCRIPT SMALL L`, `DOUBLE-STRUCK CAPITAL C`)
each form a group of their own, so they cannot stand among Latin letters either; the few
letters Unicode gives every script (`MODIFIER LETTER ...`, the micro sign, the ordinal
indicators, the Japanese prolonged sound mark) mix with any.
"""

from __future__ import annotations

import functools
import unicodedata

from eventlog.errors import InvalidInputError

WRITTEN_TOGETHER = (
    frozenset({"LATIN", "HAN", "HIRAGANA", "KATAKANA"}),
    frozenset({"LATIN", "HAN", "BOPOMOFO"}),
    frozenset({"LATIN", "HAN", "HANGUL"}),
)
"""Scripts one name may mix, as Japanese, Chinese and Korean are written."""

_WIDTHS = ("FULLWIDTH ", "HALFWIDTH ")
_HAN = frozenset({"CJK", "IDEOGRAPHIC"})
_ANY_SCRIPT = frozenset({"MODIFIER", "MICRO", "FEMININE", "MASCULINE", "KATAKANA-HIRAGANA"})


@functools.lru_cache(maxsize=8192)
def script_of(char: str) -> str | None:
    """The script the one character `char` counts for, or None when it mixes with any
    (not a letter, or a letter of every script)."""
    if not unicodedata.category(char).startswith("L"):
        return None
    name = unicodedata.name(char, "")
    for width in _WIDTHS:
        name = name.removeprefix(width)
    word = name.split(" ", 1)[0]
    if not word or word in _ANY_SCRIPT:
        return None
    return "HAN" if word in _HAN else word


def check_one_script(name: str, value: str) -> None:
    """Refuse `value` (what `name` holds) if its letters mix scripts that are not written
    together, naming the first letter out of place."""
    first: str | None = None
    seen: set[str] = set()
    for index, char in enumerate(value):
        script = script_of(char)
        if script is None or script in seen:
            continue
        seen.add(script)
        first = first or script
        if len(seen) > 1 and not any(seen <= together for together in WRITTEN_TOGETHER):
            label = f"U+{ord(char):04X} {unicodedata.name(char, '')}".rstrip()
            raise InvalidInputError(
                f"{name} mixes scripts: {label} at index {index} among {first} letters; "
                "a name that mixes scripts can print like another, so write it in one script"
            )


def normalized(value: str) -> str:
    """`value` in Unicode NFC (the same object when it already is)."""
    if unicodedata.is_normalized("NFC", value):
        return value
    return unicodedata.normalize("NFC", value)
