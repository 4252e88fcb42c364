"""Inclusion and consistency proofs from a real log, checked offline, and proofs that must fail;
a kept Prover over a log that grows, is rewritten or replaced; nothing written into the log."""

from __future__ import annotations

import hashlib
import os
import sqlite3
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import msgspec
import pytest

from eventlog import (
    CorruptLogError,
    InvalidInputError,
    InvalidTypeError,
    RecordedEvent,
    SQLiteEventLog,
    StoredRow,
    open_log,
)
from eventlog.chain import SHA256
from eventlog.contract import fact, memory
from replay import (
    Checkpoint,
    ConsistencyProof,
    InclusionProof,
    Prover,
    checkpoint,
    prove_consistency,
    prove_inclusion,
    verify_consistency,
    verify_inclusion,
)
from tests.eventlog.test_tampering import _raw, rewrite_with_chain_recomputed
from tests.replay.test_merkle import sha256_path

SIZES = (0, 1, 5, 16, 17, 37)


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[int, Checkpoint]]:
    """A log of 37 events and the checkpoints taken as it grew."""
    path = tmp_path_factory.mktemp("proofs") / "log.db"
    log = open_log(path)
    taken: dict[int, Checkpoint] = {}
    for size in SIZES:
        log.append_many([memory(f"entry {i}") for i in range(log.head().position, size)])
        taken[size] = checkpoint(path)
    log.close()
    return path, taken


def stored(path: Path) -> list[StoredRow]:
    log = open_log(path, read_only=True)
    try:
        return list(log.scan())
    finally:
        log.close()


# -- inclusion ------------------------------------------------------------------------------


@pytest.mark.parametrize("size", [1, 5, 17, 37])
def test_every_event_is_proven_in_every_checkpoint(
    history: tuple[Path, dict[int, Checkpoint]], size: int
) -> None:
    """For each checkpoint, each event it covers has a proof that verifies offline, and the
    path is the one the RFC reference computes."""
    path, taken = history
    rows = stored(path)
    for position in range(1, size + 1):
        proof = prove_inclusion(path, position, taken[size])
        leaf = SHA256.leaf_hash(rows[position - 1].body)
        expected = [h.hex() for h in sha256_path(position - 1, [r.body for r in rows[:size]])]
        assert (leaf.hex(), expected) == (proof.leaf_hash, list(proof.path))
        assert verify_inclusion(proof, leaf, taken[size])


def test_event_can_be_given_as_hash_hex_record_or_row(
    history: tuple[Path, dict[int, Checkpoint]],
) -> None:
    """The event may be its leaf hash (bytes or hex), its RecordedEvent or its StoredRow."""
    path, taken = history
    proof = prove_inclusion(path, 23, taken[37])
    row = stored(path)[22]
    log = open_log(path, read_only=True)
    record = log.event_at(23)
    log.close()
    forms: list[bytes | str | RecordedEvent | StoredRow] = [
        SHA256.leaf_hash(row.body),
        SHA256.leaf_hash(row.body).hex(),
        record,
        row,
    ]
    assert [True] * 4 == [verify_inclusion(proof, form, taken[37]) for form in forms]


def test_proof_is_plain_data_that_round_trips_as_json(
    history: tuple[Path, dict[int, Checkpoint]],
) -> None:
    """A proof sent as JSON and read back still verifies."""
    path, taken = history
    proof = prove_inclusion(path, 9, taken[17])
    again = msgspec.json.decode(msgspec.json.encode(proof), type=InclusionProof)
    assert verify_inclusion(again, again.leaf_hash, taken[17])


def _flip(text: str) -> str:
    return ("1" if text[0] == "0" else "0") + text[1:]


