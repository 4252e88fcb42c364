"""How the command line shows results: JSON, tables that fit the width, progress on stderr.

Nothing is ever cut short. A table fits its width: text columns wrap, and columns of single
tokens (ids, hashes, positions, times) stay whole on their lines; columns that do not fit
beside the others continue in a band below, its rows led again by the first column. A
struct's fields are `name  value` lines, a token too long to sit beside its name on the line
below it. Piped output is `$COLUMNS` wide when that is set, else tab-separated values.
Characters a reader cannot see are shown escaped.
"""

from __future__ import annotations

import contextlib
import datetime
import functools
import io
import os
import re
import sys
from collections.abc import Iterator, Sequence
from typing import Any, TextIO, TypeVar

import msgspec
from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.measure import Measurement
from rich.padding import Padding
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeRemainingColumn,
)
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

from projections import escape_invisible

PIPED_WIDTH = 100
"""Width `to_text` draws at when not told."""
TEXT_COLUMN_MIN = 16
"""The narrowest a wrapping text column becomes (or its header, if wider)."""
GAP = 2
"""Spaces between table columns."""
TIME_FIELDS_NS = frozenset(("ts_ns", "created_ns", "by_ts_ns"))
TIME_FIELDS_S = frozenset(("created_at",))
SHORT_TOKEN = 24
"""The longest string a list of names joined on one line may hold (longer ones: a line each)."""
LABELS = {"ts_ns": "time", "created_ns": "created", "by_ts_ns": "by_time"}
"""Labels for fields whose values are shown otherwise than their names say (nanoseconds
shown as local time)."""


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
    `columns`, default every field); piped without `$COLUMNS`, as tab-separated values."""
    width = _piped_width(sys.stdout)
    if not sys.stdout.isatty() and width is None:
        sys.stdout.write(to_tsv(value, columns) + "\n")
        return
    out = console(sys.stdout, width=width)
    with out.capture() as captured:
        out.print(renderable(value, out.width, columns))
    sys.stdout.write(_strip(captured.get()) + "\n")


def to_tsv(value: Any, columns: Sequence[str] | None = None) -> str:
    """`value` as tab-separated values: a list as a header line and one line per row, a
    struct's fields as `name<TAB>value` lines and its lists as titled tables. Cells are as
    `cell` shows them, so no cell holds a tab or a newline."""
    if isinstance(value, msgspec.Struct):
        return "\n".join(_struct_tsv(value))
    if isinstance(value, Sequence) and not isinstance(value, str):
        return "\n".join(_rows_tsv(list(value), columns))
    return cell(value)


def _rows_tsv(items: list[Any], columns: Sequence[str] | None = None) -> list[str]:
    if not items:
        return []
    names, cells = _cells(items, columns)
    return ["\t".join(label(name) for name in names), *("\t".join(row) for row in cells)]


def _struct_tsv(struct: msgspec.Struct) -> list[str]:
    scalars: list[str] = []
    nested: list[str] = []
    lists: list[str] = []
    for name in struct.__struct_fields__:
        field = getattr(struct, name)
        if _is_rows(field):
            lists += ["", f"{name} ({len(field)}):", *_rows_tsv(list(field))]
        elif isinstance(field, msgspec.Struct):
            nested += ["", f"{name}:", *_struct_tsv(field)]
        else:
            scalars.append(f"{label(name)}\t{_scalar(field, name)}")
    return [*scalars, *nested, *lists]


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
        width = _piped_width(stream) or PIPED_WIDTH
    return Console(
        file=stream, width=width, highlight=False, markup=False, emoji=False, soft_wrap=False
    )


def _piped_width(stream: TextIO) -> int | None:
    """`$COLUMNS` for output that is not a terminal, if it is set to a width; else None."""
    columns = os.environ.get("COLUMNS", "")
    if stream.isatty() or not columns.isdigit() or int(columns) <= 0:
        return None
    return int(columns)


class Bar:
    """A progress bar's handle: `bar(done, total)` moves it, `bar.phase(label)` starts the
    next phase of the work under its own label (counted anew, or pulsing until told)."""

    __slots__ = ("_progress", "_task")

    def __init__(self, progress: Progress, task: TaskID) -> None:
        self._progress = progress
        self._task = task

    def __call__(self, done: int, total: int) -> None:
        self._progress.update(self._task, completed=done, total=total)

    def phase(self, label: str) -> None:
        self._progress.remove_task(self._task)
        self._task = self._progress.add_task(label, total=None)
        self._progress.refresh()


@contextlib.contextmanager
def progress(label: str) -> Iterator[Bar]:
    """A progress bar on stderr while the block runs, labelled `label` until a phase
    renames it; it shows nothing when stderr is not a terminal and vanishes when done."""
    err = console(sys.stderr)
    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("events"),
        TimeRemainingColumn(),
        console=err,
        transient=True,
        disable=not err.is_terminal,
    )
    with bar:
        yield Bar(bar, bar.add_task(label, total=None))


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
    """Rows (Structs or dicts) as a table of `columns` (default: every field) that fits
    `width`: text columns wrap, token columns stay whole, and columns that do not fit
    continue in bands below, each led by the first column; '(none)' when empty."""
    if not items:
        return Text("(none)")
    names, cells = _cells(items, columns)
    texts = [any(_has_space(row[i]) for row in cells) for i in range(len(names))]
    widest = [min(width, _widest(label(name), cells, i)) for i, name in enumerate(names)]
    narrowest = [
        min(widest[i], max(TEXT_COLUMN_MIN, cell_len(label(name)))) if texts[i] else widest[i]
        for i, name in enumerate(names)
    ]
    drawn: list[RenderableType] = []
    for band in _bands(narrowest, width):
        drawn += [Text("")] if drawn else []
        sizes = _sizes(band, narrowest, widest, width)
        table = Table(box=None, padding=(0, GAP, 0, 0), pad_edge=False, collapse_padding=True)
        for i in band:
            table.add_column(Text(label(names[i])), width=sizes[i], overflow="fold")
        for row in cells:
            table.add_row(*(Wrapped(row[i]) for i in band))
        drawn.append(table)
    return drawn[0] if len(drawn) == 1 else Group(*drawn)


def _cells(
    items: Sequence[Any], columns: Sequence[str] | None
) -> tuple[list[str], list[list[str]]]:
    """The column names and each row's cells, as `cell` shows them."""
    dicts = [msgspec.structs.asdict(r) if isinstance(r, msgspec.Struct) else dict(r) for r in items]
    names = list(columns) if columns is not None else list(dicts[0])
    return names, [[cell(d.get(name), name) for name in names] for d in dicts]


