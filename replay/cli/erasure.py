"""Erasure: `factledger erase`."""

from __future__ import annotations

import click

from eventlog import InvalidInputError
from replay.cli.app import EXIT_OK, Session, app
from replay.cli.forensics import key_option
from replay.cli.params import ENTRY_ID, NAME
from replay.erasure import DESCENDANTS, Erasure


@app.command("erase")
@click.argument("positions", type=ENTRY_ID, nargs=-1)
@click.option("--adapter", callback=NAME, help="erase every text this source adapter wrote")
@click.option("--task", callback=NAME, help="erase every text this producer task wrote")
@click.option("--run", callback=NAME, help="erase every text written in this run")
@click.option("--reason", required=True, help="why, recorded in the log (never the text)")
@key_option
@click.option(
    "--descendants",
    type=click.Choice(DESCENDANTS),
    default="quarantine",
    show_default=True,
    help="what was derived from the erased writes: quarantine it, erase it too, or leave it",
)
@click.option(
    "--depth", type=click.IntRange(min=1), help="follow descendants this many levels (default: all)"
)
@click.pass_obj
def erase_(
    session: Session,
    positions: tuple[int, ...],
    adapter: str | None,
    task: str | None,
    run: str | None,
    reason: str,
    key: str | None,
    descendants: str,
    depth: int | None,
) -> int:
    """Erase texts for good: the POSITIONs given, or every write of --adapter, --task or --run.

    An operator-signed event names the positions and the reason; the texts and their salts
    leave the log file (overwritten, write-ahead log truncated), the read model and every
    host's cache at its next catch-up, and later exports. Chain, checkpoints and proofs stay
    valid, and `verify` reports the erasure. On PostgreSQL the command says how to reclaim
    the dead tuples (VACUUM FULL). Needs an operator key of the log (--key or
    $FACTLEDGER_OPERATOR_KEY).
    """
    signer = session.operator_key(key)
    if signer is None:
        raise InvalidInputError(
            "erase needs an operator key of the log: give --key FILE or set "
            "FACTLEDGER_OPERATOR_KEY; nothing was written"
        )
    with session.ledger(read_only=False) as ledger:
        done = ledger.erase(
            list(positions) or None,
            source_adapter=adapter,
            producer_task_id=task,
            run_id=run,
            reason=reason,
            key=signer,
            descendants=next(d for d in DESCENDANTS if d == descendants),
            depth=depth,
            actor=session.actor(),
        )
    session.emit(done, describe(done))
    return EXIT_OK


def describe(done: Erasure) -> str:
    """What an erasure did, for a person at a shell."""
    count = len(done.erased)
    lines = [
        f"erased the text{'s' if count != 1 else ''} at {count} position"
        f"{'s' if count != 1 else ''}: {_listed(done.erased)}",
        f"erasure recorded at position {done.position}, signed by key {done.key_id}",
    ]
    if done.already_erased:
        lines.append(f"already erased before: {_listed(done.already_erased)}")
    if done.descendants:
        action = {
            "quarantine": f"quarantined at position {done.quarantine_position}",
            "erase": "erased with them",
            "none": "left as they are (--descendants none)",
        }[done.descendants_action]
        lines.append(f"derived from them: {_listed(done.descendants)}, {action}")
    else:
        lines.append("derived from them: nothing")
    if done.note:
        lines.append("note: " + done.note)
    return "\n".join(lines)


def _listed(positions: list[int], shown: int = 20) -> str:
    head = ", ".join(map(str, positions[:shown]))
    rest = len(positions) - shown
    return head + (f" and {rest} more (--json lists them all)" if rest > 0 else "")