INCLUSION_TAMPERS: dict[str, Callable[[InclusionProof], InclusionProof]] = {
    "wrong position": lambda p: msgspec.structs.replace(p, position=p.position + 1),
    "wrong size": lambda p: msgspec.structs.replace(p, size=p.size - 1),
    "flipped bit": lambda p: msgspec.structs.replace(p, path=(_flip(p.path[0]), *p.path[1:])),
    "truncated path": lambda p: msgspec.structs.replace(p, path=p.path[:-1]),
    "extended path": lambda p: msgspec.structs.replace(p, path=(*p.path, p.path[-1])),
    "swapped siblings": lambda p: msgspec.structs.replace(
        p, path=(p.path[1], p.path[0], *p.path[2:])
    ),
    "other log": lambda p: msgspec.structs.replace(p, log_id="someone-else"),
    "other leaf in proof": lambda p: msgspec.structs.replace(p, leaf_hash=_flip(p.leaf_hash)),
    "malformed hex": lambda p: msgspec.structs.replace(p, path=("zz" * 32, *p.path[1:])),
    "short hash": lambda p: msgspec.structs.replace(p, path=(p.path[0][:-2], *p.path[1:])),
    "path not a tuple": lambda p: msgspec.structs.replace(p, path="".join(p.path)),
    "position not an int": lambda p: msgspec.structs.replace(p, position=str(p.position)),
    "position a bool": lambda p: msgspec.structs.replace(p, position=True),
    "huge path": lambda p: msgspec.structs.replace(p, path=p.path * 20),
}


@pytest.mark.parametrize("tamper", INCLUSION_TAMPERS)
def test_tampered_inclusion_proof_fails_closed(
    history: tuple[Path, dict[int, Checkpoint]], tamper: str
) -> None:
    """A changed proof gives False, never an exception."""
    path, taken = history
    proof = prove_inclusion(path, 6, taken[37])
    assert verify_inclusion(proof, proof.leaf_hash, taken[37])
    changed = INCLUSION_TAMPERS[tamper](proof)
    assert not verify_inclusion(changed, proof.leaf_hash, taken[37])


def test_inclusion_proof_for_another_tree_fails(
    history: tuple[Path, dict[int, Checkpoint]],
) -> None:
    """A proof against the checkpoint of 17 does not verify against the checkpoint of 37."""
    path, taken = history
    proof = prove_inclusion(path, 6, taken[17])
    assert not verify_inclusion(proof, proof.leaf_hash, taken[37])
    assert not verify_inclusion(msgspec.structs.replace(proof, size=37), proof.leaf_hash, taken[37])


def test_inclusion_of_another_event_fails(history: tuple[Path, dict[int, Checkpoint]]) -> None:
    """A proof for one event does not prove another, in any form."""
    path, taken = history
    proof = prove_inclusion(path, 6, taken[37])
    other = stored(path)[7]
    assert [False] * 4 == [
        verify_inclusion(proof, SHA256.leaf_hash(other.body), taken[37]),
        verify_inclusion(proof, other, taken[37]),
        verify_inclusion(proof, other._replace(position=6), taken[37]),
        verify_inclusion(proof, b"short", taken[37]),
    ]


@pytest.mark.parametrize(
    ("args", "error"),
    [
        ((0,), InvalidInputError),
        ((38,), InvalidInputError),
        ((True,), InvalidTypeError),
        (("3",), InvalidTypeError),
    ],
)
def test_prove_inclusion_refuses_bad_positions(
    history: tuple[Path, dict[int, Checkpoint]], args: tuple[object], error: type[Exception]
) -> None:
    """A position must be an int from 1 to the checkpoint's size."""
    path, taken = history
    with pytest.raises(error):
        prove_inclusion(path, args[0], taken[37])  # type: ignore[arg-type]


def test_verify_inclusion_refuses_wrong_argument_types(
    history: tuple[Path, dict[int, Checkpoint]],
) -> None:
    """Only arguments of the wrong type raise, with InvalidTypeError."""
    path, taken = history
    proof = prove_inclusion(path, 2, taken[5])
    calls: list[Callable[[], bool]] = [
        lambda: verify_inclusion("proof", proof.leaf_hash, taken[5]),  # type: ignore[arg-type]
        lambda: verify_inclusion(proof, 42, taken[5]),  # type: ignore[arg-type]
        lambda: verify_inclusion(proof, bytearray(32), taken[5]),  # type: ignore[arg-type]
        lambda: verify_inclusion(proof, proof.leaf_hash, str(taken[5])),  # type: ignore[arg-type]
    ]
    for call in calls:
        with pytest.raises(InvalidTypeError):
            call()


