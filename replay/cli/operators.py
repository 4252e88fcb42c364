"""Operators: `operator add`, `operator remove`, `operator list`."""

from __future__ import annotations

import click

from replay.cli.app import EXIT_OK, Session, app

OPERATOR_COLUMNS = (
    "key_id",
    "name",
    "added_position",
    "added_by_key",
    "added_by_producer",
    "removed_position",
    "removed_by_key",
)

key_option = click.option(
    "--key",
    metavar="FILE",
    help="operator private key file to sign with (default: $FACTLEDGER_OPERATOR_KEY)",
)


@app.group("operator")
def operator() -> None:
    """The operator keys that sign quarantines, releases, imports and operator changes.

    Until a key is added, any local user can act as operator. The first key added signs its
    own registration; later changes are signed by an operator key.
    """


@operator.command("add")
@click.argument("public_key", metavar="PUBFILE")
@key_option
@click.pass_obj
def add(session: Session, public_key: str, key: str | None) -> int:
    """Register the public key in PUBFILE as an operator key.

    The first key of a log is added with its own private key (--key); later ones with the
    private key of an operator key.
    """
    signer = session.operator_key(key)
    if signer is None:
        raise click.UsageError("give the signing key with --key FILE or FACTLEDGER_OPERATOR_KEY")
    with session.ledger(read_only=False) as ledger:
        position = ledger.add_operator(public_key, key=signer, actor=session.actor())
    session.emit(
        {"position": position},
        f"operator key from {public_key} added at position {position}, signed by "
        f"{signer.key_id} ({signer.name})",
    )
    return EXIT_OK


@operator.command("remove")
@click.argument("key_id", metavar="KEYID")
@click.option("--reason", required=True, help="why, recorded in the log")
@key_option
@click.pass_obj
def remove(session: Session, key_id: str, reason: str, key: str | None) -> int:
    """Stop the operator key KEYID authorizing anything from now on (what it signed before
    stands). The last key cannot be removed."""
    signer = session.operator_key(key)
    if signer is None:
        raise click.UsageError("give the signing key with --key FILE or FACTLEDGER_OPERATOR_KEY")
    with session.ledger(read_only=False) as ledger:
        position = ledger.remove_operator(key_id, key=signer, reason=reason, actor=session.actor())
    session.emit({"position": position}, f"operator key {key_id} removed at position {position}")
    return EXIT_OK


@operator.command("list")
@click.pass_obj
def list_(session: Session) -> int:
    """Each operator key: its id, name, and when and by whom it was added and removed."""
    with session.ledger() as ledger:
        found = ledger.operators()
    if session.as_json:
        session.emit(found)
        return EXIT_OK
    session.emit_rows(found.operators, OPERATOR_COLUMNS, found.note)
    if found.operators:
        session.emit(found.note, found.note)
    return EXIT_OK
