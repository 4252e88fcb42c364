"""Forensics: blast-radius, quarantine, release, export, import-legacy, migrate."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from eventlog import InvalidInputError
from replay.cli import output
from replay.cli.app import EXIT_OK, Session, app
from replay.cli.files import replacing
from replay.cli.masking import raw_option, shown
from replay.cli.params import ENTRY_ID, LIMIT, NAME, POSITION
from replay.ledger import Ledger


def suspect_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """--adapter, --producer and --position: who or what is suspected."""
    command = click.option(
        "--position",
        "positions",
        type=ENTRY_ID,
        multiple=True,
        help="a suspect position (repeatable)",
    )(command)
    command = click.option("--producer", callback=NAME, help="the suspect producer task id")(
        command
    )
    return click.option("--adapter", callback=NAME, help="the suspect source adapter")(command)


def needs_suspect(command: str, *given: object) -> None:
    """Refuse a command that names no suspect."""
    if all(value in (None, ()) for value in given):
        raise InvalidInputError(
            f"{command} needs a selector: at least one of --adapter, --producer and --position"
        )


@app.command("blast-radius")
@suspect_options
@click.option("--run", callback=NAME, help="the suspect run id")
@click.option("--since", type=POSITION, help="only events after this position")
@click.option(
    "--limit", type=LIMIT, default=100, show_default=True, help="at most this many rows per list"
)
@click.option(
    "--depth", type=click.IntRange(min=1), help="follow descendants this many levels (default: all)"
)
@click.option(
    "--at",
    metavar="POSITION",
    type=POSITION,
    help="as it stood right after this position (folded from the nearest snapshot)",
)
@raw_option
@click.pass_obj
def blast_radius_(
    session: Session,
    adapter: str | None,
    producer: str | None,
    positions: tuple[int, ...],
    run: str | None,
    since: int | None,
    limit: int,
    depth: int | None,
    at: int | None,
    raw: bool,
) -> int:
    """What a suspect wrote, what is live, and which prompts it reached; personal data (in
    keys, tags and ids) masked unless --raw.

    Each list shows its first --limit rows; stderr says which lists were cut.
    """
    if run is None:
        needs_suspect("blast-radius", adapter, producer, positions)
    with session.ledger() as ledger:
        radius = ledger.blast_radius(
            source_adapter=adapter,
            producer_task_id=producer,
            run_id=run,
            positions=list(positions) or None,
            since_position=since,
            depth=depth,
            at=at,
        )
    session.emit_cut(shown(radius, raw), limit)
    return EXIT_OK


key_option = click.option(
    "--key",
    metavar="FILE",
    help="operator private key file to sign with (default: $FACTLEDGER_OPERATOR_KEY); "
    "needed once the log has an operator",
)


@app.command("quarantine")
@suspect_options
@click.option("--reason", required=True, help="why, recorded in the log")
@key_option
@click.pass_obj
def quarantine_(
    session: Session,
    adapter: str | None,
    producer: str | None,
    positions: tuple[int, ...],
    reason: str,
    key: str | None,
) -> int:
    """Keep a suspect's events from every reader (the log keeps them as evidence)."""
    needs_suspect("quarantine", adapter, producer, positions)
    with session.ledger(read_only=False) as ledger:
        position = ledger.quarantine(
            positions=list(positions) or None,
            producer_task_id=producer,
            source_adapter=adapter,
            reason=reason,
            actor=session.actor(),
            key=session.operator_key(key),
        )
    session.emit({"quarantine_position": position}, f"quarantine recorded at position {position}")
    return EXIT_OK


@app.command("release")
@click.argument("quarantine_position", type=ENTRY_ID)
@click.option("--reason", required=True, help="why, recorded in the log")
@key_option
@click.pass_obj
def release_(session: Session, quarantine_position: int, reason: str, key: str | None) -> int:
    """Undo a quarantine."""
    with session.ledger(read_only=False) as ledger:
        position = ledger.release(
            quarantine_position,
            reason=reason,
            actor=session.actor(),
            key=session.operator_key(key),
        )
    session.emit({"release_position": position}, f"release recorded at position {position}")
    return EXIT_OK


@app.command("export")
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="file to write (default: standard output)",
)
@click.option(
    "--fields",
    is_flag=True,
    help="also copy each event's envelope fields (kind, time, writer) beside its body",
)
@click.pass_obj
def export(session: Session, out: Path | None, fields: bool) -> int:
    """Write the raw log as JSON Lines, verifiable offline, each event once."""
    with session.ledger() as ledger:
        if out is None:
            with output.progress("exported") as progress:
                ledger.export(sys.stdout, progress=progress, fields=fields)
            return EXIT_OK
        with replacing(out) as stream, output.progress("exported") as progress:
            header = ledger.export(stream, progress=progress, fields=fields)
    session.emit(header, f"exported {header.events} events to {out}")
    return EXIT_OK


@app.command("import-legacy")
@click.argument("path")
@key_option
@click.pass_obj
def import_legacy_(session: Session, path: str, key: str | None) -> int:
    """Import the memory table of a database of the replaced store.

    The rows are written now, by the environment's task, run and adapter; each row's own
    fields are kept as claims, honoured only for an import signed by an operator key. An
    unsigned import (in a log with no operator) is trusted by no policy. A row holding a
    secret refuses the whole import, naming the row and the offset, unless
    FACTLEDGER_SECRETS is redact or allow.
    """
    new = session.creates_log()
    with session.ledger(read_only=False, create=True) as ledger:
        report = ledger.import_legacy(path, actor=session.actor(), key=session.operator_key(key))
    session.emit(report)
    if new:
        session.created_log()
    return EXIT_OK


@app.command("migrate")
@click.argument("old")
@click.argument("new")
@key_option
@click.pass_obj
def migrate_(session: Session, old: str, new: str, key: str | None) -> int:
    """Copy the format-v1 log file OLD into a new format-v2 log file NEW.

    NEW's first event is a statement, signed by --key (an operator key of OLD), of OLD's
    id, size and head chain value; OLD's events follow in order, their provenance kept as
    claims, positions one higher. OLD must verify and is only read: keep it, and check NEW
    against it with `factledger --db NEW verify --previous OLD`. NEW must not exist.
    """
    signer = session.operator_key(key)
    if signer is None:
        raise click.UsageError(
            "give an operator key of OLD with --key FILE or FACTLEDGER_OPERATOR_KEY"
        )
    with Ledger.open(old) as ledger:
        report = ledger.migrate(new, key=signer)
    session.emit(
        report,
        f"migrated {report.events} events of log {report.previous_log_id} into {report.target} "
        f"(log {report.log_id}; positions one higher)",
    )
    return EXIT_OK
