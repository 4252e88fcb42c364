"""sqlite3 errors become factledger errors by SQLite's result code, never by message text."""

from __future__ import annotations

import importlib
import pkgutil
import sqlite3
from pathlib import Path

import pytest

from eventlog import FactledgerError, LogBusyError, StorageError, open_log
from eventlog.sqlite import translate

ROOT = Path(__file__).resolve().parents[2]


def raised(work: str, path: Path, *, uri: bool = False) -> sqlite3.Error:
    """The sqlite3 error that running `work` on a fresh connection to `path` raises."""
    conn = sqlite3.connect(path, uri=uri, timeout=0, isolation_level=None)
    try:
        conn.execute(work)
    except sqlite3.Error as exc:
        return exc
    finally:
        conn.close()
    raise AssertionError(f"{work!r} did not fail")


def coded(code: int, message: str = "some message") -> sqlite3.Error:
    """An OperationalError as sqlite3 raises it: with SQLite's (extended) result code."""
    exc = sqlite3.OperationalError(message)
    exc.sqlite_errorcode = code
    return exc


def test_locked_database_is_log_busy(tmp_path: Path) -> None:
    """A write while another connection holds the write lock becomes LogBusyError."""
    path = tmp_path / "log.db"
    open_log(path).close()
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    exc = raised("BEGIN IMMEDIATE", path)
    blocker.execute("ROLLBACK")
    assert sqlite3.SQLITE_BUSY == exc.sqlite_errorcode & 0xFF
    assert LogBusyError is type(translate(exc, "append to", "the log"))


def test_file_that_is_not_a_database_is_a_storage_error(tmp_path: Path) -> None:
    """A file that is not a SQLite database becomes a StorageError saying it is unusable."""
    path = tmp_path / "junk.db"
    path.write_bytes(bytes(range(256)) * 64)
    exc = raised("SELECT count(*) FROM sqlite_master", path)
    assert sqlite3.SQLITE_NOTADB == exc.sqlite_errorcode
    error = translate(exc, "open", "junk.db")
    assert StorageError is type(error)
    assert "junk.db is not a usable SQLite database" in str(error)


def test_write_to_a_read_only_file_is_a_storage_error(tmp_path: Path) -> None:
    """A write through a read-only connection becomes a StorageError saying it is read-only."""
    path = tmp_path / "log.db"
    open_log(path).close()
    exc = raised("CREATE TABLE t (x)", Path(path.resolve().as_uri() + "?mode=ro"), uri=True)
    assert sqlite3.SQLITE_READONLY == exc.sqlite_errorcode & 0xFF
    error = translate(exc, "write to", "log.db")
    assert StorageError is type(error)
    assert "log.db is read-only" in str(error)


def test_append_only_trigger_keeps_its_message(tmp_path: Path) -> None:
    """A constraint raised by an append-only trigger is a StorageError carrying its reason."""
    path = tmp_path / "log.db"
    open_log(path).close()
    exc = raised("UPDATE fl_log_meta SET value = 'other' WHERE name = 'log_id'", path)
    assert sqlite3.SQLITE_CONSTRAINT == exc.sqlite_errorcode & 0xFF
    error = translate(exc, "write to", "log.db")
    assert StorageError is type(error)
    assert str(exc) in str(error)


@pytest.mark.parametrize(
    ("code", "expected", "says"),
    [
        (sqlite3.SQLITE_BUSY, LogBusyError, "locked by another writer"),
        (sqlite3.SQLITE_BUSY | (2 << 8), LogBusyError, "locked by another writer"),
        (sqlite3.SQLITE_LOCKED, LogBusyError, "locked by another writer"),
        (sqlite3.SQLITE_READONLY, StorageError, "db is read-only"),
        (sqlite3.SQLITE_READONLY | (4 << 8), StorageError, "db is read-only"),
        (sqlite3.SQLITE_FULL, StorageError, "no space left for db"),
        (sqlite3.SQLITE_NOTADB, StorageError, "db is not a usable SQLite database"),
        (sqlite3.SQLITE_CORRUPT, StorageError, "db is not a usable SQLite database"),
        (sqlite3.SQLITE_CANTOPEN, StorageError, "unable to open db"),
        (sqlite3.SQLITE_IOERR, StorageError, "cannot write (db)"),
    ],
    ids=[
        "busy",
        "busy-extended",
        "locked",
        "readonly",
        "readonly-extended",
        "full",
        "notadb",
        "corrupt",
        "cantopen",
        "other",
    ],
)
def test_mapping_follows_the_code_not_the_message(
    code: int, expected: type[FactledgerError], says: str
) -> None:
    """The result code decides, even when the message names another failure."""
    for message in (
        "database is locked",
        "attempt to write a readonly database",
        "file is not a database",
    ):
        error = translate(coded(code, message), "write", "db")
        assert expected is type(error)
        assert says in str(error)


def test_error_without_a_code_is_a_storage_error() -> None:
    """An error sqlite3 raises itself (no result code) is a StorageError, never LogBusyError."""
    error = translate(sqlite3.ProgrammingError("database is locked"), "read", "db")
    assert StorageError is type(error)


def test_every_exception_is_a_factledger_error_in_an_errors_module() -> None:
    """Each exception class the packages define derives from FactledgerError and is defined
    in an errors module (and exported by its package)."""
    misplaced = []
    for package in ("eventlog", "projections", "replay"):
        for info in pkgutil.walk_packages([str(ROOT / package)], prefix=f"{package}."):
            if info.name.endswith("__main__"):
                continue
            module = importlib.import_module(info.name)
            for name, value in vars(module).items():
                if (
                    isinstance(value, type)
                    and issubclass(value, BaseException)
                    and value.__module__ == info.name
                    and (
                        not issubclass(value, FactledgerError)
                        or info.name.rpartition(".")[2].lstrip("_") != "errors"
                    )
                ):
                    misplaced.append(f"{info.name}.{name}")
    assert [] == misplaced
