"""The read-side contract: the read models a store runs over (a pytest plugin, loaded by
tests/conftest.py), as `eventlog.contract.LogContract` is the contract every log backend runs.

A module marked `pytestmark = pytest.mark.read_models` runs each of its tests that opens a
store (through the `store`, `make_store` or `read_model` fixtures) once per read model:

- `one-file`: the log and the read model share one SQLite file (one host, the default);
- `sqlite-log`: a host's cache over a log in another SQLite file;
- `postgres-log`: a host's cache over a PostgreSQL log (`tests/postgres.py`; the test gets
  its own schema).

Every other test opens the one-file model only. A test that opens a view or runs a `replay`
command asks `read_model` where the log is.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from projections import SQLiteMemoryStore

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
def read_model(request: pytest.FixtureRequest, tmp_path: Path) -> ReadModelUnderTest:
    """The read model this test runs over: the one-file model unless its module is marked
    `read_models`."""
    name = getattr(request, "param", "one-file")
    if name == "one-file":
        return ReadModelUnderTest(None)
    if name == "sqlite-log":
        return ReadModelUnderTest(tmp_path / "remote" / "log.db")
    assert "postgres-log" == name
    return ReadModelUnderTest(request.getfixturevalue("pg").dsn)
