"""Fixtures shared by the whole suite."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import structlog

from projections import SQLiteMemoryStore
from projections._environment import SETTINGS
from replay import Ledger

if TYPE_CHECKING:
    from tests.read_models import ReadModelUnderTest

pytest_plugins = ["tests.postgres", "tests.read_models"]


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every test starts without the variables factledger reads (a developer's shell may set
    FACTLEDGER_TRUST_POLICY=0, say), and leaves structlog and the library's logger level (a
    benchmark run in a test silences it) as it found them."""
    for setting in SETTINGS:
        for name in setting.variables:
            monkeypatch.delenv(name, raising=False)
    level = logging.getLogger("factledger").level
    yield
    structlog.reset_defaults()
    logging.getLogger("factledger").setLevel(level)


class Clock:
    """A settable clock in nanoseconds, for pinning `ts_ns` and ages."""

    def __init__(self, start_ns: int = 1_764_374_400_000_000_000) -> None:
        self.now_ns = start_ns

    def __call__(self) -> int:
        return self.now_ns

    def advance(self, seconds: float) -> None:
        self.now_ns += int(seconds * 1e9)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    """The store's read model: the log's own file, or this host's cache of a log held
    elsewhere (tests/read_models.py)."""
    return tmp_path / "memory" / "memory.db"


@pytest.fixture
def ledger(db_path: Path, read_model: ReadModelUnderTest) -> Iterator[Ledger]:
    """The log of the store at `db_path` as one `Ledger` (through that store's cache when the
    test's read model is one), opened for writing (made if absent) and kept for the test, as
    an operator keeps one."""
    log, cache = read_model.where(db_path)
    with Ledger.open(log, cache=cache, read_only=False) as opened:
        yield opened


@pytest.fixture
def make_store(
    db_path: Path, read_model: ReadModelUnderTest
) -> Iterator[Callable[..., SQLiteMemoryStore]]:
    """Opens stores whose read model is `db_path`, over the test's read model
    (tests/read_models.py)."""
    opened: list[SQLiteMemoryStore] = []

    def make(**options: object) -> SQLiteMemoryStore:
        store = read_model.open(db_path, **options)
        opened.append(store)
        return store

    yield make
    for store in opened:
        store.close()


@pytest.fixture
def store(make_store: Callable[..., SQLiteMemoryStore]) -> SQLiteMemoryStore:
    return make_store()
