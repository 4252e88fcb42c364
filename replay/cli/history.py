"""History: history, blame, diff, as-of. Each opens the log read-only."""

from __future__ import annotations

import datetime

import click

from projections import SCOPES, CrossTaskKB, environment
from replay.cli.app import EXIT_OK, Session, app
from replay.cli.memory import ENTRY_COLUMNS, FACT_COLUMNS, scope_option
from replay.history import blame, diff, history
from replay.timetravel import as_of

any_scope_option = click.option("--scope", type=click.Choice(sorted(SCOPES)), help="any if unset")


def time_ns(ctx: click.Context, param: click.Parameter, value: str | None) -> int | None:
    """An ISO 8601 time (local time if it names no offset) or integer nanoseconds."""
    if value is None or value.isdigit():
        return None if value is None else int(value)
    try:
        moment = datetime.datetime.fromisoformat(value)
    except ValueError:
        raise click.BadParameter(f"not an ISO 8601 time or nanoseconds: {value!r}") from None
    if moment.tzinfo is None:
        moment = moment.astimezone()
    return int(moment.timestamp() * 1e9)


@app.command("history")
@click.option("--tag", help="only facts under this tag")
@click.option("--key", help="only facts with this key")
@any_scope_option
@click.option("--run", help="the run of a run-scoped fact")
@click.pass_obj
def history_(
    session: Session, tag: str | None, key: str | None, scope: str | None, run: str | None
) -> int:
    """Every version of one fact or of all facts, with provenance."""
    session.emit(history(session.existing_db(), scope=scope, tag=tag, key=key, run_id=run))
    return EXIT_OK


@app.command("blame")
@click.option("--tag", help="only facts under this tag")
@any_scope_option
@click.option("--run", help="only facts of this run")
@click.pass_obj
def blame_(session: Session, tag: str | None, scope: str | None, run: str | None) -> int:
    """Which event, producer and adapter set each current fact."""
    session.emit(blame(session.existing_db(), scope=scope, tag=tag, run_id=run))
    return EXIT_OK


@app.command("diff")
@click.argument("from_position", metavar="FROM", type=int)
@click.argument("to_position", metavar="TO", type=int)
@click.option("--tag", help="only facts under this tag")
@click.pass_obj
def diff_(session: Session, from_position: int, to_position: int, tag: str | None) -> int:
    """Facts added, changed and removed between two positions."""
    session.emit(diff(session.existing_db(), from_position, to_position, tag=tag))
    return EXIT_OK


@app.command("as-of")
@click.option("--position", type=int, help="the state right after this position")
@click.option(
    "--at",
    metavar="TIME",
    callback=time_ns,
    help="the state at this time (ISO 8601 or nanoseconds)",
)
@click.option("--tag", help="show the facts under this tag (else memory entries)")
@scope_option
@click.option("--limit", type=int, default=20, show_default=True)
@click.pass_obj
def as_of_(
    session: Session,
    position: int | None,
    at: int | None,
    tag: str | None,
    scope: str,
    limit: int,
) -> int:
    """The knowledge base as it was at a position or time (give --position or --at)."""
    if (position is None) == (at is None):
        raise click.UsageError("give exactly one of --position and --at")
    with as_of(session.existing_db(), position=position, ts_ns=at) as view:
        if tag:
            kb = CrossTaskKB(view, run_id=environment.run_id())
            session.emit_rows(
                list(kb.subscribe(tag, scope=scope)),
                FACT_COLUMNS,
                f"no facts under tag {tag!r} then",
            )
        else:
            session.emit_rows(view.list(limit=limit), ENTRY_COLUMNS, "no entries then")
    return EXIT_OK
