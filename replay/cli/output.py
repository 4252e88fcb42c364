"""How the command line shows results: JSON, tables that fit the width, progress on stderr.

Nothing is ever cut short. A table is drawn when its columns of single tokens (ids, hashes,
positions, times) fit whole beside its text columns, which wrap; otherwise each row is shown
as `name  value` lines, long values folded onto the next line. Piped output is
`$COLUMNS` (else 100) characters wide. Characters a reader cannot see are shown escaped.
"""

from __future__ import annotations

import contextlib
import datetime
import functools
import io
import os
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TextIO, TypeVar

import msgspec
from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.measure import Measurement
from rich.padding import Padding
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

from projections import escape_invisible

PIPED_WIDTH = 100
"""Width of output that goes to a file or a pipe when `$COLUMNS` does not say."""
TEXT_COLUMN_MIN = 16
"""The narrowest a wrapping text column may become before rows are shown one by one."""
GAP = 2
"""Spaces between table columns."""
TIME_FIELDS_NS = frozenset(("ts_ns", "created_ns", "by_ts_ns"))
TIME_FIELDS_S = frozenset(("created_at",))


def to_json(value: Any) -> str:
    """Indented JSON of a report (a Struct, a list of them, or plain data). Characters a
    reader cannot see are written as JSON `\\uXXXX` escapes: the same JSON, safe to show."""
    text = msgspec.json.format(msgspec.json.encode(value), indent=2).decode()
    return _NOT_PLAIN.sub(_json_escape, text)


def to_text(value: Any, *, width: int = PIPED_WIDTH) -> str:
    """Queryable text `width` columns wide: a struct's scalar fields as `name  value` lines,
    its lists as tables; a list as a table."""
    buffer = io.StringIO()
    console(buffer, width=width).print(renderable(value, width))
    return _strip(buffer.getvalue())


def show(value: Any, columns: Sequence[str] | None = None) -> None:
    """Print `value` readably to standard output, at its width (a list as a table of
    `columns`, default every field)."""
    out = console(sys.stdout)
    with out.capture() as captured:
        out.print(renderable(value, out.width, columns))
    sys.stdout.write(_strip(captured.get()) + "\n")


def show_json(value: Any) -> None:
    """Print `value` as JSON to standard output."""
    sys.stdout.write(to_json(value) + "\n")


def say(message: str) -> None:
    """Print a message to standard output as it is (invisible characters escaped)."""
    sys.stdout.write(escape_invisible(message) + "\n")


def note(message: str) -> None:
    """Tell the reader something about the output, on stderr (never mixed into results)."""
    sys.stderr.write(f"factledger: {cell(message)}\n")


S = TypeVar("S", bound=msgspec.Struct)


def cut(value: S, limit: int, *, newest: Sequence[str] = ()) -> tuple[S, list[str]]:
    """`value` with each of its list fields cut to `limit` items (the last ones for the
    fields named in `newest`, else the first), and `'<shown> of <all> <field>'` for each list
    that was cut."""
    changes: dict[str, Any] = {}
    cuts: list[str] = []
    for name in value.__struct_fields__:
        items = getattr(value, name)
        if isinstance(items, list) and len(items) > limit:
            changes[name] = items[-limit:] if name in newest else items[:limit]
            which = "newest" if name in newest else "first"
            cuts.append(f"the {which} {limit} of {len(items)} {name}")
    return msgspec.structs.replace(value, **changes), cuts


def note_cut(cuts: Sequence[str]) -> None:
    """Say on stderr which lists `cut` shortened, and how to see more."""
    if cuts:
        note(f"showing {', '.join(cuts)} (--limit N shows more)")


def console(stream: TextIO, *, width: int | None = None) -> Console:
    """A console for `stream`: the terminal's width on a terminal, else `$COLUMNS` or 100."""
    if width is None and not stream.isatty():
        columns = os.environ.get("COLUMNS", "")
        width = int(columns) if columns.isdigit() and int(columns) > 0 else PIPED_WIDTH
    return Console(
        file=stream, width=width, highlight=False, markup=False, emoji=False, soft_wrap=False
    )


@contextlib.contextmanager
def progress(label: str) -> Iterator[Callable[[int, int], None]]:
    """A progress bar on stderr while the block runs, called as `report(done, total)`;
    it shows nothing when stderr is not a terminal and vanishes when done."""
    err = console(sys.stderr)
    bar = Progress(
        TextColumn(label),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("events"),
        TimeRemainingColumn(),
        console=err,
        transient=True,
        disable=not err.is_terminal,
    )
    task = bar.add_task(label, total=None)

    def report(done: int, total: int) -> None:
        bar.update(task, completed=done, total=total)

    with bar:
        yield report


class Wrapped:
    """A value's text as rich draws a `Text`, wrapped to the space it gets, but handed over
    one line at a time. rich draws a `Text` as one segment holding every wrapped line, which
    a table then splits line by line, copying what is left at each line: quadratic in the
    value's size (a 4 MiB value took 8 s). Here each line is its own segments, so drawing
    takes time linear in the text."""

    __slots__ = ("_text",)

    def __init__(self, text: str) -> None:
        self._text = Text(text)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement.get(console, options, self._text)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        lines = self._text.wrap(
            console,
            options.max_width,
            justify=options.justify or "default",
            overflow=options.overflow or "fold",
            no_wrap=bool(options.no_wrap),
        )
        for line in lines:
            yield from line.render(console)
            yield Segment.line()


