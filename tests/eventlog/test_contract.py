"""The log contract, run against every backend this package ships."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from eventlog import EventLog, open_log
from eventlog.contract import LogContract


class TestSQLiteFile(LogContract):
    """The SQLite backend on a file."""

    @pytest.fixture(autouse=True)
    def _folder(self, tmp_path: Path) -> None:
        self.folder = tmp_path

    def open(self, *, clock_ns: Callable[[], int] | None = None) -> EventLog:
        return open_log(self.folder / "log.db", clock_ns=clock_ns or time.time_ns)


class TestSQLiteMemory(LogContract):
    """The SQLite backend in memory."""

    def open(self, *, clock_ns: Callable[[], int] | None = None) -> EventLog:
        return open_log(":memory:", clock_ns=clock_ns or time.time_ns)
