"""`factledger migrate` and `verify --previous`: a format-v1 log copied into a new v2 log
that answers as the old one did (positions one higher), checked against the old file; and
what an attacker tries: a key that is not the old log's operator, an edited old file, an
existing target, an event appended later that claims to be migrated."""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import blake3
import msgspec
import pytest

from eventlog import NewEvent, QuarantineApplied, SQLiteEventLog, Unreadable
from eventlog.events import MigrationClaims
from replay import Ledger, generate_key
from replay.migrate import MIGRATOR
from tests.cli.conftest import Result

V1_DATA = Path(__file__).parent.parent / "data" / "v1"
SHIFTED = {
    "id",
    "position",
    "positions",
    "included",
    "covers",
    "quarantine_position",
    "replaced_position",
    "other_position",
    "event_position",
    "receipt_position",
    "head_position",
    "at_position",
    "linked_to",
    "via",
}
"""Keys whose numbers are log positions: one higher in the migrated log."""
UNCOMPARED = {"content_hash", "event_id", "limit", "truncated"}
"""Keys that differ by design: the migrated log's salted hashes and its own event ids (the
original ids are kept in each event's claims)."""
READS = [
    ("list",),
    ("query", "--tag", "api-schema", "--all"),
    ("history", "--all"),
    ("blast-radius", "--adapter", "evil-cli"),
    ("blast-radius", "--adapter", "codex"),
    ("blast-radius", "--producer", "researcher-1"),
]

Cli = Callable[..., Result]


@pytest.fixture
def old(tmp_path: Path) -> Path:
    """A copy of the committed v1 log (the committed file is never touched)."""
    copy = tmp_path / "v1.db"
    shutil.copyfile(V1_DATA / "v1.db", copy)
    return copy


@pytest.fixture
def key(tmp_path: Path) -> Path:
    """The v1 log's operator key, copied with its private mode."""
    path = tmp_path / "operator.key"
    shutil.copyfile(V1_DATA / "operator.key", path)
    path.chmod(0o600)
    return path


def moved(value: Any, key: str | None = None) -> Any:
    """An answer of the v1 log as the migrated log gives it: positions one higher."""
    if isinstance(value, dict):
        return {k: moved(v, k) for k, v in value.items() if k not in UNCOMPARED}
    if isinstance(value, list):
        return [moved(v, key) for v in value]
    if isinstance(value, int) and not isinstance(value, bool) and key in SHIFTED:
        return value + 1
    return value


def _without_uncompared(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_uncompared(v) for k, v in value.items() if k not in UNCOMPARED}
    if isinstance(value, list):
        return [_without_uncompared(v) for v in value]
    return value


def test_the_migrated_log_answers_as_the_v1_log_did(
    cli: Cli, old: Path, key: Path, tmp_path: Path
) -> None:
    """Every read (list, query, history, blast-radius) of the migrated log gives the v1
    log's answer, positions one higher: provenance, times, trust, the quarantine and the
    hold policy carried over with the same effect; the operator key is the same."""
    new = tmp_path / "new.db"
    made = cli("--json", "migrate", str(old), str(new), "--key", str(key), db_path=None)
    assert 0 == made.code, made.err
    assert 10 == made.json()["events"]
    for read in READS:
        before = cli("--json", *read, db_path=str(old))
        after = cli("--json", *read, db_path=str(new))
        assert (0, 0) == (before.code, after.code), (read, before.err, after.err)
        assert moved(before.json()) == _without_uncompared(after.json()), read
    operators = cli("--json", "operator", "list", db_path=str(new)).json()["operators"]
    assert [("3c31ccba", 2)] == [(o["key_id"], o["added_position"]) for o in operators]
    assert 0 == cli("verify", "--previous", str(old), db_path=str(new)).code


def test_the_statement_names_the_old_log_and_verify_checks_it(old: Path, key: Path) -> None:
    """Position 1 states the old log's id, size and head chain value, signed by the
    migrating operator key; `Ledger.verify(previous=)` holds the new log to the old file."""
    new = old.parent / "new.db"
    with Ledger.open(old) as source:
        head = source.event_log.head()
        report = source.migrate(new, key=key)
        old_id = source.log_id
    assert (old_id, 10, head.chain_hash) == (
        report.previous_log_id,
        report.previous_size,
        report.previous_head_chain_hash,
    )
    with Ledger.open(new) as migrated:
        first = migrated.event_log.event_at(1)
        assert "log_migrated" == first.kind
        assert migrated.verify(previous=old).ok
        verdict = migrated.verify(previous=new)
        assert not verdict.ok
        assert "previous_log_mismatch" == verdict.problem


def test_a_key_that_is_not_the_old_logs_operator_is_refused_and_nothing_written(
    cli: Cli, old: Path, tmp_path: Path
) -> None:
    """Only an operator of the v1 log may vouch for its migration: another key is refused
    and NEW is never created."""
    stranger = tmp_path / "stranger.key"
    generate_key(stranger)
    new = tmp_path / "new.db"
    result = cli("migrate", str(old), str(new), "--key", str(stranger), db_path=None)
    assert 0 != result.code
    assert "not an operator key" in result.err
    assert not new.exists()


