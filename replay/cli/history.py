"""History: history, blame, diff, as-of. Each reads the log through a read-only `Ledger`.

Each row shows its trust under the reader's policy, judged now in the live read model
(`replay.trusted`). Run by an operator (no adapter) they show every row and write nothing.
Run by an agent (an adapter in FACTLEDGER_ADAPTER, or a PostgreSQL login bound to one) they
show only the rows its policy trusts and say on stderr how many they kept out, unless --all,
and each read is receipted, as the agent's reads over MCP are.
"""

from __future__ import annotations

import datetime
from typing import Any

import click

from eventlog import InvalidInputError
from projections import (
    CrossTaskKB,
    Fact,
    MemoryEntry,
)
from projections.internal import (
    SCOPES,
    reading,
)
from replay.cli.app import EXIT_OK, Session, app
from replay.cli.masking import raw_option, shown
from replay.cli.memory import (
    ENTRY_COLUMNS,
    FACT_COLUMNS,
    TRUST,
    CommandReader,
    all_option,
    scope_option,
)
from replay.cli.params import LIMIT, NAME, POSITION, TAG
from replay.erased import ErasedBy, erased_by
from replay.trusted import trusted_blame, trusted_diff, trusted_history

ERASED = "erased"
"""The column naming the erasure that removed a row's text since."""
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
@click.option(
    "--at",
    metavar="POSITION",
    type=POSITION,
    help="the history as it was right after this position (folded from the nearest snapshot)",
)
@all_option
@raw_option
@click.pass_obj
def history_(
    session: Session,
    tag: str | None,
    key: str | None,
    scope: str | None,
    run: str | None,
    limit: int,
    at: int | None,
    show_all: bool,
    raw: bool,
) -> int:
    """Every version of one fact or of all facts, with provenance and trust; personal data
    masked unless --raw.

    An agent (FACTLEDGER_ADAPTER set, or a login bound to an adapter) sees the versions its
    trust policy trusts (none tainted or quarantined), and is told on stderr how many were
    kept out; --all shows every version. An agent's read is receipted. Shows the newest
    --limit versions, and says on stderr when it cut.
    """
    reader = CommandReader(session)
    with session.ledger() as ledger:
        found = ledger.history(scope=scope, tag=tag, key=key, run_id=run, at=at)
    with reader.judging_store() as store:
        how = reader.reading(store, show_all)
        marked = trusted_history(found, store, how, tags=_tags(tag))
    session.emit_cut(shown(marked, raw), limit, newest=("versions",))
    reader.kept_out(marked.kept_out, show_all)
    return EXIT_OK


@app.command("blame")
@click.option("--tag", callback=TAG, help="only facts under this tag")
@any_scope_option
@click.option("--run", callback=NAME, help="only facts of this run")
@all_option
@raw_option
@click.pass_obj
def blame_(
    session: Session,
    tag: str | None,
    scope: str | None,
    run: str | None,
    show_all: bool,
    raw: bool,
) -> int:
    """Which event, producer and adapter set each current fact, with its trust; personal data
    masked unless --raw.

    An agent (FACTLEDGER_ADAPTER set, or a login bound to an adapter) sees the lines its
    trust policy trusts, and is told on stderr how many were kept out; --all shows every
    line. An agent's read is receipted.
    """
    reader = CommandReader(session)
    with session.ledger() as ledger:
        found = ledger.blame(scope=scope, tag=tag, run_id=run)
    with reader.judging_store() as store:
        marked = trusted_blame(found, store, reader.reading(store, show_all), tags=_tags(tag))
    session.emit(shown(marked, raw))
    reader.kept_out(marked.kept_out, show_all)
    return EXIT_OK


