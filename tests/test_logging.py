"""A library does not print: records go to the standard library's logging, and only where the
embedding application sends them."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest

from eventlog.logs import get_logger

OVERWRITE = """
import logging, sys
import structlog
from projections import CrossTaskKB, SQLiteMemoryStore

if sys.argv[2] == "configured":
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        logging.Formatter(
            "%(levelname)s %(name)s %(message)s %(previous_producer)s -> %(producer)s",
            defaults={"previous_producer": None, "producer": None},
        )
    )
    logging.basicConfig(level=logging.INFO, handlers=[handler])
with SQLiteMemoryStore(sys.argv[1]) as store:
    CrossTaskKB(store, producer_task_id="a").publish("t", "k", "v1", scope="project")
    CrossTaskKB(store, producer_task_id="b").publish("t", "k", "v2", scope="project")
assert not structlog.is_configured()
"""


def overwrite(tmp_path: Path, logging_setup: str) -> subprocess.CompletedProcess[str]:
    """Run an application that lets producer b overwrite producer a's fact."""
    return subprocess.run(
        [sys.executable, "-c", OVERWRITE, str(tmp_path / "memory.db"), logging_setup],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_unconfigured_logging_writes_nothing(tmp_path: Path) -> None:
    """With logging left as Python starts it, an overwrite warning reaches neither stdout nor
    stderr, and structlog's global configuration is left untouched."""
    result = overwrite(tmp_path, "default")
    assert 0 == result.returncode, result.stderr
    assert "" == result.stdout
    assert "" == result.stderr


def test_configured_logging_receives_the_record_with_its_fields(tmp_path: Path) -> None:
    """Once the application configures logging, the warning arrives as a record whose message
    is the event name and whose attributes are its fields; stdout stays clean."""
    result = overwrite(tmp_path, "configured")
    assert 0 == result.returncode, result.stderr
    assert "" == result.stdout
    assert "WARNING factledger.kb fact_overwritten a -> b" in result.stderr.splitlines()


def test_a_record_names_the_library_code_that_logged(caplog: pytest.LogCaptureFixture) -> None:
    """A record's file, line and function are the logging call's, not structlog's."""
    log = get_logger("factledger.test")
    log.warning("by_method")
    log.log(logging.WARNING, "by_level")
    assert [(__file__, "test_a_record_names_the_library_code_that_logged")] * 2 == [
        (r.pathname, r.funcName) for r in caplog.records
    ]
