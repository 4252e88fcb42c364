"""Conflict policy: policy set, approve, reject."""

from __future__ import annotations

import click

from eventlog import ON_CONFLICT
from projections.internal import (
    SCOPES,
)
from replay.cli.app import EXIT_OK, Session, app
from replay.cli.forensics import key_option
from replay.conflicts import policy_owners


@app.group("policy")
def policy() -> None:
    """Per-tag conflict policies for facts."""


@policy.command("set")
@click.argument("tag")
@click.option(
    "--on-conflict",
    type=click.Choice(ON_CONFLICT),
    required=True,
    help="what a version by an adapter that does not own the tag does",
)
@click.option(
    "--owner",
    "owners",
    metavar="ADAPTER",
    multiple=True,
    help="an adapter whose versions become current under deny or hold; repeat for more "
    "(default: the adapters the trust policy trusts, $FACTLEDGER_TRUST_ADAPTERS)",
)
@click.option("--scope", type=click.Choice(sorted(SCOPES)), help="only this scope (default: all)")
@key_option
@click.pass_obj
def policy_set(
    session: Session,
    tag: str,
    on_conflict: str,
    owners: tuple[str, ...],
    scope: str | None,
    key: str | None,
) -> int:
    """Set a tag's conflict policy: allow (last write wins), deny (a version by an adapter
    that does not own the tag is recorded, never current) or hold (pending until approve or
    reject), whoever wrote first. Versions written under no adapter (an operator's) count as
    an owner's. Signed once the log has an operator."""
    named = policy_owners(on_conflict, owners or None)
    with session.ledger(read_only=False) as ledger:
        position = ledger.set_conflict_policy(
            tag,
            on_conflict,
            owners=named,
            scope=scope,
            actor=session.actor(),
            key=session.operator_key(key),
        )
    shown = ""
    if named is not None:
        shown = f" (owners: {', '.join(named)})" if named else " (owners: operators only)"
    session.emit(
        {"policy_position": position, "owners": None if named is None else list(named)},
        f"policy recorded at position {position}{shown}",
    )
    return EXIT_OK


@app.command("approve")
@click.argument("position", type=click.IntRange(min=1))
@key_option
@click.pass_obj
def approve_(session: Session, position: int, key: str | None) -> int:
    """Approve a held fact version: it becomes current unless a later version already is."""
    with session.ledger(read_only=False) as ledger:
        done = ledger.approve(position, actor=session.actor(), key=session.operator_key(key))
    session.emit({"approval_position": done}, f"approval recorded at position {done}")
    return EXIT_OK


@app.command("reject")
@click.argument("position", type=click.IntRange(min=1))
@click.option("--reason", default="rejected by an operator", show_default=True, help="why")
@key_option
@click.pass_obj
def reject_(session: Session, position: int, reason: str, key: str | None) -> int:
    """Reject a held fact version: it never becomes current (history keeps it)."""
    with session.ledger(read_only=False) as ledger:
        done = ledger.reject(
            position, reason=reason, actor=session.actor(), key=session.operator_key(key)
        )
    session.emit({"rejection_position": done}, f"rejection recorded at position {done}")
    return EXIT_OK
