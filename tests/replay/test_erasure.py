"""Erasure in a log file: the texts leave the file, its WAL and every cache; proofs survive;
what was derived goes with it; only an operator key registered at its position erases."""

from __future__ import annotations

import base64
import hashlib
import sqlite3
from collections.abc import Callable
from pathlib import Path

import blake3
import msgspec
import pytest

from eventlog import (
    Authorization,
    InvalidInputError,
    NewEvent,
    open_log,
)
from eventlog.events import ContentErased
from eventlog.signing import action_statement
from projections import CrossTaskKB, MemoryTrustPolicy, SQLiteMemoryStore, load_persistent_memory
from replay import Ledger, OperatorKey, generate_key, read_operator_key
from replay.errors import NotAuthorizedError
from replay.proofs import verify_consistency, verify_inclusion
from tests.projections.test_legacy import LEGACY_SCHEMA, legacy_file

SECRET = "plover-quasar-7731"
"""A text to erase (no secret detector would call it one: erasure is for any text)."""

Keys = Callable[[str], OperatorKey]


@pytest.fixture
def keys(tmp_path: Path) -> Keys:
    def make(name: str) -> OperatorKey:
        path = tmp_path / f"{name}.key"
        if not path.exists():
            generate_key(path, name=name)
        return read_operator_key(path)

    return make


def on_disk(path: Path) -> bytes:
    """The bytes of a SQLite file and its write-ahead log and journal, as stored."""
    found = b""
    for suffix in ("", "-wal", "-journal", "-shm"):
        part = Path(f"{path}{suffix}")
        if part.exists():
            found += part.read_bytes()
    return found


def operated(db: Path, key: OperatorKey) -> None:
    with Ledger.open(db, read_only=False) as ledger:
        ledger.add_operator(key.public, key=key)


def test_an_erased_text_leaves_the_file_and_its_wal_and_verify_passes(
    db_path: Path, keys: Keys
) -> None:
    """A fact version and a memory entry holding the text are erased: no byte of it stays in
    the file or its WAL; subscribe falls back; the prompt never shows it; verify passes and
    names the erasure, its key and reason."""
    with SQLiteMemoryStore(db_path) as store:
        kb = CrossTaskKB(store, producer_task_id="t1", source_adapter="codex")
        kb.publish("ops", "launch", "the code is in the vault", scope="project")  # 1
        kb.publish("ops", "launch", f"the code is {SECRET}", scope="project")  # 2
        store.add("learning", f"remember {SECRET}", ["ops"], source_adapter="codex")  # 3
    operated(db_path, keys("ops"))
    assert SECRET.encode() in on_disk(db_path)
    with Ledger.open(db_path, read_only=False) as ledger:
        done = ledger.erase([2, 3], reason="a launch code", key=keys("ops"))
        report = ledger.verify(deep=True)
    assert ([2, 3], 2, "") == (done.erased, done.texts_removed, done.note)
    assert 0 == on_disk(db_path).count(SECRET.encode())
    assert report.ok, report.reason
    [erasure] = report.erasures
    assert (done.position, keys("ops").key_id, "a launch code", (2, 3), True) == (
        erasure.position,
        erasure.key_id,
        erasure.reason,
        erasure.positions,
        erasure.authorized,
    )
    with SQLiteMemoryStore(db_path) as store:
        kb = CrossTaskKB(store)
        assert ["the code is in the vault"] == [
            f.value for f in kb.subscribe("ops", scope="project")
        ]
        policy = MemoryTrustPolicy(trusted_adapters=frozenset({"codex"}))
        prompt = load_persistent_memory(store, ["ops"], trust_policy=policy)
        assert SECRET not in prompt
        assert 3 not in [e.id for e in store.list()]


def test_checkpoints_and_proofs_taken_before_still_verify(db_path: Path, keys: Keys) -> None:
    """An inclusion proof of the erased position and a consistency proof across the
    erasure, from checkpoints taken before it, verify afterwards."""
    with SQLiteMemoryStore(db_path) as store:
        store.add("learning", f"token {SECRET}", ["ops"])  # 1
        store.add("learning", "harmless", ["ops"])  # 2
    operated(db_path, keys("ops"))
    with Ledger.open(db_path, read_only=False) as ledger:
        before = ledger.checkpoint(key=keys("ops"))
        inclusion = ledger.prove_inclusion(1, before)
        ledger.erase([1], reason="leaked", key=keys("ops"))
    with Ledger.open(db_path) as ledger:
        after = ledger.checkpoint()
        assert ledger.verify(checkpoint=before).ok
        erased = ledger.event_log.event_at(1)
        assert "absent" == erased.text_state
        assert verify_inclusion(inclusion, erased, before)
        assert verify_inclusion(ledger.prove_inclusion(1, before), erased, before)
        assert verify_consistency(ledger.prove_consistency(before, after), before, after)