def test_prove_refuses_a_checkpoint_of_another_log(
    tmp_path: Path, history: tuple[Path, dict[int, Checkpoint]]
) -> None:
    """Proving against another log's checkpoint is refused, naming both logs."""
    _, taken = history
    other = tmp_path / "other.db"
    log = open_log(other)
    log.append_many([memory(f"x{i}") for i in range(40)])
    log.close()
    with pytest.raises(InvalidInputError, match=taken[37].log_id):
        prove_inclusion(other, 1, taken[37])


def test_prove_refuses_a_checkpoint_larger_than_the_log(tmp_path: Path) -> None:
    """A checkpoint covering more events than the log holds means a cut-off tail."""
    path = tmp_path / "log.db"
    log = open_log(path)
    log.append_many([memory(f"x{i}") for i in range(3)])
    log.close()
    taken = checkpoint(path)
    bigger = msgspec.structs.replace(taken, size=4)
    with pytest.raises(InvalidInputError, match="fewer than"):
        prove_inclusion(path, 1, bigger)


def test_prove_refuses_a_rewritten_log(tmp_path: Path) -> None:
    """After a history rewrite with the chain recomputed, old checkpoints get no proofs."""
    path = tmp_path / "log.db"
    log = open_log(path)
    log.append_many([fact(f"k{i}", f"v{i}") for i in range(20)])
    log.close()
    before = checkpoint(path)
    rewrite_with_chain_recomputed(_raw(path))
    with pytest.raises(InvalidInputError, match="no longer matches"):
        prove_inclusion(path, 1, before)


def test_proof_against_a_forged_root_does_not_verify(
    history: tuple[Path, dict[int, Checkpoint]],
) -> None:
    """A checkpoint with the right chain hash but another root gets no proof: a proof is
    checked against its checkpoint before it is returned, and proving inclusion or
    consistency with it is refused."""
    path, taken = history
    forged = msgspec.structs.replace(taken[17], root=taken[16].root)
    with pytest.raises(InvalidInputError, match="not taken from this log"):
        prove_inclusion(path, 3, forged)
    with pytest.raises(InvalidInputError, match="not taken from this log"):
        prove_consistency(path, taken[5], forged)


def make_log(path: Path, count: int) -> None:
    log = open_log(path)
    log.append_many([fact(f"k{i}", f"v{i}") for i in range(count)])
    log.close()


def append(path: Path, count: int) -> None:
    log = open_log(path)
    start = log.head().position
    log.append_many([memory(f"later {start + i}") for i in range(count)])
    log.close()


@pytest.fixture
def prover(tmp_path: Path) -> Iterator[Prover]:
    """A prover kept over a log of 20 events (opened read-only), closed afterwards."""
    path = tmp_path / "log.db"
    make_log(path, 20)
    log = CountingLog(path)
    yield Prover(log)
    log.close()


class CountingLog(SQLiteEventLog):
    """A read-only log that counts the rows scanned through it."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, read_only=True)
        self.scanned = 0

    def scan(
        self, *, after: int = 0, until: int | None = None, limit: int | None = None
    ) -> Iterator[StoredRow]:
        for row in super().scan(after=after, until=until, limit=limit):
            self.scanned += 1
            yield row


def counted(prover: Prover) -> CountingLog:
    assert isinstance(prover.log, CountingLog)
    return prover.log


@pytest.mark.parametrize("kept", [True, False], ids=["kept prover", "path functions"])
@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE fl_events SET body = CAST(body || x'20' AS BLOB) WHERE position = 3",
        "DELETE FROM fl_events WHERE position = 3",
        "DELETE FROM fl_events WHERE position = 18",
    ],
    ids=["row edited in an indexed tile", "row deleted in an indexed tile", "row deleted after"],
)
def test_prove_notices_rows_changed_after_indexing(
    tmp_path: Path, statement: str, kept: bool
) -> None:
    """A row changed or deleted after the checkpoint makes proving fail loudly, whether a kept
    prover indexed it before the change or the log is walked afresh."""
    path = tmp_path / "log.db"
    make_log(path, 20)
    log = open_log(path, read_only=True)
    prover = Prover(log)
    taken = prover.checkpoint()
    conn = _raw(path)
    conn.execute(statement)
    conn.close()
    position = 4 if "position = 3" in statement else 19
    with pytest.raises(CorruptLogError, match="run verify"):
        if kept:
            prover.prove_inclusion(position, taken)
        else:
            prove_inclusion(path, position, taken)
    log.close()


# -- investigations never write the evidence ------------------------------------------------


def evidence(path: Path) -> tuple[str, int, int, list[tuple[Any, ...]]]:
    """The file's digest and modification time, the bytes in its write-ahead log, its schema."""
    wal = path.with_name(path.name + "-wal")
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    schema = conn.execute("SELECT type, name FROM sqlite_master ORDER BY name").fetchall()
    conn.close()
    return (
        hashlib.sha256(path.read_bytes()).hexdigest(),
        path.stat().st_mtime_ns,
        wal.stat().st_size if wal.exists() else 0,
        schema,
    )


