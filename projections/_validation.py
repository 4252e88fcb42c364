"""Checks for the values the store and the knowledge base accept, with errors that name them."""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Literal

from eventlog.checks import MAX_POSITION, check_content, check_finite, check_identifier
from eventlog.errors import InvalidInputError, InvalidTypeError
from projections._lookalikes import check_one_script, normalized
from projections._secrets import SecretsMode, screened
from projections._visible import find_invisible

MemoryType = Literal[
    "convention", "decision", "learning", "episodic", "semantic", "procedural", "cross_task"
]
MEMORY_TYPES: frozenset[str] = frozenset(
    ("convention", "decision", "learning", "episodic", "semantic", "procedural", "cross_task")
)
Scope = Literal["run", "project"]
SCOPES: frozenset[str] = frozenset(("run", "project"))
MAX_TAG_CHARS = 200
MAX_TAGS = 64


def check_memory_type(value: object) -> str:
    """A memory type: one of MEMORY_TYPES."""
    if not isinstance(value, str):
        raise InvalidTypeError(f"type must be str, not {type(value).__name__}")
    if value not in MEMORY_TYPES:
        raise InvalidInputError(
            f"unknown memory type {value!r}; expected one of {', '.join(sorted(MEMORY_TYPES))}"
        )
    return value


def check_tag(value: object, *, name: str = "tag") -> str:
    """A tag, returned in Unicode NFC: non-empty, at most 200 characters, no comma, no
    control or other invisible character (`projections._visible`), no surrounding whitespace,
    letters of one script (`projections._lookalikes`). Any other Unicode is fine; `%` and `_`
    are ordinary characters."""
    if type(value) is str and len(value) <= MAX_TAG_CHARS:
        known = _good_tag(value)
        if known is not None:
            return known
    if not isinstance(value, str):
        raise InvalidTypeError(f"{name} must be str, not {type(value).__name__}")
    return _checked_tag(value, name)


def check_tags(value: object, *, name: str = "tags") -> tuple[str, ...]:
    """A list of tags (None or empty: no tags), each in NFC. Duplicates are dropped, order
    kept."""
    if value is None:
        return ()
    items = _sequence(value, name, "tag")
    tags = tuple(
        dict.fromkeys(check_tag(tag, name=f"{name}[{index}]") for index, tag in enumerate(items))
    )
    if len(tags) > MAX_TAGS:
        raise InvalidInputError(f"{name} has {len(tags)} distinct tags; the limit is {MAX_TAGS}")
    return tags


@functools.lru_cache(maxsize=8192)
def _good_tag(value: str) -> str | None:
    """The tag a string of at most `MAX_TAG_CHARS` names, or None if it is not a good tag.
    Remembered: the write path checks the same tags over and over."""
    try:
        return _checked_tag(value, "tag")
    except InvalidInputError:
        return None


def _checked_tag(value: str, name: str) -> str:
    """`value` in NFC, or an error for the first rule of `check_tag` it breaks."""
    value = normalized(value)
    if not value.strip():
        raise InvalidInputError(f"{name} must be a non-empty string")
    if len(value) > MAX_TAG_CHARS:
        raise InvalidInputError(
            f"{name} is {len(value)} characters long; the limit is {MAX_TAG_CHARS}"
        )
    if "," in value:
        raise InvalidInputError(f"{name} must not contain ',': {value!r}")
    _check_name(name, value)
    return value


def check_scope(value: object) -> str:
    """A fact scope: 'run' or 'project'."""
    if not isinstance(value, str):
        raise InvalidTypeError(f"scope must be str, not {type(value).__name__}")
    if value not in SCOPES:
        raise InvalidInputError(f"scope must be one of ['project', 'run'], got {value!r}")
    return value


def check_key(value: object) -> str:
    """A fact key, returned in Unicode NFC: a non-empty identifier within its tag, and like
    a tag free of invisible characters and of mixed scripts, so two keys that print alike
    are alike. Any other Unicode is fine."""
    if not isinstance(value, str):
        raise InvalidTypeError(f"key must be str, not {type(value).__name__}")
    value = normalized(value)
    if not value.strip():
        raise InvalidInputError("key must be a non-empty string")
    _check_name("key", value)
    return value


def _check_name(name: str, value: str) -> None:
    """What tags and keys share: an identifier (`check_identifier`) with no invisible
    character, whose letters are of one script (`projections._lookalikes`)."""
    check_identifier(name, value)
    hidden = find_invisible(value)
    if hidden is not None:
        raise InvalidInputError(
            f"{name} must not contain invisible characters: U+{ord(value[hidden]):04X} at "
            f"index {hidden}"
        )
    check_one_script(name, value)


def check_text(name: str, value: object, *, secrets: SecretsMode) -> str:
    """Text a write records (memory content, a fact's value), as it records it: a str within
    the size limit (`eventlog.checks.check_content`) with something besides whitespace in
    it, screened for secrets in mode `secrets` (`projections._secrets.screened`: refused,
    redacted or allowed). Every write path calls this, so blank text and refused secrets
    are refused before anything is written, and a redacted text is what gets hashed."""
    if not isinstance(value, str):
        raise InvalidTypeError(f"{name} must be str, not {type(value).__name__}")
    check_content(name, value)
    if not value.strip():
        raise InvalidInputError(f"{name} is empty or only whitespace; nothing was written")
    text = screened(name, value, secrets)
    if text is not value:
        check_content(f"{name} with its secrets redacted", text)
    return text


def check_limit(value: object, *, name: str = "limit") -> int:
    """A row limit: a positive int that SQLite can hold."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidTypeError(f"{name} must be int, not {type(value).__name__}")
    if value < 1:
        raise InvalidInputError(f"{name} must be at least 1, got {value}")
    if value > MAX_POSITION:
        raise InvalidInputError(f"{name} must be at most {MAX_POSITION}, got {value}")
    return value


def check_importance(value: object) -> float:
    """An importance between 0.0 and 1.0."""
    number = check_finite("importance", value)
    if not 0.0 <= number <= 1.0:
        raise InvalidInputError(f"importance must be between 0.0 and 1.0, got {value!r}")
    return number


def check_allow_list(value: object) -> tuple[str, ...] | None:
    """`read_only_from_adapters`: None (no filter) or a list of adapter names ([] allows none)."""
    if value is None:
        return None
    items = _sequence(value, "read_only_from_adapters", "adapter name")
    return tuple(
        check_identifier(f"read_only_from_adapters[{i}]", item) for i, item in enumerate(items)
    )


def _sequence(value: object, name: str, item: str) -> list[object]:
    if type(value) is list or type(value) is tuple:
        return list(value)
    if isinstance(value, (str, bytes)):
        raise InvalidTypeError(f"{name} must be a list of {item}s, not a single {item} string")
    if not isinstance(value, Iterable):
        raise InvalidTypeError(f"{name} must be a list of {item}s, not {type(value).__name__}")
    return list(value)