def test_no_stored_value_confirms_a_guessed_text(db_path: Path, keys: Keys) -> None:
    """Before and after the erasure, no unsalted digest of the text is stored: a guess of a
    short secret cannot be checked against the file; after it, not even the salt is."""
    guess = "1234"
    with SQLiteMemoryStore(db_path) as store:
        store.add("learning", guess, ["pin"])
    digests = [
        blake3.blake3(guess.encode()).digest(),
        hashlib.sha256(guess.encode()).digest(),
    ]
    forms = [f for d in digests for f in (d, d.hex().encode(), base64.b64encode(d))]
    assert [] == [f for f in forms if f in on_disk(db_path)]
    operated(db_path, keys("ops"))
    conn = sqlite3.connect(db_path)
    (salt,) = conn.execute("SELECT salt FROM fl_content WHERE position = 1").fetchone()
    conn.close()
    with Ledger.open(db_path, read_only=False) as ledger:
        ledger.erase([1], reason="a pin", key=keys("ops"))
    stored = on_disk(db_path)
    assert [] == [f for f in [*forms, salt] if f in stored]


def test_a_three_hop_cascade(db_path: Path, keys: Keys) -> None:
    """Writes derived from the erased one, three hops down, are quarantined by default,
    erased with descendants='erase', listed and left with 'none'; depth bounds the walk."""

    def planted() -> list[int]:
        if db_path.exists():
            for part in db_path.parent.glob(db_path.name + "*"):
                part.unlink()
        with SQLiteMemoryStore(db_path) as store:
            root = store.add("learning", f"token {SECRET}", ["ops"])
            one = store.add("learning", "summary of the token", ["ops"], derived_from=[root])
            two = store.add("learning", "digest of the summary", ["ops"], derived_from=[one])
            three = store.add("learning", "note on the digest", ["ops"], derived_from=[two])
        operated(db_path, keys("ops"))
        return [root, one, two, three]

    root, one, two, three = planted()
    with Ledger.open(db_path, read_only=False) as ledger:
        done = ledger.erase([root], reason="leak", key=keys("ops"))
    assert ([root], [one, two, three]) == (done.erased, done.descendants)
    assert done.quarantine_position == done.position + 1
    with SQLiteMemoryStore(db_path) as store:
        assert [] == store.list()
    assert 0 == on_disk(db_path).count(SECRET.encode())
    assert b"summary of the token" in on_disk(db_path)  # quarantined, kept as evidence

    root, one, two, three = planted()
    with Ledger.open(db_path, read_only=False) as ledger:
        done = ledger.erase([root], reason="leak", key=keys("ops"), descendants="erase")
    assert [root, one, two, three] == done.erased
    stored = on_disk(db_path)
    assert [] == [
        t for t in (SECRET.encode(), b"summary of", b"digest of", b"note on") if t in stored
    ]

    root, one, two, three = planted()
    with Ledger.open(db_path, read_only=False) as ledger:
        done = ledger.erase([root], reason="leak", key=keys("ops"), descendants="none", depth=2)
    assert ([root], [one, two], None) == (done.erased, done.descendants, done.quarantine_position)
    with SQLiteMemoryStore(db_path) as store:
        assert [one, two, three] == sorted(e.id for e in store.list())