def _bands(narrowest: list[int], width: int) -> list[list[int]]:
    """The columns of each band: as many as fit `width` side by side at their narrowest,
    in order; every band after the first is led by column 0 when it fits beside."""
    bands: list[list[int]] = []
    band: list[int] = []
    used = 0
    for i, size in enumerate(narrowest):
        if band and used + GAP + size > width:
            bands.append(band)
            band, used = [], 0
            if narrowest[0] + GAP + size <= width:
                band, used = [0], narrowest[0]
        used += (GAP if band else 0) + size
        band.append(i)
    return [*bands, band]


def _sizes(band: list[int], narrowest: list[int], widest: list[int], width: int) -> dict[int, int]:
    """Each column's width in a band: the room left after every column's narrowest goes to
    the columns that would take more, in proportion to what each would take."""
    spare = width - GAP * (len(band) - 1) - sum(narrowest[i] for i in band)
    wants = {i: widest[i] - narrowest[i] for i in band}
    asked = sum(wants.values())
    if asked <= spare:
        return {i: widest[i] for i in band}
    return {i: narrowest[i] + spare * wants[i] // asked for i in band}


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
    """A struct's scalar fields as `name  value` lines, then its nested structs (a summary)
    indented under their names, then its lists of rows as titled tables."""
    scalars: list[tuple[str, str]] = []
    nested: list[RenderableType] = []
    lists: list[RenderableType] = []
    for name in struct.__struct_fields__:
        field = getattr(struct, name)
        if _is_rows(field):
            title = f"{name} ({len(field)}):" if field else f"{name}: none"
            lists += [Text(f"\n{title}"), *([rows(list(field), width=width)] if field else [])]
        elif isinstance(field, msgspec.Struct):
            inner = Group(*_struct(field, width - 2))
            nested += [Text(f"\n{name}:"), Padding(inner, (0, 0, 0, 2))]
        else:
            scalars.append((label(name), _scalar(field, name)))
    return [*([Pairs(scalars)] if scalars else []), *nested, *lists]


def _is_rows(field: Any) -> bool:
    """Whether a field is a list of rows (or an empty list of anything but strings and
    numbers), drawn as a table."""
    return isinstance(field, list) and (not field or isinstance(field[0], msgspec.Struct))


def _scalar(field: Any, name: str) -> str:
    """A field shown on its `name  value` line: strings of a list joined by ', ' to wrap as
    one paragraph when each is a short token (names), else one per line (hashes, sentences)."""
    if isinstance(field, (list, tuple)) and not field:
        return "none"
    if isinstance(field, (list, tuple)) and all(isinstance(item, str) for item in field):
        short = all(len(item) <= SHORT_TOKEN and not _has_space(item) for item in field)
        joiner = ", " if short else "\n"
        return joiner.join(cell(item) for item in field)
    return cell(field, name)


def label(name: str) -> str:
    """The label a field is shown under (`LABELS`, else its name)."""
    return LABELS.get(name, name)


class Pairs:
    """`name  value` lines: names in a column, each value wrapped beside its name; a
    single token too long to sit beside it (a hash, an id) goes whole on the next line,
    indented, when it fits there."""

    __slots__ = ("_pairs",)

    def __init__(self, pairs: list[tuple[str, str]]) -> None:
        self._pairs = pairs

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = options.max_width
        names = min(max(cell_len(name) for name, _ in self._pairs), max(1, width // 2))
        room = max(1, width - names - GAP)
        for name, value in self._pairs:
            if not _has_space(value) and room < cell_len(value) <= width - GAP:
                yield Segment(name)
                yield Segment.line()
                lead, indent, lines = " " * GAP, " " * GAP, [Text(value)]
            else:
                lead = name + " " * (names + GAP - cell_len(name))
                indent = " " * (names + GAP)
                lines = list(Text(value).wrap(console, room, overflow="fold")) or [Text("")]
            for number, line in enumerate(lines):
                yield Segment(indent if number else lead)
                yield from line.render(console)
                yield Segment.line()


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
