"""Personal data masked in what a command shows, unless --raw: one rule for every command
that shows stored text, so they cannot drift.

Every string in what the command shows is masked (`projections.redact_value`): values and
contents, and keys, tags, ids and reasons too, since an agent chose them. Numbers
(positions, times, counts) are never strings here, so they are never masked. The table and
the --json output show the same masked rows. Only the display changes: what is stored is
never touched, and `export` writes the log verbatim (it is data, not display).
"""

from __future__ import annotations

from typing import Any, TypeVar

import click
import msgspec

from projections import redact_value

Shown = TypeVar("Shown")

raw_option = click.option(
    "--raw",
    is_flag=True,
    help="show stored text verbatim (without: e-mail addresses, phone numbers, card numbers "
    "and SSNs are shown as [REDACTED])",
)


def shown(value: Shown, raw: bool) -> Shown:
    """`value` as a command shows it: unless `raw`, every string in it (in structs, dicts,
    lists and tuples, at any depth; dict keys are field names and kept) masked."""
    return value if raw else _masked(value)


def _masked(value: Any) -> Any:
    match value:
        case str():
            return redact_value(value)
        case msgspec.Struct():
            return msgspec.structs.replace(
                value, **{name: _masked(getattr(value, name)) for name in value.__struct_fields__}
            )
        case dict():
            return {key: _masked(item) for key, item in value.items()}
        case list():
            return [_masked(item) for item in value]
        case tuple():
            return tuple(_masked(item) for item in value)
        case _:
            return value
