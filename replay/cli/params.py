"""Option types and checks shared by commands, so a bad value is reported under the flag
the user typed (`Invalid value for '--tag': ...`), not a library parameter's name."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from eventlog import FactledgerError
from eventlog.checks import MAX_POSITION, check_actor, check_identifier
from projections.internal import (
    check_tag,
)


class Whole(click.ParamType[int, Any]):
    """A whole number from `minimum` to the largest log position."""

    name = "integer"

    def __init__(self, minimum: int) -> None:
        self.minimum = minimum

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        number: int = click.INT.convert(value, param, ctx)
        if number < self.minimum:
            self.fail(f"must be at least {self.minimum}, got {number}", param, ctx)
        if number > MAX_POSITION:
            self.fail(f"must be at most {MAX_POSITION}, got {number}", param, ctx)
        return number


LIMIT = Whole(1)
"""A row limit: at least 1."""
POSITION = Whole(0)
"""A log position, 0 for before the first event."""
ENTRY_ID = Whole(1)
"""A memory entry's id (the position of the event that wrote it)."""

Check = Callable[[str], object]


def checked(check: Check) -> Callable[[click.Context, click.Parameter, Any], Any]:
    """A click callback running `check` on the value (each value, for a repeated option),
    giving the command what `check` returns (a tag in NFC, say) and reporting its error as a
    bad value of that option."""

    def one(ctx: click.Context, param: click.Parameter, item: Any) -> Any:
        if item is None:
            return None
        try:
            return check(item)
        except FactledgerError as exc:
            raise click.BadParameter(str(exc), ctx=ctx, param=param) from None

    def callback(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
        if isinstance(value, tuple):
            return tuple(one(ctx, param, item) for item in value)
        return one(ctx, param, value)

    return callback


def _tag(value: str) -> object:
    return check_tag(value, name="the tag")


def _actor(value: str) -> object:
    return check_actor("the id", value)


def _name(value: str) -> object:
    return check_identifier("the name", value)


TAG = checked(_tag)
"""A tag: no comma, no invisible character (`projections.check_tag`)."""
ACTOR = checked(_actor)
"""A task or run id, or an adapter name a write is stamped with (`check_actor`)."""
NAME = checked(_name)
"""An adapter name or task id searched for (`check_identifier`)."""
