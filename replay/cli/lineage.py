"""Lineage: what a position was derived from and what was derived from it."""

from __future__ import annotations

import click

from replay.cli.app import EXIT_OK, Session, app


@app.command("lineage")
@click.argument("position", type=click.IntRange(min=1))
@click.option("--up", "direction", flag_value="up", help="only what it was derived from")
@click.option("--down", "direction", flag_value="down", help="only what was derived from it")
@click.option(
    "--depth", type=click.IntRange(min=1), help="at most this many levels each way (default: all)"
)
@click.pass_obj
def lineage_(session: Session, position: int, direction: str | None, depth: int | None) -> int:
    """Ancestors and descendants of a log position, level by level, from the recall
    receipts and the sources writers declared. Opens the log read-only."""
    with session.ledger() as ledger:
        found = ledger.lineage(
            position,
            direction="up" if direction == "up" else "down" if direction == "down" else "both",
            depth=depth,
        )
    session.emit(found)
    return EXIT_OK