def test_checkpoint_and_prove_leave_the_file_as_it_was(tmp_path: Path) -> None:
    """Checkpoints and proofs, by path or from a kept prover, change no byte of the file,
    its modification time or write-ahead log, and add no table to it."""
    path = tmp_path / "log.db"
    make_log(path, 40)
    before = evidence(path)
    old = checkpoint(path)
    append(path, 10)
    grown = evidence(path)
    new = checkpoint(path)
    prove_inclusion(path, 33, new)
    prove_consistency(path, old, new)
    log = open_log(path, read_only=True)
    prover = Prover(log)
    prover.prove_inclusion(7, prover.checkpoint())
    log.close()
    assert before[3] == grown[3]
    assert grown == evidence(path)


def test_proofs_from_a_read_only_file_are_the_same(
    tmp_path: Path, history: tuple[Path, dict[int, Checkpoint]]
) -> None:
    """A file and folder nobody may write give the same checkpoint and proofs."""
    path, taken = history
    folder = tmp_path / "sealed"
    folder.mkdir()
    copy = folder / "copy.db"
    source, target = sqlite3.connect(path), sqlite3.connect(copy)
    source.backup(target)
    source.close()
    target.close()
    copy.chmod(0o444)
    folder.chmod(0o555)
    try:
        assert taken[37] == checkpoint(copy)
        assert prove_inclusion(path, 30, taken[37]) == prove_inclusion(copy, 30, taken[37])
        assert prove_consistency(path, taken[5], taken[37]) == prove_consistency(
            copy, taken[5], taken[37]
        )
    finally:
        folder.chmod(0o755)


# -- a kept prover ---------------------------------------------------------------------------


def test_a_kept_prover_proves_what_the_path_functions_prove(
    history: tuple[Path, dict[int, Checkpoint]],
) -> None:
    """One prover, kept, gives every checkpoint and proof the path functions give."""
    path, taken = history
    log = open_log(path, read_only=True)
    prover = Prover(log)
    assert taken[37] == prover.checkpoint()
    for old in SIZES:
        for new in SIZES:
            if 0 < old <= new:
                assert prove_inclusion(path, old, taken[new]) == prover.prove_inclusion(
                    old, taken[new]
                )
                assert prove_consistency(path, taken[old], taken[new]) == (
                    prover.prove_consistency(taken[old], taken[new])
                )
    log.close()


def test_a_kept_prover_follows_a_growing_log_reading_only_new_rows(
    tmp_path: Path, prover: Prover
) -> None:
    """As the log grows, the prover's checkpoints and proofs describe it as it is now, and
    each call walks only the rows appended since the last, plus a tile or two."""
    path = Path(counted(prover).path)
    first = prover.checkpoint()
    assert 20 == first.size
    for more in (1, 15, 30, 100):
        append(path, more)
        counted(prover).scanned = 0
        taken = prover.checkpoint()
        assert checkpoint(path) == taken
        assert counted(prover).scanned <= more + 2 * 16
        counted(prover).scanned = 0
        proof = prover.prove_inclusion(taken.size, taken)
        assert verify_inclusion(proof, proof.leaf_hash, taken)
        assert verify_consistency(prover.prove_consistency(first, taken), first, taken)
        assert counted(prover).scanned <= 2 * 16


