"""Administering a PostgreSQL log: creating it with its roles (`init_schema`), binding and
removing agent logins (`add_agent`, `remove_agent`) and reading how it is set up (`setup`).
Each runs on a session of its own, as a role that may create roles and schemas; the SQL is
`eventlog.postgres_schema`'s, the rows a new log starts with go through the backend's append
(`eventlog.postgres.send_rows`).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from typing import NamedTuple

import psycopg

from eventlog import postgres_schema as schema
from eventlog.checks import MAX_CONTENT_BYTES
from eventlog.drafts import check_distinct_ids, prepare, seal
from eventlog.errors import InvalidTypeError, LogExistsError
from eventlog.events import NewEvent
from eventlog.formats import CURRENT
from eventlog.logs import get_logger
from eventlog.postgres import (
    CONNECT_TIMEOUT_S,
    SQL_SCHEMA,
    Connection,
    Statements,
    send_rows,
    translate,
)
from eventlog.postgres_schema import Roles

log = get_logger("factledger.eventlog")


def init_schema(
    dsn: str,
    *,
    role_prefix: str = schema.DEFAULT_ROLE_PREFIX,
    first_events: Callable[[str], Sequence[NewEvent]] | None = None,
) -> Roles:
    """Create the log (if absent) and its three group roles, and give each its privileges.

    The owner role owns the schema; the writer may INSERT and SELECT on the log and UPDATE
    the head; the reader may SELECT; PUBLIC gets nothing. Run it as a role that may create
    roles and schemas (a superuser, usually). Safe to run again: on an existing log it
    replaces the functions holding the log's rules with this version's. An agent login
    (`add_agent`) may append nothing until the log holds an `operator_added` event.

    With `first_events`, the log must be new: the events `first_events(log_id)` returns (its
    first operator's registration) are appended in the transaction that creates it, so no
    other session ever sees it without them. A log that exists already is `LogExistsError`,
    and nothing is changed.
    """
    names = schema.roles(role_prefix)

    def initialize(conn: Connection, name: str) -> None:
        with conn.transaction():
            schema.serialize_administration(conn)
            schema.create_group_roles(conn, names)
            log_id = str(uuid.uuid4())
            genesis = CURRENT.chain.genesis(log_id)
            created = schema.create(conn, name, log_id, genesis)
            if not created:
                schema.upgrade(conn, name)
            if first_events is not None:
                if not created:
                    raise LogExistsError(
                        f"schema {name} already holds a factledger log: its first events "
                        "were written when it was made; nothing was changed"
                    )
                _append_first(conn, name, genesis, first_events(log_id))
            schema.grant(conn, name, names)

    _administer(dsn, initialize, "initialize the log in")
    log.info("log_schema_initialized", owner=names.owner, writer=names.writer, reader=names.reader)
    return names


def _append_first(conn: Connection, name: str, genesis: bytes, events: Sequence[NewEvent]) -> None:
    """Append a new log's first events in the transaction that creates it."""
    prepared = [
        prepare(event, clock_ns=time.time_ns, max_content_bytes=MAX_CONTENT_BYTES)
        for event in events
    ]
    check_distinct_ids(prepared)
    rows, previous = [], genesis
    for position, item in enumerate(prepared, start=1):
        sealed = seal(item, position, previous)
        previous = sealed.chain_hash
        rows.append(sealed)
    if rows:
        send_rows(conn, Statements.for_schema(name), rows).check(f"PostgreSQL schema {name}")


def add_agent(
    dsn: str,
    role: str,
    adapter: str,
    *,
    role_prefix: str = schema.DEFAULT_ROLE_PREFIX,
    password: str | None = None,
) -> None:
    """Create the login role `role`, a writer whose appends the database refuses unless every
    event names `adapter` as its source adapter. A binding is never changed."""
    names = schema.roles(role_prefix)

    def bind(conn: Connection, name: str) -> None:
        with conn.transaction():
            schema.serialize_administration(conn)
            schema.bind_agent(conn, name, role, adapter, names, password)

    _administer(dsn, bind, "add an agent to")
    log.info("log_agent_added", role=role, adapter=adapter)


class RemovedAgent(NamedTuple):
    """What `remove_agent` did: the adapter the role was bound to, and the open sessions of
    the role it ended."""

    adapter: str
    sessions_ended: int


def remove_agent(
    dsn: str, role: str, *, role_prefix: str = schema.DEFAULT_ROLE_PREFIX
) -> RemovedAgent:
    """Remove agent login `role`: it may no longer log in (its password is dropped), it
    leaves the writer role, and its open sessions are ended. Its binding and every event it
    wrote stay in the log. A role that is no agent of the log, unknown, or already removed
    is `InvalidInputError`, and nothing changes."""
    names = schema.roles(role_prefix)
    removed: list[RemovedAgent] = []

    def unbind(conn: Connection, name: str) -> None:
        with conn.transaction():
            schema.serialize_administration(conn)
            adapter = schema.unbind_agent(conn, name, role, names)
        removed.append(RemovedAgent(adapter, schema.end_sessions(conn, role)))

    _administer(dsn, unbind, "remove an agent from")
    log.info("log_agent_removed", role=role, sessions_ended=removed[0].sessions_ended)
    return removed[0]


def setup(dsn: str, *, role_prefix: str = schema.DEFAULT_ROLE_PREFIX) -> schema.Setup:
    """How the log at `dsn` is set up: its head, its group roles, and each agent login with
    its adapter and whether it can still connect and write. Only reads."""
    names = schema.roles(role_prefix)
    found: list[schema.Setup] = []
    _administer(dsn, lambda conn, name: found.append(schema.setup(conn, name, names)), "read")
    return found[0]


def _administer(dsn: str, work: Callable[[Connection, str], None], action: str) -> None:
    """Run `work(connection, schema)` on a session of `dsn`, mapping errors to ours."""
    if not isinstance(dsn, str):
        raise InvalidTypeError(f"dsn must be str, not {type(dsn).__name__}")
    try:
        with psycopg.connect(dsn, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S) as conn:
            row = conn.execute(SQL_SCHEMA, (schema.DEFAULT_SCHEMA,)).fetchone()
            name = schema.check_name("schema", row[0] if row else None)
            work(conn, name)
    except psycopg.Error as exc:
        raise translate(exc, action, "PostgreSQL") from None
