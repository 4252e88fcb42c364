"""The Merkle index kept beside the read model: the write path extends it, a fresh ledger
proves from it walking only the rows past it, and an index edited, dropped or left behind
a rewritten history never yields a wrong proof."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from eventlog import CorruptLogError, SQLiteEventLog, chain_at, open_log
from eventlog.contract import memory
from projections import SQLiteMemoryStore
from projections.internal import MerkleIndex
from replay import (
    Checkpoint,
    Ledger,
    checkpoint,
    rebuild,
    verify_consistency,
    verify_inclusion,
)
from tests.eventlog.test_tampering import _raw, rewrite_with_chain_recomputed

EVENTS = 300
"""Appended through a store: past the first step at which writes extend the index (256),
18 whole tiles of 16 and a partial one."""


def make_store_log(path: Path, count: int = EVENTS) -> None:
    store = SQLiteMemoryStore(path)
    try:
        store.add_many([{"type": "learning", "content": f"entry {i}"} for i in range(count - 5)])
        for i in range(5):
            store.add("learning", f"single {i}")
    finally:
        store.close()


def state(path: Path) -> tuple[int, str] | None:
    conn = sqlite3.connect(path)
    try:
        row = conn.execute("SELECT size, chain_hash FROM fl_merkle_state").fetchone()
    except sqlite3.OperationalError:
        return None
    finally:
        conn.close()
    return None if row is None else (row[0], row[1])


def edit(path: Path, statement: str) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute(statement)
    finally:
        conn.close()


def stored_chain(path: Path, position: int) -> str | None:
    log = open_log(path, read_only=True)
    try:
        return chain_at(log, position)
    finally:
        log.close()


@pytest.fixture
def walked(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[int, int]]]:
    """The (start, end) of every run of rows an index walks and verifies."""
    runs: list[tuple[int, int]] = []
    original = MerkleIndex._verified_leaves

    def recording(self: MerkleIndex, start: int, end: int) -> tuple[list[bytes], bytes]:
        runs.append((start, end))
        return original(self, start, end)

    monkeypatch.setattr(MerkleIndex, "_verified_leaves", recording)
    yield runs


@pytest.fixture
def logged(tmp_path: Path) -> tuple[Path, Checkpoint]:
    """A log written through a store, and a checkpoint of it taken by walking the log."""
    path = tmp_path / "memory.db"
    make_store_log(path)
    return path, checkpoint(path)


def proven(path: Path, taken: Checkpoint, *, read_only: bool = True) -> None:
    """Every position proves against `taken` through one fresh ledger, and each proof checks."""
    with Ledger.open(path, read_only=read_only) as ledger:
        for position in range(1, taken.size + 1):
            proof = ledger.prove_inclusion(position, taken)
            assert verify_inclusion(proof, proof.leaf_hash, taken)


def test_the_write_path_keeps_the_index_up_to_its_last_whole_tile(tmp_path: Path) -> None:
    """Appends through a store extend the index in their own transaction as the log crosses
    each 256 events: it then reaches the last whole tile, at the chain value the log stores
    there."""
    path = tmp_path / "memory.db"
    make_store_log(path)
    head = open_log(path, read_only=True)
    try:
        size = head.head().position
    finally:
        head.close()
    kept = state(path)
    assert kept is not None
    assert (size - size % 16, stored_chain(path, size - size % 16)) == kept


def test_a_fresh_read_only_ledger_proves_walking_only_the_rows_past_the_index(
    logged: tuple[Path, Checkpoint], walked: list[tuple[int, int]]
) -> None:
    """A fresh ledger opened read-only proves from the kept index: it walks no row the index
    covers, and writes nothing to the file."""
    path, taken = logged
    kept = state(path)
    assert kept is not None
    before = path.read_bytes()
    proven(path, taken)
    assert [] == [(start, end) for start, end in walked if start < kept[0]]
    assert before == path.read_bytes()


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE fl_merkle_nodes SET hash = randomblob(32)",
        "UPDATE fl_merkle_nodes SET hash = x'00'",
        "UPDATE fl_merkle_nodes SET hash = 'text'",
        "DELETE FROM fl_merkle_nodes WHERE level > 4",
        "DELETE FROM fl_merkle_nodes",
        "UPDATE fl_merkle_state SET chain_hash = 'zz'",
        "UPDATE fl_merkle_state SET size = 17",
        "UPDATE fl_merkle_state SET size = 100000",
        "UPDATE fl_merkle_state SET version = 99",
        "DELETE FROM fl_merkle_state",
        "DROP TABLE fl_merkle_nodes",
        "DROP TABLE fl_merkle_state",
    ],
)
@pytest.mark.parametrize("read_only", [True, False])
def test_an_index_edited_by_hand_never_yields_a_wrong_proof(
    logged: tuple[Path, Checkpoint], statement: str, read_only: bool
) -> None:
    """Whatever is done to the kept index, every proof returned verifies against the
    checkpoint taken from the log (read-only: proven from the log in memory)."""
    path, taken = logged
    edit(path, statement)
    proven(path, taken, read_only=read_only)


def test_a_forged_index_is_rebuilt_from_the_log_by_a_ledger_that_may_write(
    logged: tuple[Path, Checkpoint],
) -> None:
    """A forged index makes a ledger opened for writing rebuild it from the log: afterwards
    the tables hold what the write path wrote."""
    path, taken = logged
    conn = sqlite3.connect(path)
    honest = conn.execute("SELECT level, idx, hash FROM fl_merkle_nodes ORDER BY 1, 2").fetchall()
    conn.close()
    edit(path, "UPDATE fl_merkle_nodes SET hash = randomblob(32)")
    proven(path, taken, read_only=False)
    conn = sqlite3.connect(path)
    rebuilt = conn.execute("SELECT level, idx, hash FROM fl_merkle_nodes ORDER BY 1, 2").fetchall()
    conn.close()
    assert honest == rebuilt


def test_a_forged_index_is_left_alone_by_a_read_only_ledger(
    logged: tuple[Path, Checkpoint],
) -> None:
    """A read-only ledger proves around a forged index without writing the file."""
    path, taken = logged
    edit(path, "UPDATE fl_merkle_nodes SET hash = zeroblob(32)")
    before = path.read_bytes()
    proven(path, taken)
    assert before == path.read_bytes()


def test_a_checkpoint_is_never_taken_from_a_kept_index(logged: tuple[Path, Checkpoint]) -> None:
    """A checkpoint's root comes from subtrees the ledger hashed itself: a forged index
    changes nothing in it."""
    path, taken = logged
    edit(path, "UPDATE fl_merkle_nodes SET hash = randomblob(32)")
    with Ledger.open(path) as ledger:
        assert taken == ledger.checkpoint()


def test_consistency_proofs_from_a_forged_index_verify(tmp_path: Path) -> None:
    """A consistency proof made while the index is forged still verifies."""
    path = tmp_path / "memory.db"
    make_store_log(path, 100)
    old = checkpoint(path)
    make_store_log(path, 200)
    new = checkpoint(path)
    edit(path, "UPDATE fl_merkle_nodes SET hash = randomblob(32)")
    with Ledger.open(path) as ledger:
        proof = ledger.prove_consistency(old, new)
    assert verify_consistency(proof, old, new)


def test_a_rewritten_history_restarts_the_index(tmp_path: Path) -> None:
    """After the history is rewritten with its chain recomputed, the index's recorded chain
    value no longer matches: proofs against a checkpoint of the new history verify, and the
    old checkpoint gets none."""
    path = tmp_path / "memory.db"
    make_store_log(path)
    before = checkpoint(path)
    conn = _raw(path)
    rewrite_with_chain_recomputed(conn)
    conn.close()
    after = checkpoint(path)
    assert before.root != after.root
    proven(path, after)
    proven(path, after, read_only=False)
    kept = state(path)
    assert kept is not None
    assert stored_chain(path, kept[0]) == kept[1]


def test_a_dropped_index_is_rebuilt_by_the_next_write_and_by_rebuild_swap(
    logged: tuple[Path, Checkpoint],
) -> None:
    """Dropped tables come back: `rebuild --swap` rebuilds the index, and a store's writes
    do when the log is at most 4,096 events past it."""
    path, _ = logged
    edit(path, "DROP TABLE fl_merkle_nodes")
    edit(path, "DROP TABLE fl_merkle_state")
    assert rebuild(path, swap=True).matches
    tiles = EVENTS - EVENTS % 16
    assert (tiles, stored_chain(path, tiles)) == state(path)
    edit(path, "DELETE FROM fl_merkle_state")
    make_store_log(path, 256)
    size = EVENTS + 256
    assert (size - size % 16, stored_chain(path, size - size % 16)) == state(path)


def test_appends_around_the_api_are_walked_not_trusted(
    logged: tuple[Path, Checkpoint], walked: list[tuple[int, int]]
) -> None:
    """Rows appended straight to the log (no store, so no index kept for them) are walked
    and verified from where the index stopped, and proven."""
    path, _ = logged
    log = SQLiteEventLog(path)
    log.append_many([memory(f"raw {i}") for i in range(40)])
    log.close()
    kept = state(path)
    assert kept is not None
    taken = checkpoint(path)
    walked.clear()
    proven(path, taken)
    assert all(start >= kept[0] for start, _ in walked)
    assert walked


def test_a_cache_keeps_the_index_of_a_log_held_elsewhere(tmp_path: Path) -> None:
    """Read through a host's cache, a log held elsewhere has its index kept in the cache
    file (written even by a read-only ledger: the cache is not evidence), never in the log."""
    path = tmp_path / "log.db"
    make_store_log(path)
    edit(path, "DROP TABLE fl_merkle_nodes")
    edit(path, "DROP TABLE fl_merkle_state")
    taken = checkpoint(path)
    cache = tmp_path / "host" / "cache.db"
    with Ledger.open(path, cache=cache) as ledger:
        proof = ledger.prove_inclusion(7, taken)
    assert verify_inclusion(proof, proof.leaf_hash, taken)
    assert (taken.size - taken.size % 16, stored_chain(path, taken.size - taken.size % 16)) == (
        state(cache)
    )
    assert state(path) is None
    edit(cache, "UPDATE fl_merkle_nodes SET hash = randomblob(32)")
    with Ledger.open(path, cache=cache) as ledger:
        proof = ledger.prove_inclusion(9, taken)
    assert verify_inclusion(proof, proof.leaf_hash, taken)


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE fl_merkle_nodes SET hash = x'00'",
        "DELETE FROM fl_merkle_nodes",
        "UPDATE fl_merkle_state SET size = 'many'",
        "DROP TABLE fl_merkle_nodes",
    ],
)
def test_a_damaged_index_never_stops_a_write(tmp_path: Path, statement: str) -> None:
    """Writes go on whatever was done to the index, and what they append is proven."""
    path = tmp_path / "memory.db"
    make_store_log(path)
    edit(path, statement)
    make_store_log(path)
    taken = checkpoint(path)
    assert 2 * EVENTS == taken.size
    proven(path, taken)


@pytest.fixture
def handed(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[bool]]:
    """For each run of rows the write path indexed, whether the appends' links covered it
    (else the rows were read back)."""
    runs: list[bool] = []
    original = MerkleIndex._handed_leaves

    def recording(self: MerkleIndex, start: int, end: int) -> tuple[list[bytes], bytes] | None:
        found = original(self, start, end)
        runs.append(found is not None)
        return found

    monkeypatch.setattr(MerkleIndex, "_handed_leaves", recording)
    yield runs


def test_the_write_path_indexes_the_links_its_appends_handed_over(
    tmp_path: Path, handed: list[bool]
) -> None:
    """Single adds and batches through one store extend the index from the leaf hashes and
    chain values their appends computed, without reading the rows back; every position
    then proves against a checkpoint taken by walking the log."""
    path = tmp_path / "memory.db"
    store = SQLiteMemoryStore(path)
    try:
        for i in range(300):
            store.add("learning", f"single {i}")
        store.add_many([{"type": "learning", "content": f"entry {i}"} for i in range(700)])
    finally:
        store.close()
    assert handed and all(handed)
    kept = state(path)
    assert kept is not None and (992, stored_chain(path, 992)) == kept
    proven(path, checkpoint(path))


def test_links_of_a_rolled_back_append_are_not_indexed_where_another_writer_wrote(
    tmp_path: Path, handed: list[bool]
) -> None:
    """A store's append that rolls back, whose positions another writer then fills with other
    events, leaves links that do not run on to the store's next append: the index reads
    those rows back and matches the log."""
    path = tmp_path / "memory.db"
    store = SQLiteMemoryStore(path)
    try:
        store.add_many([{"type": "learning", "content": f"entry {i}"} for i in range(240)])
        with pytest.raises(RuntimeError), store.write_transaction() as tx:
            tx.append([memory(f"rolled back {i}") for i in range(6)])
            raise RuntimeError("undo")
        other = SQLiteEventLog(path)
        other.append_many([memory(f"other writer {i}") for i in range(6)])
        other.close()
        handed.clear()
        store.add_many([{"type": "learning", "content": f"later {i}"} for i in range(20)])
    finally:
        store.close()
    assert [False] == handed
    kept = state(path)
    assert kept is not None and (256, stored_chain(path, 256)) == kept
    proven(path, checkpoint(path))


def test_a_row_edited_between_appends_is_caught_when_proven_from_handed_links(
    tmp_path: Path, handed: list[bool]
) -> None:
    """A row edited by hand between a store's appends, before the index reaches it, is not
    read back by the write path (it indexes what it appended); a proof that reaches the
    edited row reads it and refuses: the rows changed since they were indexed."""
    path = tmp_path / "memory.db"
    store = SQLiteMemoryStore(path)
    try:
        for i in range(100):
            store.add("learning", f"single {i}")
        taken = checkpoint(path)
        conn = _raw(path)
        conn.execute("UPDATE fl_events SET body = body || X'20' WHERE position = 50")
        conn.close()
        store.add_many([{"type": "learning", "content": f"entry {i}"} for i in range(200)])
    finally:
        store.close()
    assert handed and all(handed)
    with Ledger.open(path, read_only=True) as ledger, pytest.raises(CorruptLogError):
        ledger.prove_inclusion(50, taken)
