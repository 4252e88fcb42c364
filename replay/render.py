"""Reports as JSON or as readable text: aligned tables, truncated values, local ISO times."""

from __future__ import annotations

import datetime
import re
from collections.abc import Sequence
from typing import Any

import msgspec

MAX_CELL = 48
MAX_LINE = 400
"""Longest value shown on a `name: value` line (a table cell gets MAX_CELL)."""
TIME_FIELDS_NS = frozenset(("ts_ns", "created_ns", "by_ts_ns"))
TIME_FIELDS_S = frozenset(("created_at",))


def to_json(value: Any) -> str:
    """Indented JSON of a report (a Struct, a list of them, or plain data)."""
    return msgspec.json.format(msgspec.json.encode(value), indent=2).decode()


def to_text(value: Any) -> str:
    """Readable text: a struct's scalar fields as `name: value` lines, its lists as tables."""
    if isinstance(value, msgspec.Struct):
        return _struct_text(value)
    if isinstance(value, Sequence) and not isinstance(value, str):
        return table(list(value))
    return cell(value)


def _struct_text(struct: msgspec.Struct) -> str:
    scalars: list[tuple[str, str]] = []
    sections: list[str] = []
    for name in struct.__struct_fields__:
        field = getattr(struct, name)
        if isinstance(field, (list, tuple)) and field and isinstance(field[0], msgspec.Struct):
            sections.append(f"\n{name} ({len(field)}):\n{table(list(field))}")
        elif isinstance(field, (list, tuple)) and not field:
            sections.append(f"\n{name}: none")
        elif isinstance(field, msgspec.Struct):
            sections.append(f"\n{name}:\n" + _indent(_struct_text(field)))
        else:
            scalars.append((name, cell(field, name, width=MAX_LINE)))
    width = max((len(name) for name, _ in scalars), default=0)
    lines = [f"{name.ljust(width)}  {text}" for name, text in scalars]
    return "\n".join(lines) + "".join(sections)


def table(rows: Sequence[Any], columns: Sequence[str] | None = None) -> str:
    """Rows (Structs or dicts) as a table with aligned columns; '(none)' when empty."""
    if not rows:
        return "(none)"
    dicts = [msgspec.structs.asdict(r) if isinstance(r, msgspec.Struct) else dict(r) for r in rows]
    names = list(columns) if columns is not None else list(dicts[0])
    cells = [[cell(d.get(name), name) for name in names] for d in dicts]
    widths = [max(len(name), *(len(row[i]) for row in cells)) for i, name in enumerate(names)]
    lines = ["  ".join(n.ljust(w) for n, w in zip(names, widths, strict=True)).rstrip()]
    lines += [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells
    ]
    return "\n".join(lines)


def cell(value: Any, name: str = "", *, width: int = MAX_CELL) -> str:
    """One value for display: times in local ISO time, long text truncated to one line."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if name in TIME_FIELDS_NS and isinstance(value, int):
        return local_time(value / 1e9)
    if name in TIME_FIELDS_S and isinstance(value, (int, float)):
        return local_time(float(value))
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, (list, tuple)):
        text = ",".join(cell(v) for v in value)
    elif isinstance(value, msgspec.Struct):
        text = msgspec.json.encode(value).decode()
    else:
        text = str(value)
    text = _CONTROL.sub(_escape, text)
    return text if len(text) <= width else text[: width - 1] + "…"


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match[str]) -> str:
    """Control characters shown as escapes, so stored text cannot drive the terminal."""
    char = match.group()
    return _NAMED.get(char, f"\\x{ord(char):02x}")


def local_time(seconds: float) -> str:
    """Epoch seconds as local ISO 8601 time, to the second, with the UTC offset."""
    moment = datetime.datetime.fromtimestamp(seconds, tz=datetime.UTC).astimezone()
    return moment.isoformat(timespec="seconds")


def _indent(text: str) -> str:
    return "\n".join("  " + line for line in text.splitlines())