def renderable(value: Any, width: int, columns: Sequence[str] | None = None) -> RenderableType:
    """What rich draws for `value` in `width` columns."""
    if isinstance(value, msgspec.Struct):
        return Group(*_struct(value, width))
    if isinstance(value, Sequence) and not isinstance(value, str):
        return rows(list(value), columns, width=width)
    return Wrapped(cell(value))


def rows(
    items: Sequence[Any], columns: Sequence[str] | None = None, *, width: int
) -> RenderableType:
    """Rows (Structs or dicts) as a table of `columns` (default: every field), or one
    `name  value` block per row when the table cannot fit `width`; '(none)' when empty."""
    if not items:
        return Text("(none)")
    dicts = [msgspec.structs.asdict(r) if isinstance(r, msgspec.Struct) else dict(r) for r in items]
    names = list(columns) if columns is not None else list(dicts[0])
    cells = [[cell(d.get(name), name) for name in names] for d in dicts]
    texts = [any(_has_space(row[i]) for row in cells) for i in range(len(names))]
    needed = sum(
        min(TEXT_COLUMN_MIN, _widest(name, cells, i)) if text else _widest(name, cells, i)
        for i, (name, text) in enumerate(zip(names, texts, strict=True))
    )
    if needed + GAP * (len(names) - 1) > width:
        blocks: list[RenderableType] = []
        for row in cells:
            blocks += [Text("")] if blocks else []
            blocks.append(_pairs(list(zip(names, row, strict=True))))
        return Group(*blocks)
    table = Table(box=None, padding=(0, GAP, 0, 0), pad_edge=False)
    for name, text in zip(names, texts, strict=True):
        table.add_column(Text(name), no_wrap=not text, overflow="fold")
    for row in cells:
        table.add_row(*(Wrapped(value) for value in row))
    return table


def cell(value: Any, name: str = "") -> str:
    """One value for display on one line: times in local ISO time, lists joined by ', ',
    invisible characters (newlines included) escaped; never shortened."""
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
        return ", ".join(cell(item) for item in value)
    if isinstance(value, msgspec.Struct):
        return escape_invisible(msgspec.json.encode(value).decode(), keep_newlines=False)
    return escape_invisible(str(value), keep_newlines=False)


def local_time(seconds: float) -> str:
    """Epoch seconds as local ISO 8601 time, to the second, with the UTC offset."""
    moment = datetime.datetime.fromtimestamp(seconds, tz=datetime.UTC).astimezone()
    return moment.isoformat(timespec="seconds")


def _struct(struct: msgspec.Struct, width: int) -> list[RenderableType]:
    scalars: list[tuple[str, str]] = []
    sections: list[RenderableType] = []
    for name in struct.__struct_fields__:
        field = getattr(struct, name)
        if isinstance(field, (list, tuple)) and field and isinstance(field[0], msgspec.Struct):
            sections += [Text(f"\n{name} ({len(field)}):"), rows(list(field), width=width)]
        elif isinstance(field, (list, tuple)) and not field:
            sections.append(Text(f"\n{name}: none"))
        elif isinstance(field, msgspec.Struct):
            nested = Group(*_struct(field, width - 2))
            sections += [Text(f"\n{name}:"), Padding(nested, (0, 0, 0, 2))]
        elif isinstance(field, (list, tuple)) and all(isinstance(item, str) for item in field):
            scalars.append((name, "\n".join(cell(item) for item in field)))
        else:
            scalars.append((name, cell(field, name)))
    return [_pairs(scalars), *sections] if scalars else sections


def _pairs(pairs: list[tuple[str, str]]) -> Table:
    grid = Table.grid(padding=(0, GAP, 0, 0))
    grid.add_column(no_wrap=True)
    grid.add_column(overflow="fold")
    for name, value in pairs:
        grid.add_row(Text(name), Wrapped(value))
    return grid


def _widest(name: str, cells: list[list[str]], index: int) -> int:
    return max(cell_len(name), *(cell_len(row[index]) for row in cells))


def _has_space(text: str) -> bool:
    return _SPACE.search(text) is not None


_SPACE = re.compile(r"\s")
"""A character `str.isspace` calls whitespace (re's `\\s` on text is that very test)."""


_NOT_PLAIN = re.compile(r"[^\x20-\x7e\n]")
"""Characters outside printable ASCII (a JSON text's newlines are its own layout)."""


@functools.cache
def _json_escape_char(char: str) -> str:
    if escape_invisible(char, keep_newlines=False) == char:
        return char
    code = ord(char)
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    high, low = divmod(code - 0x10000, 0x400)
    return f"\\u{0xD800 + high:04x}\\u{0xDC00 + low:04x}"


def _json_escape(match: re.Match[str]) -> str:
    return _json_escape_char(match.group())


def _strip(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.rstrip("\n").split("\n"))
