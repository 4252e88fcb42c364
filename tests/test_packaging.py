"""What users install is what the tree holds: the wheel and the sdist, built from a copy of the
checkout with the project's own build backend, carry every module, `py.typed`, the licence
and the command line."""

from __future__ import annotations

import email
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("eventlog", "projections", "replay")
NOT_SOURCE = shutil.ignore_patterns(
    ".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".*_cache", ".hypothesis"
)
BUILD = (
    "import sys; from setuptools import build_meta; getattr(build_meta, sys.argv[1])(sys.argv[2])"
)
"""Run one PEP 517 hook (`build_wheel` or `build_sdist`) into a folder, each in its own process
as a build frontend would."""


def shipped_sources(root: Path) -> set[str]:
    """Every module and marker file of the three packages, as paths from `root`."""
    return {
        path.relative_to(root).as_posix()
        for package in PACKAGES
        for path in (root / package).rglob("*")
        if path.is_file()
        and "__pycache__" not in path.parts
        and (path.suffix == ".py" or path.name == "py.typed")
    }


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, set[str]]:
    """(wheel, sdist, the source files they must hold), built from a copy of the checkout."""
    tree = tmp_path_factory.mktemp("tree") / "factledger"
    shutil.copytree(ROOT, tree, ignore=NOT_SOURCE)
    out = tmp_path_factory.mktemp("dist")
    for hook in ("build_wheel", "build_sdist"):
        result = subprocess.run(
            [sys.executable, "-c", BUILD, hook, str(out)],
            cwd=tree,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert 0 == result.returncode, result.stderr
    (wheel,) = out.glob("factledger-*.whl")
    (sdist,) = out.glob("factledger-*.tar.gz")
    return wheel, sdist, shipped_sources(tree)


def test_the_source_tree_has_subpackages_to_find() -> None:
    """The check below means something: the tree holds nested packages, not only the three."""
    assert any("/cli/" in name for name in shipped_sources(ROOT))


def test_the_wheel_holds_every_module_the_licence_and_the_command(
    built: tuple[Path, Path, set[str]],
) -> None:
    """Every .py and py.typed of the tree is in the wheel; its metadata names the SPDX
    licence and carries the licence text; the `factledger` command is declared."""
    wheel, _, sources = built
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        info = next(n for n in names if n.endswith(".dist-info/METADATA")).rpartition("/")[0]
        metadata = email.message_from_bytes(archive.read(f"{info}/METADATA"))
        entry_points = archive.read(f"{info}/entry_points.txt").decode()
        licence = archive.read(f"{info}/licenses/LICENSE").decode()
    assert set() == sources - names
    assert {f"{package}/py.typed" for package in PACKAGES} <= names
    assert "Apache-2.0" == metadata["License-Expression"]
    assert "Apache License" in licence and "Version 2.0, January 2004" in licence
    assert "factledger = replay.cli:main" in entry_points
    assert metadata.get_all("Project-URL")
    assert "Typing :: Typed" in (metadata.get_all("Classifier") or [])


def test_the_sdist_holds_every_module_and_the_licence(built: tuple[Path, Path, set[str]]) -> None:
    """The sdist carries the same modules, the licence and the project file."""
    _, sdist, sources = built
    with tarfile.open(sdist) as archive:
        top, *_ = archive.getnames()
        prefix = top.split("/")[0] + "/"
        names = {name.removeprefix(prefix) for name in archive.getnames()}
    assert set() == sources - names
    assert {"LICENSE", "pyproject.toml", "README.md"} <= names
