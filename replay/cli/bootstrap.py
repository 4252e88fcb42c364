"""`factledger init`: a new log in a file, with its first operator key in one step."""

from __future__ import annotations

import click

from replay.bootstrap import LogMade, init_log
from replay.cli.app import EXIT_OK, Session, app
from replay.cli.output import note
from replay.keys import read_operator_key
from replay.operators import OPEN

operator_key_option = click.option(
    "--operator-key",
    metavar="FILE",
    help="the private key file (factledger keygen) to register as the log's first operator, "
    "in the step that creates it",
)


@app.command("init")
@operator_key_option
@click.pass_obj
def init(session: Session, operator_key: str | None) -> int:
    """Create a new log in --db, its first event registering --operator-key FILE.

    With the key, no one can ever act as the log's operator without it: a log made without
    one is open until someone runs `operator add`, and the first to do so becomes its
    operator. A file holding the replaced store's memory table gets its rows imported,
    signed by the key. On a file that holds a log, nothing is written (with --operator-key,
    the key must be one of its operators).
    """
    if session.log_dsn() is not None:
        raise click.UsageError("a log in PostgreSQL is made by `factledger pg init`")
    key = None if operator_key is None else read_operator_key(operator_key)
    made = init_log(session.db, key=key, actor=session.actor())
    session.emit(made, made_text(made, session.db))
    if not made.operators:
        note(OPEN)
    return EXIT_OK


def made_text(made: LogMade, where: str) -> str:
    """What `init` and `pg init` say they found or made."""
    text = f"{'created' if made.created else 'found'} the factledger log {made.log_id} in {where}"
    if made.operator_key_id is not None:
        registered = "registered at position 1" if made.created else "is one of its operators"
        text += f"; operator key {made.operator_key_id} {registered}"
    if made.imported is not None:
        text += (
            f"; imported {made.imported.imported} legacy rows, signed (positions "
            f"{made.imported.first_position} to {made.imported.last_position})"
        )
    return text
