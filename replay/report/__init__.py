"""Incident reports: one self-contained HTML file (or Markdown for a ticket) that answers a
responder's questions about a suspect and carries its own proofs.

`report` builds the model (`replay.report.build`) and renders it (`replay.report.html`,
`replay.report.markdown`); `Ledger.report` is the same function.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Literal

from eventlog import InvalidInputError
from replay.checkpoints import Checkpoint
from replay.keys import KeySource
from replay.report.build import DEFAULT_TOP, MAX_TOP, build_report
from replay.report.html import render_html
from replay.report.markdown import render_markdown
from replay.report.model import IncidentReport, Mark, State

if TYPE_CHECKING:
    from replay.ledger import Ledger

Format = Literal["html", "md"]
FORMATS: tuple[Format, ...] = ("html", "md")

__all__ = [
    "DEFAULT_TOP",
    "FORMATS",
    "MAX_TOP",
    "Format",
    "IncidentReport",
    "Mark",
    "State",
    "build_report",
    "render_html",
    "render_markdown",
    "report",
]


def report(
    ledger: Ledger,
    *,
    source_adapter: str | None = None,
    producer_task_id: str | None = None,
    run_id: str | None = None,
    positions: Iterable[int] | None = None,
    depth: int | None = None,
    top: int = DEFAULT_TOP,
    checkpoint: Checkpoint | None = None,
    key: KeySource | None = None,
    format: Format = "html",
) -> str:
    """The incident report on a suspect as one document: self-contained HTML (`format="html"`)
    or Markdown (`"md"`). The selectors, `depth`, `top`, `checkpoint` and `key` are
    `build_report`'s. Only reads the log."""
    if format not in FORMATS:
        raise InvalidInputError(f"format must be one of {', '.join(FORMATS)}, not {format!r}")
    built = build_report(
        ledger,
        source_adapter=source_adapter,
        producer_task_id=producer_task_id,
        run_id=run_id,
        positions=positions,
        depth=depth,
        top=top,
        checkpoint=checkpoint,
        key=key,
    )
    return render_html(built) if format == "html" else render_markdown(built)
