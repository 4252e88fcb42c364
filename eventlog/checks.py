"""Checks for the values an event carries, raising clear errors before anything is written."""

from __future__ import annotations

import functools
import math
import os
import re
import unicodedata
from collections.abc import Iterable
from typing import TypeGuard

from eventlog.errors import InvalidInputError, InvalidTypeError

MAX_CONTENT_BYTES = 1024 * 1024
"""Default limit on the UTF-8 size of the content one event writes (1 MiB)."""

MAX_IDENTIFIER_CHARS = 256
"""Limit on other identifiers: event ids, keys, the names of the people and models behind a
write, and the names a search or a policy looks for."""

MAX_ACTOR_CHARS = 128
"""Limit on who writes: adapter names, producer task ids and run ids."""

ACTOR_CHARS = "ASCII letters, digits and ._:-/@"
"""The characters of an adapter name, producer task id or run id: printable ASCII only, so
two names that look alike are alike."""

MAX_POSITION = 2**63 - 1
"""The largest log position, count or row limit: SQLite's largest integer."""

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_NOT_ACTOR = re.compile(r"[^A-Za-z0-9._:\-/@]")


def utf8(name: str, value: str) -> bytes:
    """Return `value` as UTF-8, refusing strings that are not valid Unicode (lone surrogates)."""
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInputError(
            f"{name} is not valid Unicode: lone surrogate at index {exc.start}"
        ) from None


def check_content(name: str, value: object, *, max_bytes: int = MAX_CONTENT_BYTES) -> bytes:
    """Check free text (memory content, a fact's value) and return its UTF-8 bytes."""
    if not isinstance(value, str):
        raise InvalidTypeError(f"{name} must be str, not {type(value).__name__}")
    data = utf8(name, value)
    if len(data) > max_bytes:
        raise InvalidInputError(
            f"{name} is {len(data)} bytes of UTF-8; the limit is {max_bytes} bytes"
        )
    return data


def check_identifier(name: str, value: object, *, allow_empty: bool = False) -> str:
    """Check a short identifier (an event id, a key, a name searched for): no control
    characters, no surrounding whitespace. Who writes is checked by `check_actor`."""
    if not isinstance(value, str):
        raise InvalidTypeError(f"{name} must be str, not {type(value).__name__}")
    if not value:
        if allow_empty:
            return value
        raise InvalidInputError(f"{name} must not be empty")
    problem = _identifier_problem(value)
    if problem is not None:
        raise InvalidInputError(f"{name} {problem}")
    return value


@functools.lru_cache(maxsize=8192)
def _identifier_problem(value: str) -> str | None:
    """What is wrong with a non-empty identifier, or None. Identifiers recur, so this is
    memoized: the write path checks the same task, adapter and tag names over and over."""
    if len(value) > MAX_IDENTIFIER_CHARS:
        return f"is {len(value)} characters long; the limit is {MAX_IDENTIFIER_CHARS}"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"is not valid Unicode: lone surrogate at index {exc.start}"
    if _CONTROL.search(value):
        return "must not contain control characters or NUL"
    if value != value.strip():
        return "must not start or end with whitespace"
    return None


def check_optional_identifier(name: str, value: object) -> str | None:
    """Like `check_identifier`, but None passes; an empty string does not."""
    if value is None:
        return None
    return check_identifier(name, value)


def check_actor(name: str, value: object, *, allow_empty: bool = False) -> str:
    """Check who writes an event (an adapter name, a producer task id, a run id): 1 to
    `MAX_ACTOR_CHARS` characters from `ACTOR_CHARS`. Lookalikes (a zero-width space, a
    Cyrillic letter, a Unicode hyphen, a space) are refused, not normalized."""
    if not isinstance(value, str):
        raise InvalidTypeError(f"{name} must be str, not {type(value).__name__}")
    if not value:
        if allow_empty:
            return value
        raise InvalidInputError(f"{name} must not be empty")
    if len(value) > MAX_ACTOR_CHARS:
        raise InvalidInputError(
            f"{name} is {len(value)} characters long; the limit is {MAX_ACTOR_CHARS}"
        )
    outsider = _NOT_ACTOR.search(value)
    if outsider is not None:
        char = outsider.group()
        label = f"U+{ord(char):04X} {unicodedata.name(char, '')}".rstrip()
        raise InvalidInputError(
            f"{name} may hold only {ACTOR_CHARS}; {label} at index {outsider.start()} "
            "is not one of them"
        )
    return value


def check_optional_actor(name: str, value: object) -> str | None:
    """Like `check_actor`, but None passes; an empty string does not."""
    if value is None:
        return None
    return check_actor(name, value)


def check_position(name: str, value: object, *, minimum: int = 0) -> int:
    """Check a log position (or a count of events): an int, not a bool, at least `minimum`
    and at most `MAX_POSITION`."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidTypeError(f"{name} must be int, not {type(value).__name__}")
    if value < minimum:
        raise InvalidInputError(f"{name} must be at least {minimum}, got {value}")
    if value > MAX_POSITION:
        raise InvalidInputError(f"{name} must be at most {MAX_POSITION}, got {value}")
    return value


def check_positions(name: str, value: object) -> tuple[int, ...]:
    """Check a collection of log positions; return them sorted, without duplicates."""
    if value is None:
        return ()
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise InvalidTypeError(f"{name} must be a list of log positions")
    return tuple(sorted({check_position(f"{name} item", p, minimum=1) for p in value}))


def check_ts_ns(value: object) -> int:
    """Check a wall-clock timestamp in nanoseconds since the epoch."""
    return check_position("ts_ns", value)


def check_finite(name: str, value: object) -> float:
    """Check a finite real number (ints are accepted and converted)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidTypeError(f"{name} must be a number, not {type(value).__name__}")
    try:
        number = float(value)
    except OverflowError:
        raise InvalidInputError(f"{name} must be finite, got an int too big for a float") from None
    if not math.isfinite(number):
        raise InvalidInputError(f"{name} must be finite, got {value!r}")
    return number


DSN_SCHEMES = ("postgresql://", "postgres://")
"""How a PostgreSQL URI starts; any other target names a file."""


def is_dsn(target: object) -> TypeGuard[str]:
    """Whether `target` names a log in PostgreSQL (a `postgresql://` URI), not a file."""
    return isinstance(target, str) and target.startswith(DSN_SCHEMES)


def check_path(path: object) -> str:
    """A file path as text; refuses what no file system can name, before touching one."""
    if not isinstance(path, (str, os.PathLike)):
        raise InvalidTypeError(f"path must be str or os.PathLike[str], not {type(path).__name__}")
    text = os.fspath(path)
    if not isinstance(text, str):
        raise InvalidTypeError(f"path must be str or os.PathLike[str], not {type(text).__name__}")
    if "\x00" in text:
        raise InvalidInputError("path must not contain NUL")
    try:
        os.fsencode(text)
    except UnicodeEncodeError as exc:
        raise InvalidInputError(
            f"path is not valid Unicode: lone surrogate at index {exc.start}"
        ) from None
    return text
