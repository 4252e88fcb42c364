"""`python -m tests.bench.storage LOG`: where a SQLite log's bytes go, and what a compact body
would save.

Reads a log file (built by `tests.bench.scale_table`, say) without writing to it and prints:

- the file size over its events, and each table's and index's share of it, from SQLite's
  `dbstat` (pages in use, so the sum is the file less its free pages);
- the chained bodies as stored (canonical JSON) against the same fields encoded as an
  array-like msgpack with binary digests, dropping the two fields the row's own columns
  already hold (position, event id): an estimate of what a compact body format would take,
  over every event of the log (the body's bytes only; the b-tree's per-row overhead aside);
- the read model's copies of what the log already holds (`fl_memory.content` and
  `fl_memory.content_hash`), in bytes per event.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
from pathlib import Path
from typing import Any

import msgspec

from tests.bench.results import print_figures

LOG_TABLE = "fl_events"
COLUMNS_REPEATED = ("position", "event_id")
"""Envelope fields the log row stores as columns too."""


def table_bytes(db: sqlite3.Connection) -> dict[str, int]:
    """Bytes of pages in use per table or index, largest first (empty ones left out)."""
    rows = db.execute(
        "SELECT name, SUM(pgsize - unused) FROM dbstat GROUP BY name ORDER BY 2 DESC"
    ).fetchall()
    return {str(name): int(size) for name, size in rows if size}


def compact_body(body: dict[str, Any]) -> bytes:
    """The body's fields, the repeated columns left out, as a msgpack array; a digest
    `scheme:hex` as its scheme and raw bytes, payload values in their stored order."""
    values: list[Any] = []
    for name, value in body.items():
        if name in COLUMNS_REPEATED:
            continue
        if name == "payload":
            values.append(list(value.values()))
        elif name == "content_hash" and isinstance(value, str):
            scheme, _, digest = value.partition(":")
            values.append([scheme, bytes.fromhex(digest)])
        else:
            values.append(value)
    return msgspec.msgpack.encode(values)


def bodies(db: sqlite3.Connection) -> tuple[int, int, int]:
    """(events, bytes of the stored bodies, bytes of the same bodies encoded compactly)."""
    events = stored = compact = 0
    for (body,) in db.execute(f"SELECT body FROM {LOG_TABLE} ORDER BY position"):
        events += 1
        stored += len(body)
        compact += len(compact_body(json.loads(body)))
    return events, stored, compact


def read_model_copies(db: sqlite3.Connection) -> int:
    """Bytes the entries table spends on texts and content hashes the log already holds."""
    found = db.execute(
        "SELECT COALESCE(SUM(LENGTH(CAST(content AS BLOB)) + LENGTH(content_hash)), 0) "
        "FROM fl_memory"
    ).fetchone()
    return int(found[0])


def measure(path: Path) -> dict[str, Any]:
    """Every figure for the log file at `path`, opened read-only."""
    db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        events, stored, compact = bodies(db)
        if events == 0:
            raise SystemExit(f"{path} holds no events")
        per_table = table_bytes(db)
        copies = read_model_copies(db)
    finally:
        db.close()
    size = path.stat().st_size
    return {
        "log": str(path),
        "events": events,
        "file_bytes_per_event": round(size / events, 1),
        "bytes_per_event_by_table": {
            name: round(size / events, 1) for name, size in per_table.items()
        },
        "body_bytes_per_event": {
            "stored": round(stored / events, 1),
            "compact_estimate": round(compact / events, 1),
            "ratio": round(compact / stored, 3),
        },
        "read_model_copies_bytes_per_event": round(copies / events, 1),
    }


def main(argv: list[str] | None = None) -> int:
    """Measure the log named on the command line and print the figures as JSON."""
    parser = argparse.ArgumentParser(prog="python -m tests.bench.storage")
    parser.add_argument("log", type=Path, help="a factledger SQLite log file")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    if not args.log.is_file():
        parser.error(f"{args.log} is not a file")
    print_figures(measure(args.log), args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
