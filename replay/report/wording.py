"""What both renderings of a report say in the same words: times, the summary's rows, the
timeline's categories, the graph's marks."""

from __future__ import annotations

from datetime import UTC, datetime

from replay.report.model import IncidentReport, Mark

CATEGORIES = {
    "write": ("\N{BLACK SQUARE}", "suspect write"),
    "exposure": ("\N{BLACK UP-POINTING TRIANGLE}", "read that exposed a task"),
    "derived": ("\N{BLACK DIAMOND}", "derived write"),
    "operator": ("\N{BLACK CIRCLE}", "operator action"),
}
"""Each timeline category's symbol (its shape in grayscale) and name."""

MARK_SYMBOLS = {
    Mark.SUSPECT: "\N{BLACK SQUARE}",
    Mark.EXPOSED: "\N{BLACK UP-POINTING TRIANGLE}",
    Mark.TAINTED: "\N{BLACK DIAMOND}",
    Mark.PROMPT: "\N{WHITE CIRCLE}",
    Mark.QUARANTINED: "\N{DOUBLE VERTICAL LINE}",
    Mark.ERASED: "\N{MULTIPLICATION X}",
}


def when(ts_ns: int | None) -> str:
    """A time in UTC to the second, or `-`."""
    if ts_ns is None:
        return "-"
    moment = datetime.fromtimestamp(ts_ns / 1e9, UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def marks(values: tuple[Mark, ...]) -> str:
    """A node's marks as symbols and words (`◆ tainted, ‖ quarantined`)."""
    return ", ".join(f"{MARK_SYMBOLS[m]} {m.value}" for m in values)


def summary_rows(report: IncidentReport) -> list[tuple[str, str]]:
    """The summary as (label, value) rows, in reading order."""
    s = report.summary
    span = f"{when(s.first_ts_ns)} to {when(s.last_ts_ns)}"
    positions = "-" if s.first_position is None else f"{s.first_position} to {s.last_position}"
    return [
        ("suspect", s.suspect),
        ("time span", span),
        ("positions", f"{positions} (log head {s.head_position})"),
        ("events written", str(s.events_written)),
        *((f"{c.name}", str(c.count)) for c in s.states),
        ("prompts reached", str(s.prompts_reached)),
        ("prompts that kept it out", str(s.prompts_shielded)),
        ("exposed tasks", str(s.exposed_tasks)),
        ("descendants", str(s.descendants)),
        ("the suspect's own reads", str(s.suspect_reads)),
    ]
