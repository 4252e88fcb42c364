"""PostgreSQL: `pg init` creates the shared log and its roles; `pg add-agent` binds a login
role to one adapter, so the database itself refuses that role's writes under any other."""

from __future__ import annotations

from typing import Any, TextIO

import click
import msgspec

from eventlog.checks import check_actor
from replay.bootstrap import init_postgres
from replay.cli.app import EXIT_OK, Session, app
from replay.cli.bootstrap import made_text, operator_key_option
from replay.cli.output import note
from replay.keys import read_operator_key

NO_OPERATOR = (
    "the log has no operator key: agent logins can write nothing until one is registered "
    "(factledger operator add, or pg init --operator-key FILE on a new log)"
)


class OperatorRow(msgspec.Struct, frozen=True, kw_only=True):
    """An operator key as `pg status` shows it (`operator list` shows the rest)."""

    key_id: str
    name: str
    added_position: int
    removed_position: int | None


class PgStatus(msgspec.Struct, frozen=True, kw_only=True):
    """What `pg status` reports."""

    schema: str
    log_id: str
    format: str
    head_position: int
    head_chain_hash: str
    operators_enforced: bool
    roles: list[Any]
    """`eventlog.postgres_schema.GroupRole`: kind, name, whether it exists."""
    agents: list[Any]
    """`eventlog.postgres_schema.AgentLogin`: role, adapter, state, login, writer."""
    operators: list[OperatorRow]


@app.group("pg")
def pg() -> None:
    """Set up the log in PostgreSQL for many hosts (needs the `postgres` extra).

    Each command takes the server as --dsn postgresql://... (or FACTLEDGER_DSN), as every
    command does.
    """


@pg.command("init")
@click.option(
    "--role-prefix",
    metavar="PREFIX",
    default="factledger",
    show_default=True,
    help="names the owner, writer and reader roles PREFIX_owner, PREFIX_writer, PREFIX_reader",
)
@operator_key_option
@click.pass_obj
def init(session: Session, role_prefix: str, operator_key: str | None) -> int:
    """Create the log's schema, its owner, writer and reader roles (PUBLIC gets nothing),
    and its first event, which registers the key in --operator-key FILE.

    Agent logins (pg add-agent) can write nothing until the log has an operator key, and can
    never write operator actions. Run it as a role that may create roles and schemas. Safe
    to run again: on a log that exists it grants the roles' privileges again (with
    --operator-key, the key must be one of its operators).
    """
    key = None if operator_key is None else read_operator_key(operator_key)
    made = init_postgres(
        session.needs_dsn(), role_prefix=role_prefix, key=key, actor=session.actor()
    )
    roles = made.roles
    assert roles is not None
    session.emit(
        made,
        made_text(made, "PostgreSQL")
        + f"; roles: owner {roles['owner']}, writer {roles['writer']}, reader {roles['reader']}",
    )
    if not made.operators:
        note(NO_OPERATOR)
    return EXIT_OK


@pg.command("add-agent")
@click.argument("role")
@click.option("--adapter", metavar="NAME", required=True, help="the one adapter it may write as")
@click.option("--role-prefix", metavar="PREFIX", default="factledger", show_default=True)
@click.option(
    "--password-file",
    type=click.File("r"),
    help="read the role's password from this file (first line); without it the role has none",
)
@click.pass_obj
def add_agent(
    session: Session,
    role: str,
    adapter: str,
    role_prefix: str,
    password_file: TextIO | None,
) -> int:
    """Create login ROLE, a writer whose appends the database refuses unless every event
    names --adapter as its source adapter. A binding is never changed."""
    from eventlog.postgres_admin import add_agent as bind

    password = password_file.readline().rstrip("\n") if password_file is not None else None
    bind(
        session.needs_dsn(),
        role,
        check_actor("--adapter", adapter),
        role_prefix=role_prefix,
        password=password or None,
    )
    session.emit({"role": role, "adapter": adapter}, f"role {role} may write as {adapter} only")
    return EXIT_OK


@pg.command("remove-agent")
@click.argument("role")
@click.option("--role-prefix", metavar="PREFIX", default="factledger", show_default=True)
@click.pass_obj
def remove_agent(session: Session, role: str, role_prefix: str) -> int:
    """Remove agent login ROLE: it can no longer log in or write (its password, its writer
    membership and its open sessions end); its binding and every event it wrote stay in the
    log. Refuses a role that is not an agent of the log, and one already removed."""
    from eventlog.postgres_admin import remove_agent as unbind

    removed = unbind(session.needs_dsn(), role, role_prefix=role_prefix)
    session.emit(
        {"role": role, "adapter": removed.adapter, "sessions_ended": removed.sessions_ended},
        f"role {role} (adapter {removed.adapter}) can no longer log in or write; "
        f"{removed.sessions_ended} open session(s) ended; its events stay in the log",
    )
    return EXIT_OK


@pg.command("status")
@click.option("--role-prefix", metavar="PREFIX", default="factledger", show_default=True)
@click.pass_obj
def status(session: Session, role_prefix: str) -> int:
    """How the log in PostgreSQL is set up: its schema, log id and head, its owner, writer
    and reader roles, each agent login with its adapter and whether it can still connect
    and write, and the operator keys (read through this host's cache, --db)."""
    from eventlog.postgres_admin import setup

    found = setup(session.needs_dsn(), role_prefix=role_prefix)
    with session.ledger() as ledger:
        operators = ledger.operators()
    shown = PgStatus(
        schema=found.schema,
        log_id=found.log_id,
        format=found.format,
        head_position=found.head_position,
        head_chain_hash=found.head_chain_hash,
        operators_enforced=operators.enforced,
        roles=found.roles,
        agents=found.agents,
        operators=[
            OperatorRow(
                key_id=op.key_id,
                name=op.name,
                added_position=op.added_position,
                removed_position=op.removed_position,
            )
            for op in operators.operators
        ],
    )
    session.emit(shown)
    return EXIT_OK