def test_a_kept_prover_starts_over_after_a_rewritten_history(
    prover: Prover, caplog: pytest.LogCaptureFixture
) -> None:
    """When the chain hash it walked to changes, the prover says so, refuses the old
    checkpoint, and describes the log as it now is."""
    path = Path(counted(prover).path)
    before = prover.checkpoint()
    prover.prove_inclusion(1, before)  # the index now holds subtrees it walked
    rewrite_with_chain_recomputed(_raw(path))
    caplog.set_level("DEBUG", logger="factledger")
    caplog.clear()
    with pytest.raises(InvalidInputError, match="no longer matches"):
        prover.prove_inclusion(1, before)
    assert ["merkle_index_rebuild"] == [record.msg for record in caplog.records]
    after = prover.checkpoint()
    assert checkpoint(path) == after and after.chain_hash != before.chain_hash
    proof = prover.prove_inclusion(3, after)
    assert verify_inclusion(proof, proof.leaf_hash, after)


def test_a_kept_prover_of_a_shorter_log_starts_over(prover: Prover) -> None:
    """A log cut shorter than what the prover walked is walked again, and its checkpoint
    covers what is left."""
    path = Path(counted(prover).path)
    prover.checkpoint()
    conn = _raw(path)
    conn.execute("DELETE FROM fl_events WHERE position > 5")
    conn.close()
    assert checkpoint(path) == prover.checkpoint()


def test_a_replaced_file_is_never_confused_with_the_old_one(tmp_path: Path) -> None:
    """After the file at a path is replaced by another log, proofs by path come from the new
    file and refuse the old log's checkpoints; a prover kept from before still proves the log
    it opened."""
    path = tmp_path / "a.db"
    make_log(path, 20)
    old_checkpoint = checkpoint(path)
    log = open_log(path, read_only=True)
    kept = Prover(log)
    kept_proof = kept.prove_inclusion(3, old_checkpoint)
    make_log(tmp_path / "other.db", 30)
    os.replace(tmp_path / "other.db", path)
    with pytest.raises(InvalidInputError, match="checkpoint is for log"):
        prove_inclusion(path, 3, old_checkpoint)
    new_checkpoint = checkpoint(path)
    assert (30, False) == (new_checkpoint.size, new_checkpoint.log_id == old_checkpoint.log_id)
    proof = prove_inclusion(path, 3, new_checkpoint)
    assert verify_inclusion(proof, proof.leaf_hash, new_checkpoint)
    assert not verify_inclusion(proof, proof.leaf_hash, old_checkpoint)
    assert (old_checkpoint, kept_proof) == (
        kept.checkpoint(),
        kept.prove_inclusion(3, old_checkpoint),
    )
    with pytest.raises(InvalidInputError, match="checkpoint is for log"):
        kept.prove_inclusion(3, new_checkpoint)
    log.close()


def test_threads_sharing_one_prover_get_proofs_that_verify(prover: Prover) -> None:
    """Eight threads proving through one prover at once, while it catches up: every proof
    verifies."""
    path = Path(counted(prover).path)
    append(path, 20)
    taken = checkpoint(path)

    def prove_some(offset: int) -> list[bool]:
        proofs = [prover.prove_inclusion(1 + (offset + n) % 40, taken) for n in range(25)]
        return [verify_inclusion(p, p.leaf_hash, taken) for p in proofs]

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = [ok for batch in pool.map(prove_some, range(8)) for ok in batch]
    assert [True] * 200 == results


# -- consistency ----------------------------------------------------------------------------


def test_every_pair_of_checkpoints_is_consistent(
    history: tuple[Path, dict[int, Checkpoint]],
) -> None:
    """Each checkpoint is proven a prefix of each later one, and the proof checks offline."""
    path, taken = history
    for old in SIZES:
        for new in SIZES:
            if old <= new:
                proof = prove_consistency(path, taken[old], taken[new])
                assert verify_consistency(proof, taken[old], taken[new]), (old, new)


