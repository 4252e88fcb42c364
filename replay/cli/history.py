"""History: history, blame, diff, as-of. Each opens the log read-only.

`history` shows each version's trust under the reader's policy; run by an agent (an adapter
in FACTLEDGER_ADAPTER) it shows only the versions its policy trusts, and says on stderr how
many it kept out, unless --all.
"""

from __future__ import annotations

import datetime

import click

from eventlog import InvalidInputError
from projections import SCOPES, CrossTaskKB, environment
from replay.cli import output
from replay.cli.app import EXIT_OK, Session, app
from replay.cli.memory import ENTRY_COLUMNS, FACT_COLUMNS, Reader, all_option, scope_option
from replay.cli.params import LIMIT, NAME, POSITION, TAG
from replay.history import blame, diff, history
from replay.timetravel import as_of
from replay.trusted import marked_history

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
@click.option("--tag", callback=TAG, help="only facts under this tag")
@click.option("--key", help="only facts with this key")
@any_scope_option
@click.option("--run", callback=NAME, help="the run of a run-scoped fact")
@click.option(
    "--limit", type=LIMIT, default=100, show_default=True, help="show the newest this many"
)
@all_option
@click.pass_obj
def history_(
    session: Session,
    tag: str | None,
    key: str | None,
    scope: str | None,
    run: str | None,
    limit: int,
    show_all: bool,
) -> int:
    """Every version of one fact or of all facts, with provenance and trust.

    An agent (FACTLEDGER_ADAPTER set) sees the versions its trust policy trusts, and is told
    on stderr how many were kept out; --all shows every version. Shows the newest --limit
    versions, and says on stderr when it cut.
    """
    reader = Reader(session)
    found = history(session.log(), scope=scope, tag=tag, key=key, run_id=run, cache=session.cache())
    agent_view = reader.is_agent and not show_all
    marked = marked_history(found, reader.policy, trusted_only=agent_view)
    shown, cuts = output.cut(marked, limit, newest=("versions",))
    session.emit(shown)
    output.note_cut(cuts)
    if agent_view:
        reader.kept_out(marked.kept_out)
    return EXIT_OK


@app.command("blame")
@click.option("--tag", callback=TAG, help="only facts under this tag")
@any_scope_option
@click.option("--run", callback=NAME, help="only facts of this run")
@click.pass_obj
def blame_(session: Session, tag: str | None, scope: str | None, run: str | None) -> int:
    """Which event, producer and adapter set each current fact."""
    session.emit(blame(session.log(), scope=scope, tag=tag, run_id=run, cache=session.cache()))
    return EXIT_OK


@app.command("diff")
@click.argument("from_position", metavar="FROM", type=POSITION)
@click.argument("to_position", metavar="TO", type=POSITION)
@click.option("--tag", callback=TAG, help="only facts under this tag")
@click.option(
    "--limit", type=LIMIT, default=100, show_default=True, help="at most this many rows per list"
)
@click.pass_obj
def diff_(
    session: Session, from_position: int, to_position: int, tag: str | None, limit: int
) -> int:
    """Facts added, changed and removed between two positions.

    Each list shows its first --limit rows; stderr says which lists were cut.
    """
    if from_position > to_position:
        raise InvalidInputError(f"FROM ({from_position}) is after TO ({to_position})")
    found = diff(session.log(), from_position, to_position, tag=tag)
    shown, cuts = output.cut(found, limit)
    session.emit(shown)
    output.note_cut(cuts)
    return EXIT_OK


@app.command("as-of")
@click.option("--position", type=POSITION, help="the state right after this position")
@click.option(
    "--at",
    metavar="TIME",
    callback=time_ns,
    help="the state at this time (ISO 8601 or nanoseconds)",
)
@click.option("--tag", callback=TAG, help="show the facts under this tag (else memory entries)")
@scope_option
@click.option("--limit", type=LIMIT, default=20, show_default=True)
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
    with as_of(session.log(), position=position, ts_ns=at) as view:
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
