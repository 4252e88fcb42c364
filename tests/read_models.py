"""The read-side contract: the read models a store runs over (a pytest plugin, loaded by
tests/conftest.py), as `eventlog.contract.LogContract` is the contract every log backend runs.

A module marked `pytestmark = pytest.mark.read_models` runs each of its tests that opens a
store (through the `store`, `make_store` or `read_model` fixtures) once per read model:

- `one-file`: the log and the read model share one SQLite file (one host, the default);
- `sqlite-log`: a host's cache over a log in another SQLite file;
- `postgres-log`: a host's cache over a PostgreSQL log (`tests/postgres.py`). Creating and
  dropping a schema per test was most of these tests' time, so they take turns on one
  schema, emptied into a new log (a new log id, its genesis at the head) before each
  (`SharedSchema`).

Every other test opens the one-file model only. A test that opens a view or runs a `replay`
command asks `read_model` where the log is.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from eventlog import open_log
from eventlog.chain import SHA256
from projections import SQLiteMemoryStore
from tests.postgres import PgLog, PgServer, drop, end_sessions_in, new_place

READ_MODELS = ("one-file", "sqlite-log", "postgres-log")


@dataclass(frozen=True)
class ReadModelUnderTest:
    """Where one test's log is, and how a store over it is opened."""

    log: str | Path | None
    """The log held elsewhere (a SQLite file or a DSN), or None when it shares the store's
    file."""

    def open(self, path: str | os.PathLike[str], **options: Any) -> SQLiteMemoryStore:
        """A store whose read model is `path` (its one file, or this host's cache)."""
        return SQLiteMemoryStore(path, log=self.log, **options)

    def where(
        self, path: str | os.PathLike[str]
    ) -> tuple[str | os.PathLike[str], str | os.PathLike[str] | None]:
        """The log and the cache (None in one file) of the store whose read model is `path`,
        as `replay`'s commands take them."""
        return (path, None) if self.log is None else (self.log, path)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "read_model" in metafunc.fixturenames and metafunc.definition.get_closest_marker(
        "read_models"
    ):
        metafunc.parametrize("read_model", READ_MODELS, indirect=True)


@pytest.fixture
def read_model(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ReadModelUnderTest]:
    """The read model this test runs over: the one-file model unless its module is marked
    `read_models`."""
    name = getattr(request, "param", "one-file")
    if name == "one-file":
        yield ReadModelUnderTest(None)
    elif name == "sqlite-log":
        yield ReadModelUnderTest(tmp_path / "remote" / "log.db")
    else:
        assert "postgres-log" == name
        shared: SharedSchema = request.getfixturevalue("pg_shared_schema")
        yield ReadModelUnderTest(shared.renew())
        shared.check()


class SharedSchema:
    """One PostgreSQL schema the `postgres-log` tests take turns on.

    `renew` makes it a new, empty log as creating a schema would: the rows of every table
    but `meta` and `head` deleted, a new log id, the head at that id's genesis. `check`,
    after each test, fails it if the meta rows are no longer the ones creating the log
    wrote, and closing fails if the tables changed: state `renew` does not know of would
    leak from one test into the next.
    """

    def __init__(self, place: PgLog) -> None:
        import psycopg

        self.place = place
        open_log(place.dsn).close()
        self._admin = psycopg.connect(place.server.dsn, autocommit=True)
        self._tables = self._table_names()
        self._meta = self._meta_rows()

    def renew(self) -> str:
        """Empty the schema into a new log; return its DSN."""
        end_sessions_in(self._admin, self.place)
        schema, log_id = self.place.schema, str(uuid.uuid4())
        with self._admin.transaction():
            self._admin.execute("SET LOCAL session_replication_role = replica")
            for table in sorted(self._tables - {"meta", "head"}):
                self._admin.execute(f'DELETE FROM "{schema}"."{table}"')
            self._admin.execute(
                f'UPDATE "{schema}".meta SET value = %s WHERE name = %s', (log_id, "log_id")
            )
            self._admin.execute(
                f'UPDATE "{schema}".head SET position = 0, chain_hash = %s',
                (SHA256.genesis(log_id),),
            )
        return self.place.dsn

    def check(self) -> None:
        """Fail unless the meta rows (but the log id) are the ones creating the log wrote."""
        if self._meta_rows() != self._meta:
            pytest.fail(self._unknown("meta rows"), pytrace=False)

    def close(self) -> None:
        """Drop the schema, failing first if its tables changed since it was created."""
        try:
            if self._table_names() != self._tables:
                pytest.fail(self._unknown("tables"), pytrace=False)
        finally:
            self._admin.close()
            drop(self.place)

    def _unknown(self, what: str) -> str:
        return (
            f"schema {self.place.schema} holds {what} that creating a log does not make, "
            "which SharedSchema.renew does not reset: teach it them"
        )

    def _table_names(self) -> frozenset[str]:
        rows = self._admin.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = %s", (self.place.schema,)
        ).fetchall()
        return frozenset(name for (name,) in rows)

    def _meta_rows(self) -> frozenset[tuple[str, str]]:
        rows = self._admin.execute(
            f'SELECT name, value FROM "{self.place.schema}".meta WHERE name <> %s', ("log_id",)
        ).fetchall()
        return frozenset(rows)


@pytest.fixture(scope="session")
def pg_shared_schema(pg_server: PgServer) -> Iterator[SharedSchema]:
    shared = SharedSchema(new_place(pg_server))
    yield shared
    shared.close()