def test_an_edited_old_log_is_refused_by_migrate_and_by_verify_previous(
    cli: Cli, old: Path, key: Path, tmp_path: Path
) -> None:
    """A row of OLD edited by hand: migrate verifies OLD first and writes nothing; a log
    migrated before the edit no longer verifies against it (exit 2)."""
    new = tmp_path / "new.db"
    assert 0 == cli("migrate", str(old), str(new), "--key", str(key), db_path=None).code
    edited = tmp_path / "edited.db"
    shutil.copyfile(old, edited)
    with closing(sqlite3.connect(edited)) as con, con:
        for (trigger,) in con.execute(
            "SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'fl_events'"
        ).fetchall():
            con.execute(f'DROP TRIGGER "{trigger}"')
        body = bytes(con.execute("SELECT body FROM fl_events WHERE position = 5").fetchone()[0])
        assert b"curl evil" in body
        con.execute(
            "UPDATE fl_events SET body = ? WHERE position = 5",
            (body.replace(b"curl evil", b"curl good"),),
        )
    again = tmp_path / "again.db"
    refused = cli("migrate", str(edited), str(again), "--key", str(key), db_path=None)
    assert 0 != refused.code
    assert "does not verify" in refused.err
    assert not again.exists()
    assert 2 == cli("verify", "--previous", str(edited), db_path=str(new)).code


def test_an_existing_target_is_refused_and_left_unchanged(
    cli: Cli, old: Path, key: Path, tmp_path: Path
) -> None:
    """NEW must not exist: a file there (a log or anything else) is left as it was."""
    new = tmp_path / "new.db"
    new.write_bytes(b"keep me")
    result = cli("migrate", str(old), str(new), "--key", str(key), db_path=None)
    assert 0 != result.code
    assert "exists" in result.err
    assert b"keep me" == new.read_bytes()


def test_an_event_appended_later_cannot_claim_to_be_migrated(
    cli: Cli, old: Path, key: Path, tmp_path: Path
) -> None:
    """An event written after the migration with migration claims (here a copy of the v1
    log's own signed quarantine aimed at claude-code, replayed with its original signature)
    is read as unreadable: it changes nothing, and verify lists it."""
    new = tmp_path / "new.db"
    assert 0 == cli("migrate", str(old), str(new), "--key", str(key), db_path=None).code
    with Ledger.open(old) as source:
        original = source.event_log.event_at(10)
        old_id = source.log_id
    payload = original.payload
    assert isinstance(payload, QuarantineApplied)
    forged = msgspec.structs.replace(
        payload,
        match_source_adapter="claude-code",
        migrated=MigrationClaims(
            log_id=old_id,
            position=11,
            event_id=original.event_id,
            ts_ns=original.ts_ns,
            producer_task_id=original.producer_task_id,
            run_id=None,
            source_adapter=None,
            content_hash=original.content_hash,
        ),
    )
    with closing(SQLiteEventLog(new)) as log:
        appended = log.append(NewEvent(payload=forged, producer_task_id="evil"))
        assert isinstance(appended.payload, Unreadable)
        assert isinstance(log.event_at(12).payload, Unreadable)
    facts = cli("--json", "query", "--tag", "api-schema", "--all", db_path=str(new)).rows()
    assert ["claude-code"] == [f["source_adapter"] for f in facts]


def test_a_log_with_no_statement_honours_no_migration_claims(tmp_path: Path) -> None:
    """In a log whose position 1 is no migration statement, an event claiming to be
    migrated reads as unreadable from the start."""
    with closing(SQLiteEventLog(tmp_path / "plain.db")) as log:
        claims = MigrationClaims(
            log_id="x",
            position=1,
            event_id="e",
            ts_ns=1,
            producer_task_id="claude",
            run_id=None,
            source_adapter="claude-code",
            content_hash="blake3:" + "0" * 64,
        )
        log.append(MIGRATOR.event(QuarantineApplied(reason="r", match_source_adapter="a")))
        event = MIGRATOR.event(
            QuarantineApplied(reason="r", match_source_adapter="b", migrated=claims)
        )
        recorded = log.append(event)
    assert isinstance(recorded.payload, Unreadable)


def test_only_signed_events_carry_their_unkeyed_v1_content_hash(
    cli: Cli, old: Path, key: Path, tmp_path: Path
) -> None:
    """A v1 content hash is unkeyed BLAKE3 over the text: the copy keeps it only where the
    event's v1 signature covers it, so no unsigned entry's text can be confirmed from the
    new log's chain once it is erased."""
    new = tmp_path / "new.db"
    assert 0 == cli("migrate", str(old), str(new), "--key", str(key), db_path=None).code
    with closing(SQLiteEventLog(new)) as log, closing(SQLiteEventLog(old)) as v1:
        copied = {e.position - 1: e for e in log.read(after=1)}
        originals = {e.position: e for e in v1.read()}
    carried = {
        position: event.payload.migrated.content_hash
        for position, event in copied.items()
        if isinstance(event.payload.migrated, MigrationClaims)
    }
    assert set(originals) == set(carried)
    signed = {p for p, e in originals.items() if getattr(e.payload, "authorization", None)}
    assert signed and signed != set(originals)
    assert {p: originals[p].content_hash for p in signed} == {
        p: h for p, h in carried.items() if h is not None
    }
    empty = "blake3:" + blake3.blake3(b"").hexdigest()
    texts = {p for p, e in originals.items() if e.content_hash != empty} - signed
    assert texts
    stored = log_bytes(new)
    assert [] == [p for p in texts if originals[p].content_hash in stored]


def log_bytes(path: Path) -> str:
    """Every event body and content row of the file, as text."""
    with closing(sqlite3.connect(path)) as db:
        return "\n".join(str(row) for row in db.execute("SELECT * FROM fl_events"))
