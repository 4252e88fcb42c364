"""Kept read-only handles: lent again for the same file, never for a replaced one or in a
forked child, and closed once idle."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from eventlog import EventLog, InvalidInputError, StorageError, open_log
from replay import readers
from replay.checkpoints import checkpoint
from replay.proofs import prove_inclusion, verify_inclusion
from tests.eventlog.contract import memory


@pytest.fixture(autouse=True)
def no_kept_handles(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test starts and ends with nothing kept; idle handles close after 0.1 s."""
    monkeypatch.setattr(readers, "IDLE_SECONDS", 0.1)
    yield
    wait_until(lambda: not readers._kept)


def wait_until(condition: object, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def make_log(path: Path, events: int) -> str:
    log = open_log(path)
    try:
        for n in range(events):
            log.append(memory(f"note {n}"))
        return log.log_id
    finally:
        log.close()


def lend(path: object) -> EventLog:
    """The handle lent for `path`, given back at once (it stays kept until idle)."""
    with readers.shared_reader(path) as handle:  # type: ignore[arg-type]
        return handle


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_the_same_file_gets_the_same_handle_by_any_spelling(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "a.db"
    make_log(path, 2)
    with readers.shared_reader(path) as first:
        monkeypatch.chdir(tmp_path)
        with readers.shared_reader("a.db") as relative, readers.shared_reader(str(path)) as text:
            assert relative is first and text is first


def test_a_kept_handle_sees_every_commit_made_after_it_opened(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    make_log(path, 2)
    with readers.shared_reader(path) as handle:
        assert handle.head().position == 2
        writer = open_log(path)
        writer.append(memory("later"))
        writer.close()
        assert handle.head().position == 3


@pytest.mark.parametrize("how", ["replaced", "deleted and recreated"])
def test_a_path_naming_another_file_gets_a_new_handle(tmp_path: Path, how: str) -> None:
    path = tmp_path / "a.db"
    make_log(path, 2)
    with readers.shared_reader(path) as old:
        if how == "replaced":
            other = tmp_path / "b.db"
            new_id = make_log(other, 5)
            os.replace(other, path)
        else:
            path.unlink()
            new_id = make_log(path, 5)
        with readers.shared_reader(path) as fresh:
            assert fresh is not old
            assert fresh.log_id == new_id
            assert fresh.head().position == 5
        assert old.head().position == 2, "a borrower keeps its handle until it gives it back"


def test_a_missing_file_raises_and_nothing_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    make_log(path, 1)
    lend(path)
    path.unlink()
    with pytest.raises(StorageError, match="no such file"):
        lend(path)
    assert not readers._kept


def test_idle_handles_close_and_release_the_file(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    make_log(path, 1)
    before = open_descriptors()
    lend(path)
    assert open_descriptors() > before
    wait_until(lambda: not readers._kept)
    assert open_descriptors() == before
    writer = open_log(path)
    writer.append(memory("after"))
    writer.close()
    assert not Path(f"{path}-wal").exists(), "the last connection to close removed the WAL"


def test_a_borrowed_handle_is_never_closed_under_its_borrower(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    make_log(path, 1)
    with readers.shared_reader(path) as handle:
        time.sleep(0.5)
        assert handle.head().position == 1
        assert readers._kept


def test_at_most_kept_handles_stay_open(tmp_path: Path) -> None:
    paths = [tmp_path / f"{n}.db" for n in range(readers.KEPT + 3)]
    for path in paths:
        make_log(path, 1)
    before = open_descriptors()
    with readers.shared_reader(paths[0]) as first:
        for path in paths[1:]:
            lend(path)
        assert len(readers._kept) == readers.KEPT
        assert first.head().position == 1, "dropped from the cache, still open for its borrower"
        assert lend(paths[0]) is not first
    wait_until(lambda: not readers._kept)
    assert open_descriptors() == before


def test_a_forked_child_opens_its_own_handle(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    make_log(path, 3)
    with readers.shared_reader(path) as parent:
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child reports through its exit status
            try:
                with readers.shared_reader(path) as child:
                    ok = child is not parent and child.head().position == 3
                os._exit(0 if ok else 1)
            except BaseException:
                os._exit(2)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert lend(path) is parent


def test_proofs_after_the_file_was_swapped_come_from_the_new_file(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    make_log(path, 20)
    old_checkpoint = checkpoint(path)
    assert prove_inclusion(path, 3, old_checkpoint).size == 20
    wait_until(lambda: not readers._kept)
    make_log(tmp_path / "other.db", 30)
    os.replace(tmp_path / "other.db", path)
    with pytest.raises(InvalidInputError, match="checkpoint is for log"):
        prove_inclusion(path, 3, old_checkpoint)
    new_checkpoint = checkpoint(path)
    assert new_checkpoint.size == 30
    proof = prove_inclusion(path, 3, new_checkpoint)
    assert verify_inclusion(proof, proof.leaf_hash, new_checkpoint)
    assert not verify_inclusion(proof, proof.leaf_hash, old_checkpoint)


def test_threads_proving_at_once_share_one_handle_safely(tmp_path: Path) -> None:
    """Eight threads proving against the same file at once: every proof verifies, and they
    were all served by one kept handle."""
    path = tmp_path / "a.db"
    make_log(path, 40)
    taken = checkpoint(path)
    opened: list[str] = []
    real_open = readers._open

    def counting_open(key: str) -> readers._Handle:
        opened.append(key)
        return real_open(key)

    def prove_some(offset: int) -> list[bool]:
        proofs = [prove_inclusion(path, 1 + (offset + n) % 40, taken) for n in range(25)]
        return [verify_inclusion(p, p.leaf_hash, taken) for p in proofs]

    readers.release(path)
    original, readers._open = readers._open, counting_open
    try:
        with ThreadPoolExecutor(max_workers=8) as pool:
            results = [ok for batch in pool.map(prove_some, range(8)) for ok in batch]
    finally:
        readers._open = original
    assert len(results) == 200 and all(results)
    assert len(opened) <= 8 and len(set(opened)) == 1
