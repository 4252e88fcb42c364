"""A description of the machine and the disk the benchmark ran on."""

from __future__ import annotations

import os
import platform
import shutil
import sqlite3
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def cpu_model() -> str:
    """The CPU model name from /proc/cpuinfo."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def filesystem(folder: Path) -> dict[str, str]:
    """The device, mount point and filesystem type holding `folder`, from /proc/mounts."""
    best = {"device": "unknown", "mount": "/", "type": "unknown"}
    target = str(folder.resolve())
    try:
        lines = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return best
    for line in lines:
        device, mount, kind = line.split()[:3]
        inside = target == mount or target.startswith(mount.rstrip("/") + "/")
        if inside and len(mount) >= len(best["mount"]):
            best = {"device": device, "mount": mount, "type": kind}
    return best


def load_average() -> str:
    """The 1, 5 and 15 minute load averages: how busy the shared machine was."""
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "unknown"


def describe(folder: Path) -> dict[str, Any]:
    """Everything the results depend on that is not the code under test."""
    usage = shutil.disk_usage(folder)
    return {
        "uname": " ".join(os.uname()),
        "cpu": cpu_model(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "msgspec": metadata.version("msgspec"),
        "blake3": metadata.version("blake3"),
        "disk": {
            **filesystem(folder),
            "folder": str(folder),
            "size_gib": round(usage.total / 2**30, 1),
            "free_gib": round(usage.free / 2**30, 1),
        },
        "commit": _git("rev-parse", "HEAD"),
        "uncommitted": _git("--no-optional-locks", "diff", "--name-only", "HEAD").split(),
        "load_average_start": load_average(),
    }


def _git(*args: str) -> str:
    """Output of a read-only git command in the repository ('unknown' if it fails)."""
    try:
        done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return done.stdout.strip()
