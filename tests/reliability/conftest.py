"""Fixtures shared by the reliability suites."""

from __future__ import annotations

import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory outside pytest's root-only tmp tree, so the unprivileged child can reach it."""
    directory = Path(tempfile.mkdtemp(prefix="factledger-ro-"))
    directory.chmod(0o755)
    yield directory
    for path in (directory, *directory.iterdir()):
        path.chmod(stat.S_IRWXU)
    shutil.rmtree(directory)
