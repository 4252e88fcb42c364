"""Conflict policy: policy set, approve, reject."""

from __future__ import annotations

import click

from eventlog import ON_CONFLICT
from projections import SCOPES
from replay.cli.app import EXIT_OK, Session, app
from replay.cli.forensics import key_option
from replay.conflicts import approve, reject, set_conflict_policy


@app.group("policy")
def policy() -> None:
    """Per-tag conflict policies for facts."""


@policy.command("set")
@click.argument("tag")
@click.option(
    "--on-conflict",
    type=click.Choice(ON_CONFLICT),
    required=True,
    help="what an overwrite under another adapter than the current version's does",
)
@click.option("--scope", type=click.Choice(sorted(SCOPES)), help="only this scope (default: all)")
@key_option
@click.pass_obj
def policy_set(
    session: Session, tag: str, on_conflict: str, scope: str | None, key: str | None
) -> int:
    """Set a tag's conflict policy: allow (last write wins), deny (the overwrite is recorded,
    never current) or hold (pending until approve or reject). Signed once the log has an
    operator."""
    position = set_conflict_policy(
        session.log(),
        tag,
        on_conflict,
        scope=scope,
        actor=session.actor(),
        key=session.operator_key(key),
        cache=session.cache(),
    )
    session.emit({"policy_position": position}, f"policy recorded at position {position}")
    return EXIT_OK


@app.command("approve")
@click.argument("position", type=click.IntRange(min=1))
@key_option
@click.pass_obj
def approve_(session: Session, position: int, key: str | None) -> int:
    """Approve a held fact version: it becomes current unless a later version already is."""
    done = approve(
        session.log(),
        position,
        actor=session.actor(),
        key=session.operator_key(key),
        cache=session.cache(),
    )
    session.emit({"approval_position": done}, f"approval recorded at position {done}")
    return EXIT_OK


@app.command("reject")
@click.argument("position", type=click.IntRange(min=1))
@click.option("--reason", default="rejected by an operator", show_default=True, help="why")
@key_option
@click.pass_obj
def reject_(session: Session, position: int, reason: str, key: str | None) -> int:
    """Reject a held fact version: it never becomes current (history keeps it)."""
    done = reject(
        session.log(),
        position,
        reason=reason,
        actor=session.actor(),
        key=session.operator_key(key),
        cache=session.cache(),
    )
    session.emit({"rejection_position": done}, f"rejection recorded at position {done}")
    return EXIT_OK
