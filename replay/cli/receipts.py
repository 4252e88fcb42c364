"""Receipts: `receipts`, the reads made for a task or run, as their events record them."""

from __future__ import annotations

from typing import Any

import click
import msgspec

from projections import Receipt
from replay.cli import output
from replay.cli.app import EXIT_OK, Session, app
from replay.cli.masking import raw_option, shown
from replay.cli.params import LIMIT, NAME, POSITION

RECEIPT_COLUMNS = (
    "position",
    "ts_ns",
    "task_id",
    "run_id",
    "adapter",
    "tags",
    "shown",
    "kept_out",
    "head_position",
)


@app.command("receipts")
@click.option("--task", "task_id", callback=NAME, help="only reads for this task")
@click.option("--run", "run_id", callback=NAME, help="only reads for this run")
@click.option("--after", type=POSITION, default=0, help="only receipts after this position")
@click.option("--limit", type=LIMIT, default=100, show_default=True, help="at most this many")
@raw_option
@click.pass_obj
def receipts_(
    session: Session, task_id: str | None, run_id: str | None, after: int, limit: int, raw: bool
) -> int:
    """Show the receipts of reads, oldest first: who read, what was shown and kept out.

    Each read by an agent (a prompt, a query, an MCP tool) appended one. The table counts
    the positions shown and kept out; --json gives every receipt whole (positions, reasons,
    trust policy, rendered hash). Reads the log only; says on stderr when --limit cut the
    list.
    """
    with session.ledger() as ledger:
        found = ledger.receipts(task_id=task_id, run_id=run_id, after=after, limit=limit + 1)
    listed = found[:limit]
    session.emit_rows(
        shown([_row(receipt) for receipt in listed], raw),
        RECEIPT_COLUMNS,
        "no receipts",
        limit=limit,
        truncated=len(found) > limit,
    )
    if len(found) > limit:
        output.note(
            f"showing the first {limit} receipts; more follow (--after {listed[-1].position})"
        )
    return EXIT_OK


def _row(receipt: Receipt) -> dict[str, Any]:
    """A receipt whole, with how many positions it shows and keeps out."""
    return {
        **msgspec.structs.asdict(receipt),
        "shown": len(receipt.included),
        "kept_out": len(receipt.excluded),
    }