def test_selectors_choose_every_text_of_an_adapter_task_or_run(db_path: Path, keys: Keys) -> None:
    """--adapter, --task and --run choose every write with a text, removed ones included
    (a removed entry's text is still in the log until erased)."""
    with SQLiteMemoryStore(db_path) as store:
        evil = store.add("learning", f"a {SECRET}", ["x"], source_adapter="evil")
        store.remove(evil)
        CrossTaskKB(store, source_adapter="evil", producer_task_id="t9", run_id="r9").publish(
            "x", "k", f"b {SECRET}", scope="run"
        )
        kept = store.add("learning", "keep me", ["x"], source_adapter="good")
    operated(db_path, keys("ops"))
    with Ledger.open(db_path, read_only=False) as ledger:
        done = ledger.erase(source_adapter="evil", reason="adapter compromised", key=keys("ops"))
    assert [evil, evil + 2] == done.erased
    assert 0 == on_disk(db_path).count(SECRET.encode())
    with SQLiteMemoryStore(db_path) as store:
        assert [kept] == [e.id for e in store.list()]


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({}, "exactly one selector"),
        ({"positions": [1], "source_adapter": "evil"}, "exactly one selector"),
        ({"positions": [3]}, "holds a operator_added event, which writes no text"),
        ({"positions": [99]}, "past the log head"),
        ({"source_adapter": "nobody"}, "no write holding a text matches"),
        ({"positions": [1], "descendants": "keep"}, "descendants must be one of"),
        ({"positions": [1], "reason": " "}, "reason must say why"),
    ],
)
def test_bad_requests_are_refused_and_nothing_is_written(
    db_path: Path, keys: Keys, arguments: dict[str, object], message: str
) -> None:
    with SQLiteMemoryStore(db_path) as store:
        store.add("learning", SECRET, ["x"])
        store.add("learning", "other", ["x"])
    operated(db_path, keys("ops"))
    given: dict[str, object] = {"reason": "why", **arguments}
    with Ledger.open(db_path, read_only=False) as ledger:
        head = ledger.event_log.head()
        with pytest.raises(InvalidInputError, match=message):
            ledger.erase(key=keys("ops"), **given)  # type: ignore[arg-type]
        assert head == ledger.event_log.head()
    assert SECRET.encode() in on_disk(db_path)


def test_an_open_log_cannot_erase(db_path: Path, keys: Keys) -> None:
    """Destroying a text always needs a registered key: a log with none refuses."""
    with SQLiteMemoryStore(db_path) as store:
        store.add("learning", SECRET, ["x"])
    with (
        Ledger.open(db_path, read_only=False) as ledger,
        pytest.raises(NotAuthorizedError, match="registered in this log, which has none"),
    ):
        ledger.erase([1], reason="why", key=keys("stray"))
    assert SECRET.encode() in on_disk(db_path)


def signed_by(key: OperatorKey, log_id: str, event: NewEvent) -> NewEvent:
    """`event` signed with `key` (an attacker holding some key, writing around the API)."""
    salt = b"\x01" * 32
    statement = action_statement(
        log_id=log_id,
        event_id=event.event_id or "",
        producer_task_id=event.producer_task_id,
        run_id=event.run_id,
        source_adapter=event.source_adapter,
        content_hash="blake3-keyed:" + blake3.blake3(b"", key=salt).hexdigest(),
        payload=event.payload,
    )
    auth = Authorization(
        key_id=key.key_id, signature=base64.b64encode(key.sign(statement)).decode()
    )
    signed = msgspec.structs.replace(event.payload, authorization=auth)
    return msgspec.structs.replace(event, payload=signed, salt=salt)


@pytest.mark.parametrize("signer", ["removed", "stranger", "unsigned"])
def test_an_erasure_without_authority_takes_no_effect(
    db_path: Path, keys: Keys, signer: str
) -> None:
    """An erasure appended around the API, signed by a removed key, by a key the log never
    registered, or unsigned: the text stays, readers still see it, verify passes and shows
    the erasure as unauthorized; the API refuses the removed key up front."""
    with SQLiteMemoryStore(db_path) as store:
        store.add("learning", SECRET, ["x"])  # 1
    operated(db_path, keys("ops"))  # 2
    with Ledger.open(db_path, read_only=False) as ledger:
        ledger.add_operator(keys("old").public, key=keys("ops"))  # 3
        ledger.remove_operator(keys("old").key_id, key=keys("ops"), reason="rotated")  # 4
        with pytest.raises(NotAuthorizedError, match="stopped being an operator key"):
            ledger.erase([1], reason="why", key=keys("old"))
        log_id = ledger.log_id
    event = NewEvent(
        payload=ContentErased(positions=(1,), reason="forged"),
        producer_task_id="intruder",
        event_id="op:forged-erasure",
    )
    if signer != "unsigned":
        event = signed_by(keys("old" if signer == "removed" else "stranger"), log_id, event)
    with SQLiteMemoryStore(db_path) as store, store.write_transaction() as tx:
        tx.append([event])
    assert SECRET.encode() in on_disk(db_path)
    with SQLiteMemoryStore(db_path) as store:
        assert [SECRET] == [e.content for e in store.list()]
    with Ledger.open(db_path) as ledger:
        report = ledger.verify(deep=True)
    assert report.ok, report.reason
    [erasure] = report.erasures
    assert (
        False,
        {"removed": "removed_key", "stranger": "unknown_key"}.get(signer, "unsigned"),
    ) == (
        erasure.authorized,
        erasure.refused,
    )


