"""Export to JSON Lines (verifiable offline) and import from legacy databases."""

from __future__ import annotations

import io
import json
import sqlite3
from contextlib import closing
from pathlib import Path

import blake3
import pytest

from eventlog import StorageError
from projections import CrossTaskKB, SQLiteMemoryStore
from replay import Ledger, export_log, transfer
from replay.transfer import EXPORT_FORMAT
from tests.projections.test_legacy import ROWS, legacy_file
from tests.test_docs import readme_export_verifier


@pytest.fixture
def populated(db_path: Path) -> Path:
    with SQLiteMemoryStore(db_path) as store:
        store.add("learning", "naïve — 日本語 \x00 'quoted'", ["a"], source_adapter="codex")
        kb = CrossTaskKB(store, run_id="r", producer_task_id="t")
        kb.publish("api", "users", "v1", scope="run")
        kb.publish("api", "users", "v2", scope="project")
        store.remove(1)
    return db_path


def test_export_holds_each_event_once_and_verifies_offline(populated: Path, tmp_path: Path) -> None:
    """Each line holds the chained body, its chain hash and the text and salt beside it,
    nothing twice; the envelope fields come only with `fields=True`, as a copy of the
    body's; the chain re-verifies."""
    out = io.StringIO()
    with Ledger.open(populated) as ledger:
        header = ledger.export(out)
        with_fields = io.StringIO()
        ledger.export(with_fields, fields=True)
    lines = out.getvalue().splitlines()
    assert (EXPORT_FORMAT, 4) == (header.format, header.events)
    first = json.loads(lines[1])
    assert {"body", "chain_hash", "text", "salt"} == set(first)
    assert "naïve — 日本語 \x00 'quoted'" == first["text"]
    assert '"content":""' in first["body"]
    copied = json.loads(with_fields.getvalue().splitlines()[1])["fields"]
    assert ("memory_added", "codex", 1) == (
        copied["kind"],
        copied["source_adapter"],
        copied["position"],
    )
    export = tmp_path / "log.jsonl"
    assert 4 == len(readme_export_verifier(populated, export)(export))


@pytest.mark.parametrize(
    ("field", "old", "new"),
    [("body", '"users"', '"admin"'), ("salt", "", ""), ("text", "v1", "v9")],
)
def test_offline_verification_catches_an_edited_export(
    populated: Path, tmp_path: Path, field: str, old: str, new: str
) -> None:
    """Changing one chained byte, the salt, or the text in an export breaks the documented
    offline check (the text is held to the salted hash)."""
    export = tmp_path / "log.jsonl"
    verify_export = readme_export_verifier(populated, export)
    lines = export.read_text(encoding="utf-8").splitlines()
    event = json.loads(lines[2])
    edited = event[field].replace(old, new, 1) if old else event[field][::-1]
    assert edited != event[field]
    event[field] = edited
    lines[2] = json.dumps(event)
    export.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(AssertionError):
        verify_export(export)


def test_export_reports_progress(populated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The progress callback sees every `PROGRESS_EVERY`-th position and the last, with the
    total."""
    monkeypatch.setattr(transfer, "PROGRESS_EVERY", 3)
    seen: list[tuple[int, int]] = []
    with Ledger.open(populated) as ledger:
        ledger.export(io.StringIO(), progress=lambda done, total: seen.append((done, total)))
    assert [(3, 4), (4, 4)] == seen


def test_export_of_a_missing_database_is_a_clear_error(tmp_path: Path) -> None:
    """Exporting a path with no database (`export_log`, which opens a read-only `Ledger`)
    fails clearly and creates nothing."""
    with pytest.raises(StorageError, match="no such file"):
        export_log(tmp_path / "none.db", io.StringIO())
    assert not (tmp_path / "none.db").exists()


def test_import_legacy_from_another_file_once(
    db_path: Path, tmp_path: Path, ledger: Ledger
) -> None:
    """Rows of a legacy file are imported as events; importing again writes nothing new."""
    source = tmp_path / "old" / "memory.db"
    legacy_file(source, ROWS)
    with SQLiteMemoryStore(db_path) as store:
        store.add("learning", "already here")
    first = ledger.import_legacy(source)
    again = ledger.import_legacy(source)
    assert (3, 3, 0, 2, 4) == (
        first.rows,
        first.imported,
        first.already_present,
        first.first_position,
        first.last_position,
    )
    assert (3, 0, 3) == (again.rows, again.imported, again.already_present)
    with SQLiteMemoryStore(db_path) as store:
        assert 4 == len(store.list())
    assert sorted(r[:10] for r in ROWS) == sorted(
        sqlite3.connect(source).execute("SELECT * FROM memory").fetchall()
    )


def test_imports_are_recognised_by_claimed_identity_never_by_their_text(
    db_path: Path, tmp_path: Path, ledger: Ledger
) -> None:
    """What an import is recognised by again holds no hash of the text (an unsalted one
    would confirm a guessed secret): a row with the same claimed identity and another text
    counts as imported; the same text under another id is a new row."""
    source = tmp_path / "old" / "memory.db"
    legacy_file(source, ROWS)
    ledger.import_legacy(source)
    with closing(sqlite3.connect(db_path)) as raw:
        kept = raw.execute("SELECT identity FROM fl_import").fetchall()
    texts = [str(row[2]) for row in ROWS]
    assert len(ROWS) == len(kept)
    for (identity,) in kept:
        assert "blake3" not in identity and not any(text in identity for text in texts)
        for text in texts:
            assert blake3.blake3(text.encode()).hexdigest() not in identity
    edited = tmp_path / "edited" / "memory.db"
    legacy_file(edited, [(*ROWS[0][:2], "another text", *ROWS[0][3:]), ROWS[1]])
    assert 0 == ledger.import_legacy(edited).imported
    moved = tmp_path / "moved" / "memory.db"
    legacy_file(moved, [(99, *ROWS[0][1:])])
    assert 1 == ledger.import_legacy(moved).imported


def test_import_legacy_of_a_missing_file_is_a_clear_error(
    db_path: Path, tmp_path: Path, ledger: Ledger
) -> None:
    """A missing source file is reported, and the target log is left as it was."""
    with pytest.raises(StorageError, match="no such file"):
        ledger.import_legacy(tmp_path / "missing.db")
