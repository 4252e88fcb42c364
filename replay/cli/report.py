"""`factledger report`: an incident report on a suspect, one self-contained file."""

from __future__ import annotations

from pathlib import Path

import click

from eventlog import InvalidInputError
from replay.cli.app import EXIT_OK, Session, app
from replay.cli.audit import read_checkpoint
from replay.cli.files import replacing
from replay.cli.params import ENTRY_ID, NAME
from replay.report import DEFAULT_TOP, FORMATS, MAX_TOP


@app.command("report")
@click.option("--adapter", callback=NAME, help="the suspect source adapter")
@click.option("--task", callback=NAME, help="the suspect producer task id")
@click.option("--run", callback=NAME, help="the suspect run id")
@click.option(
    "--position", "positions", type=ENTRY_ID, multiple=True, help="a suspect position (repeatable)"
)
@click.option(
    "--depth", type=click.IntRange(min=1), help="follow descendants this many levels (default: all)"
)
@click.option(
    "--top",
    type=click.IntRange(min=1, max=MAX_TOP),
    default=DEFAULT_TOP,
    show_default=True,
    help="rows each list shows before it says how many more",
)
@click.option(
    "--checkpoint",
    "taken",
    metavar="FILE",
    help="a (signed) checkpoint taken earlier to prove against (default: one taken now)",
)
@click.option(
    "--key",
    metavar="FILE",
    help="without --checkpoint, sign the checkpoint taken now with this operator key "
    "(default: $FACTLEDGER_OPERATOR_KEY)",
)
@click.option(
    "--format", "form", type=click.Choice(FORMATS), default="html", show_default=True,
    help="html: one self-contained file; md: Markdown for a ticket",
)  # fmt: skip
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="file to write (default: standard output)",
)
@click.pass_obj
def report_(
    session: Session,
    adapter: str | None,
    task: str | None,
    run: str | None,
    positions: tuple[int, ...],
    depth: int | None,
    top: int,
    taken: str | None,
    key: str | None,
    form: str,
    out: Path | None,
) -> int:
    """An incident report on a suspect: summary, timeline, lineage graph, prompts reached,
    operator actions, and an inclusion proof for every event it cites.

    The HTML file needs no network and runs no script; open it in any browser, offline.
    Opens the log read-only.
    """
    if all(value in (None, ()) for value in (adapter, task, run, positions)):
        raise InvalidInputError(
            "report needs a selector: at least one of --adapter, --task, --run and --position"
        )
    if taken is not None and key is not None:
        raise click.UsageError("give --checkpoint or --key, not both")
    held = None if taken is None else read_checkpoint(taken)
    with session.ledger() as ledger:
        document = ledger.report(
            source_adapter=adapter,
            producer_task_id=task,
            run_id=run,
            positions=list(positions) or None,
            depth=depth,
            top=top,
            checkpoint=held,
            key=None if held is not None else session.operator_key(key),
            format="md" if form == "md" else "html",
        )
    if out is None:
        click.echo(document, nl=False)
        return EXIT_OK
    with replacing(out) as stream:
        stream.write(document)
    session.emit({"report": str(out), "bytes": len(document.encode())}, f"wrote {out}")
    return EXIT_OK