def test_a_text_deleted_by_hand_fails_verify_even_beside_an_erasure(
    db_path: Path, keys: Keys
) -> None:
    """Deleting a text around the API (triggers dropped) fails verify closed: only the
    positions an erasure in force names may lack their text."""
    with SQLiteMemoryStore(db_path) as store:
        store.add("learning", SECRET, ["x"])  # 1
        store.add("learning", "kept", ["x"])  # 2
    operated(db_path, keys("ops"))
    with Ledger.open(db_path, read_only=False) as ledger:
        ledger.erase([1], reason="why", key=keys("ops"))
    conn = sqlite3.connect(db_path)
    conn.execute("DROP TRIGGER fl_content_no_delete")
    conn.execute("DELETE FROM fl_content WHERE position = 2")
    conn.commit()
    conn.close()
    with Ledger.open(db_path) as ledger:
        report = ledger.verify()
    assert (False, 2) == (report.ok, report.first_bad_position)
    assert "no erasure in force names it" in (report.reason or "")


def test_the_file_refuses_deleting_a_text_no_erasure_names(db_path: Path) -> None:
    """The content table keeps its texts against a plain DELETE."""
    with SQLiteMemoryStore(db_path) as store:
        store.add("learning", SECRET, ["x"])
    conn = sqlite3.connect(db_path)
    with pytest.raises(sqlite3.DatabaseError, match="only an erasure removes a text"):
        conn.execute("DELETE FROM fl_content")
    conn.close()


def test_a_cache_of_the_log_drops_the_text_at_its_next_catch_up(tmp_path: Path, keys: Keys) -> None:
    """Two hosts read a log file through their caches: after the erasure, each cache holds
    no byte of the text once it catches up."""
    db = tmp_path / "log.db"
    caches = [tmp_path / "host-a.cache", tmp_path / "host-b.cache"]
    with SQLiteMemoryStore(db) as store:
        store.add("learning", SECRET, ["x"])
    operated(db, keys("ops"))
    for cache in caches:
        with SQLiteMemoryStore(cache, log=open_log(db)) as store:
            assert [SECRET] == [e.content for e in store.list()]
    assert all(SECRET.encode() in on_disk(c) for c in caches)
    with Ledger.open(db, cache=caches[0], read_only=False) as ledger:
        done = ledger.erase([1], reason="leak", key=keys("ops"))
    assert 1 == done.texts_removed
    assert 0 == on_disk(db).count(SECRET.encode())
    assert 0 == on_disk(caches[0]).count(SECRET.encode())
    assert SECRET.encode() in on_disk(caches[1])
    with SQLiteMemoryStore(caches[1], log=open_log(db)) as store:
        assert [] == store.list()
    assert 0 == on_disk(caches[1]).count(SECRET.encode())


def test_an_imported_row_is_erased_like_any_write(db_path: Path, keys: Keys) -> None:
    """A legacy row imported (and signed) is erased from the log it was imported into."""
    legacy = db_path.parent / "legacy.db"
    legacy_file(
        legacy,
        [(1, "learning", f"old {SECRET}", "x", 1.0, None, 1700000000.0, "", "", "codex")],
        LEGACY_SCHEMA,
    )
    with SQLiteMemoryStore(db_path) as store:
        store.add("learning", "first", ["x"])
    operated(db_path, keys("ops"))
    with Ledger.open(db_path, read_only=False) as ledger:
        ledger.import_legacy(legacy, key=keys("ops"))
        imported = ledger.event_log.head().position
        done = ledger.erase([imported], reason="leak", key=keys("ops"))
        assert ledger.verify().ok
    assert 1 == len(done.erased)
    assert 0 == on_disk(db_path).count(SECRET.encode())


def test_a_rebuilt_read_model_keeps_the_erasure(db_path: Path, keys: Keys) -> None:
    """Refolding the log after an erasure shows no text and compares equal (verify --deep)."""
    with SQLiteMemoryStore(db_path) as store:
        CrossTaskKB(store).publish("ops", "k", "before", scope="project")
        CrossTaskKB(store).publish("ops", "k", SECRET, scope="project")
    operated(db_path, keys("ops"))
    with Ledger.open(db_path, read_only=False) as ledger:
        ledger.erase([2], reason="leak", key=keys("ops"))
        assert ledger.rebuild().matches
        assert ledger.verify(deep=True).ok
    with SQLiteMemoryStore(db_path) as store:
        assert ["before"] == [f.value for f in CrossTaskKB(store).subscribe("ops", scope="project")]
    assert 0 == on_disk(db_path).count(SECRET.encode())
