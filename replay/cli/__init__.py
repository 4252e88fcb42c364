"""The `factledger` command line, on click and rich: `main` runs it.

`app` holds the group, the options every command takes and the error handling; each theme
module adds its commands to `app` (its options beside each command); `output` renders JSON,
tables and progress.
"""

from __future__ import annotations

from replay.cli import (
    agents,
    audit,
    bootstrap,
    conflicts,
    demo,
    erasure,
    forensics,
    history,
    lineage,
    memory,
    operators,
    postgres,
    receipts,
    report,
)
from replay.cli.app import app, main
from replay.cli.errors import DemoFailed

__all__ = [
    "DemoFailed",
    "agents",
    "app",
    "audit",
    "bootstrap",
    "conflicts",
    "demo",
    "erasure",
    "forensics",
    "history",
    "lineage",
    "main",
    "memory",
    "operators",
    "postgres",
    "receipts",
    "report",
]