CONSISTENCY_TAMPERS: dict[str, Callable[[ConsistencyProof], ConsistencyProof]] = {
    "flipped bit": lambda p: msgspec.structs.replace(p, path=(_flip(p.path[0]), *p.path[1:])),
    "truncated path": lambda p: msgspec.structs.replace(p, path=p.path[:-1]),
    "extended path": lambda p: msgspec.structs.replace(p, path=(*p.path, p.path[-1])),
    "swapped nodes": lambda p: msgspec.structs.replace(p, path=(p.path[1], p.path[0], *p.path[2:])),
    "wrong old size": lambda p: msgspec.structs.replace(p, old_size=p.old_size + 1),
    "wrong new size": lambda p: msgspec.structs.replace(p, new_size=p.new_size - 1),
    "other log": lambda p: msgspec.structs.replace(p, log_id="someone-else"),
    "malformed hex": lambda p: msgspec.structs.replace(p, path=("xy" * 32, *p.path[1:])),
    "path not a tuple": lambda p: msgspec.structs.replace(p, path=None),
}


@pytest.mark.parametrize("tamper", CONSISTENCY_TAMPERS)
def test_tampered_consistency_proof_fails_closed(
    history: tuple[Path, dict[int, Checkpoint]], tamper: str
) -> None:
    """A changed consistency proof gives False, never an exception."""
    path, taken = history
    proof = prove_consistency(path, taken[5], taken[37])
    assert len(proof.path) >= 2
    changed = CONSISTENCY_TAMPERS[tamper](proof)
    assert not verify_consistency(changed, taken[5], taken[37])


def test_consistency_proof_for_other_checkpoints_fails(
    history: tuple[Path, dict[int, Checkpoint]],
) -> None:
    """A proof between two checkpoints proves nothing about other pairs, or the reverse."""
    path, taken = history
    proof = prove_consistency(path, taken[5], taken[17])
    assert [False] * 3 == [
        verify_consistency(proof, taken[5], taken[37]),
        verify_consistency(proof, taken[1], taken[17]),
        verify_consistency(proof, taken[17], taken[5]),
    ]


def test_equal_and_empty_checkpoints_need_an_empty_proof(
    history: tuple[Path, dict[int, Checkpoint]],
) -> None:
    """Same size: empty path and identical checkpoints. From size 0: empty path, and the old
    checkpoint must really be the empty tree at the genesis."""
    path, taken = history
    same = prove_consistency(path, taken[17], taken[17])
    from_empty = prove_consistency(path, taken[0], taken[17])
    forged_empty = msgspec.structs.replace(taken[0], root=taken[1].root)
    padded = msgspec.structs.replace(same, path=(taken[17].root.hex(),))
    assert (True, True) == (
        verify_consistency(same, taken[17], taken[17]),
        verify_consistency(from_empty, taken[0], taken[17]),
    )
    assert (False, False) == (
        verify_consistency(padded, taken[17], taken[17]),
        verify_consistency(from_empty, forged_empty, taken[17]),
    )


def test_prove_consistency_refuses_bad_checkpoints(
    history: tuple[Path, dict[int, Checkpoint]],
) -> None:
    """Old after new, two logs, or a non-checkpoint are refused with clear errors."""
    path, taken = history
    with pytest.raises(InvalidInputError, match="larger"):
        prove_consistency(path, taken[37], taken[5])
    with pytest.raises(InvalidInputError, match="two logs"):
        prove_consistency(path, msgspec.structs.replace(taken[5], log_id="x"), taken[37])
    with pytest.raises(InvalidTypeError):
        prove_consistency(path, 5, taken[37])  # type: ignore[arg-type]


def test_verify_consistency_refuses_wrong_argument_types(
    history: tuple[Path, dict[int, Checkpoint]],
) -> None:
    """Only arguments of the wrong type raise."""
    path, taken = history
    proof = prove_consistency(path, taken[5], taken[37])
    with pytest.raises(InvalidTypeError):
        verify_consistency("proof", taken[5], taken[37])  # type: ignore[arg-type]
    with pytest.raises(InvalidTypeError):
        verify_consistency(proof, taken[5], None)  # type: ignore[arg-type]
