"""The code stays lint-clean, formatted and strictly typed: CI runs these with the suite."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    "command",
    [
        pytest.param(["ruff", "check", "."], id="ruff-check"),
        pytest.param(["ruff", "format", "--check", "."], id="ruff-format"),
        pytest.param(["mypy"], id="mypy-strict", marks=pytest.mark.slow),
    ],
)
def test_static_checks_pass(command: list[str]) -> None:
    """ruff finds nothing, formatting is settled, and mypy --strict passes on the packages."""
    result = subprocess.run(
        [sys.executable, "-m", *command], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert 0 == result.returncode, result.stdout + result.stderr