@app.command("diff")
@click.argument("from_position", metavar="FROM", type=POSITION)
@click.argument("to_position", metavar="TO", type=POSITION)
@click.option("--tag", callback=TAG, help="only facts under this tag")
@click.option(
    "--limit", type=LIMIT, default=100, show_default=True, help="at most this many rows per list"
)
@all_option
@raw_option
@click.pass_obj
def diff_(
    session: Session,
    from_position: int,
    to_position: int,
    tag: str | None,
    limit: int,
    show_all: bool,
    raw: bool,
) -> int:
    """Facts added, changed and removed between two positions, with their trust; personal
    data masked unless --raw.

    An agent (FACTLEDGER_ADAPTER set, or a login bound to an adapter) sees the changes whose
    values its trust policy trusts, and is told on stderr how many were kept out; --all
    shows every change. An agent's read is receipted. Each list shows its first --limit
    rows; stderr says which lists were cut.
    """
    if from_position > to_position:
        raise InvalidInputError(f"FROM ({from_position}) is after TO ({to_position})")
    reader = CommandReader(session)
    with session.ledger() as ledger:
        found = ledger.diff(from_position, to_position, tag=tag)
    with reader.judging_store() as store:
        marked = trusted_diff(found, store, reader.reading(store, show_all))
    session.emit_cut(shown(marked, raw), limit)
    reader.kept_out(marked.kept_out, show_all)
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
@all_option
@raw_option
@click.pass_obj
def as_of_(
    session: Session,
    position: int | None,
    at: int | None,
    tag: str | None,
    scope: str,
    limit: int,
    show_all: bool,
    raw: bool,
) -> int:
    """The knowledge base as it was at a position or time (give --position or --at);
    personal data masked unless --raw.

    Each row carries its trust as judged now. An agent (FACTLEDGER_ADAPTER set, or a login
    bound to an adapter) sees the rows its trust policy trusts, and is told on stderr how
    many were kept out; --all shows every row. An agent's read is receipted.
    """
    if (position is None) == (at is None):
        raise click.UsageError("give exactly one of --position and --at")
    reader = CommandReader(session)
    with session.ledger() as ledger:
        with ledger.as_of(position=position, ts_ns=at) as view:
            if tag:
                kb = CrossTaskKB(view, run_id=reader.identity.run_id)
                rows: list[Any] = list(kb.subscribe(tag, scope=scope))
            else:
                rows = view.list(limit=limit + 1)
        with ledger.at_head() as (snap, model):
            erased = erased_by(snap, model, [row.position for row in rows])
    truncated = not tag and len(rows) > limit
    rows = rows if tag else rows[:limit]
    with reader.judging_store() as store:
        found = reading.read(
            store,
            reader.reading(store, show_all),
            reading.judged_rows(rows, _then),
            tags=_tags(tag),
            limit=reading.NO_LIMIT if tag else limit,
            show=reading.shown_as_stored,
        )
    columns, empty = (
        (FACT_COLUMNS, f"no facts under tag {tag!r} then")
        if tag
        else (
            ENTRY_COLUMNS,
            "no entries then",
        )
    )
    session.emit_rows(
        shown(_erasures_shown(reader.marked(found.shown, found.trust), erased), raw),
        (*columns, TRUST, *((ERASED,) if erased else ())),
        empty,
        limit=None if tag else limit,
        truncated=truncated,
    )
    reader.kept_out(len(found.kept_out), show_all)
    return EXIT_OK


def _erasures_shown(
    rows: list[dict[str, Any]], erased: dict[int, ErasedBy]
) -> list[dict[str, Any]]:
    """`rows` of a past state, those whose text was erased since shown with the erasure
    instead of their (empty) text; when any was, every row has the erasure column."""
    if not erased:
        return rows
    marked = []
    for row in rows:
        by = erased.get(row["id"] if "id" in row else row["position"])
        text = "content" if "content" in row else "value"
        marked.append({**row, text: None if by else row[text], ERASED: by})
    return marked


def _tags(tag: str | None) -> tuple[str, ...]:
    return () if tag is None else (tag,)


def _then(row: Fact | MemoryEntry) -> list[reading.Judged]:
    """A row of a past state, judged now: a memory entry held to its event too."""
    entry = row if isinstance(row, MemoryEntry) else None
    return [reading.Judged(row.position, row.source_adapter, entry=entry)]
