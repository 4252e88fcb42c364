"""PostgreSQL for the tests (a pytest plugin, loaded by tests/conftest.py): one server per run,
one schema (and its roles) per test.

The server is `FACTLEDGER_TEST_DSN` (default: postgres on 127.0.0.1:5432, as CI's machine
runs it). When none answers the PostgreSQL tests skip, or fail under `FACTLEDGER_REQUIRE_PG=1`.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit, urlunsplit

import pytest

if TYPE_CHECKING:
    import psycopg

DEFAULT_DSN = "postgresql://postgres@127.0.0.1:5432/postgres"


@dataclass(frozen=True)
class PgServer:
    """A reachable PostgreSQL server and a superuser DSN for it."""

    dsn: str

    def url(self, *, user: str | None = None, schema: str | None = None) -> str:
        """This server's DSN as another role, with the log in another schema."""
        parts = urlsplit(self.dsn)
        netloc = parts.netloc
        if user is not None:
            netloc = f"{quote(user)}@{netloc.rpartition('@')[2]}"
        query = parts.query
        if schema is not None:
            option = "options=" + quote(f"-c factledger.schema={schema}", safe="")
            query = f"{query}&{option}" if query else option
        return urlunsplit((parts.scheme, netloc, parts.path, query, ""))


@dataclass(frozen=True)
class PgLog:
    """One test's place on the server: its schema, its role prefix, and DSNs for both."""

    server: PgServer
    schema: str

    @property
    def dsn(self) -> str:
        """The superuser's DSN for this test's schema."""
        return self.server.url(schema=self.schema)

    @property
    def roles(self) -> str:
        """The role prefix for this test's `init_schema` (roles are cluster-wide)."""
        return self.schema

    def as_role(self, role: str) -> str:
        """This test's schema, reached as `role`."""
        return self.server.url(user=role, schema=self.schema)


@pytest.fixture(scope="session")
def pg_server() -> PgServer:
    psycopg = pytest.importorskip("psycopg", reason="psycopg is not installed")
    dsn = os.environ.get("FACTLEDGER_TEST_DSN") or DEFAULT_DSN
    try:
        psycopg.connect(dsn, connect_timeout=3).close()
    except psycopg.Error as exc:
        reason = f"no PostgreSQL server answers at {urlsplit(dsn).hostname}: {exc}".strip()
        if os.environ.get("FACTLEDGER_REQUIRE_PG") == "1":
            pytest.fail(f"FACTLEDGER_REQUIRE_PG=1 but {reason}", pytrace=False)
        pytest.skip(f"{reason} (set FACTLEDGER_TEST_DSN to run the PostgreSQL tests)")
    return PgServer(dsn)


def new_place(server: PgServer) -> PgLog:
    """A schema name (and role prefix) no other test uses."""
    return PgLog(server, f"fl_{uuid.uuid4().hex[:12]}")


@pytest.fixture
def pg(pg_server: PgServer) -> Iterator[PgLog]:
    """A fresh schema name for this test; the schema and roles it made are dropped after."""
    place = new_place(pg_server)
    yield place
    drop(place)


def end_sessions_in(admin: psycopg.Connection[Any], place: PgLog) -> None:
    """End every other session logged in as one of `place`'s roles or holding a lock in its
    schema (a test that failed mid-transaction)."""
    admin.execute(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
        " WHERE pid <> pg_backend_pid() AND usename LIKE %s",
        (place.roles + "%",),
    )
    admin.execute(
        "SELECT pg_terminate_backend(l.pid) FROM pg_locks l"
        " JOIN pg_class c ON c.oid = l.relation"
        " JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE n.nspname = %s AND l.pid <> pg_backend_pid()",
        (place.schema,),
    )


def drop(place: PgLog) -> None:
    """Drop `place`'s schema and roles, ending the sessions still in them first."""
    import psycopg

    from eventlog.postgres_schema import serialize_administration

    with psycopg.connect(place.server.dsn, autocommit=True) as admin:
        end_sessions_in(admin, place)
        with admin.transaction():
            serialize_administration(admin)
            admin.execute(f'DROP SCHEMA IF EXISTS "{place.schema}" CASCADE')
            for (role,) in admin.execute(
                "SELECT rolname FROM pg_roles WHERE rolname LIKE %s ORDER BY oid DESC",
                (place.roles + "%",),
            ).fetchall():
                admin.execute(f'DROP OWNED BY "{role}"')
                admin.execute(f'DROP ROLE "{role}"')
