"""The storage breakdown reads a built log and accounts for its bytes (no size is asserted)."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest

from tests.bench import scale_table, storage


def test_storage_breakdown_accounts_for_a_built_log(tmp_path: Path) -> None:
    """Every event is counted, the tables' pages fit in the file, the log table is among
    them, the compact estimate is smaller than the stored canonical JSON, and the entries'
    copies of texts and hashes are counted."""
    path = tmp_path / "log.db"
    scale_table.build(path, 300)
    out = tmp_path / "storage.json"
    assert 0 == storage.main([str(path), "--json", str(out)])
    figures = json.loads(out.read_text(encoding="utf-8"))
    tables = figures["bytes_per_event_by_table"]
    assert 300 == figures["events"]
    assert sum(tables.values()) <= figures["file_bytes_per_event"] + 1
    assert tables["fl_events"] > 0 and tables["fl_memory"] > 0
    body = figures["body_bytes_per_event"]
    assert 0 < body["compact_estimate"] < body["stored"]
    assert figures["read_model_copies_bytes_per_event"] > scale_table.CONTENT_BYTES / 2


def test_compact_body_leaves_out_the_columns_and_keeps_digests_binary() -> None:
    """The position and event id (columns of the row) are left out; a digest is its scheme
    and its 32 raw bytes."""
    body = {
        "position": 7,
        "event_id": "fl:" + "0" * 32,
        "content_hash": "blake3-keyed:" + "ab" * 32,
        "payload": {"kind": "memory_added", "content": ""},
    }
    decoded = msgspec.msgpack.decode(storage.compact_body(body))
    assert [["blake3-keyed", b"\xab" * 32], ["memory_added", ""]] == decoded


def test_a_missing_log_is_a_usage_error(tmp_path: Path) -> None:
    """A path that is not a file is refused before anything is opened."""
    with pytest.raises(SystemExit):
        storage.main([str(tmp_path / "absent.db")])
