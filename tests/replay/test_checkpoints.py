"""Checkpoints: what they hold, their text form, their MAC, operator key files."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import blake3
import msgspec
import pytest

from eventlog import (
    CorruptLogError,
    InvalidInputError,
    InvalidTypeError,
    StorageError,
    open_log,
)
from eventlog.chain import genesis
from eventlog.contract import fact, memory
from replay.checkpoints import Checkpoint, checkpoint, generate_key, load_key
from replay.merkle import EMPTY_ROOT
from replay.proofs import Prover
from tests.eventlog.test_tampering import _raw, edit_payload
from tests.replay.test_merkle import ref_mth

LOG_ID = "00000000-0000-4000-8000-000000000000"
ROOT = bytes(range(32))
CHAIN = "ab" * 32


def make_log(path: Path, count: int) -> None:
    log = open_log(path)
    log.append_many([memory(f"m{i}") if i % 2 else fact(f"k{i}", f"v{i}") for i in range(count)])
    log.close()


def expected_head(path: Path) -> tuple[int, bytes, str]:
    """Size, Merkle root and chain hash, computed independently from the stored rows."""
    log = open_log(path, read_only=True)
    try:
        bodies = [row.body for row in log.scan()]
        return len(bodies), ref_mth(bodies), log.head().chain_hash
    finally:
        log.close()


def sample(**fields: object) -> Checkpoint:
    values: dict[str, object] = {"log_id": LOG_ID, "size": 7, "root": ROOT, "chain_hash": CHAIN}
    return Checkpoint(**{**values, **fields})  # type: ignore[arg-type]


@pytest.fixture
def key_path(tmp_path: Path) -> Path:
    return generate_key(tmp_path / "operator.key")


# -- what a checkpoint holds ---------------------------------------------------------------


@pytest.mark.parametrize("count", [1, 15, 16, 17, 40])
def test_checkpoint_holds_size_root_and_chain_hash(tmp_path: Path, count: int) -> None:
    """A checkpoint names the log, its size, the RFC 6962 root of its leaves and the head
    chain hash, computed here from the stored bytes by the reference."""
    path = tmp_path / "log.db"
    make_log(path, count)
    taken = checkpoint(path)
    size, root, chain_hash = expected_head(path)
    log = open_log(path, read_only=True)
    assert (log.log_id, size, root, chain_hash) == (
        taken.log_id,
        taken.size,
        taken.root,
        taken.chain_hash,
    )
    log.close()


def test_checkpoint_of_empty_log_is_the_empty_tree_at_the_genesis(tmp_path: Path) -> None:
    """Size 0: the root of the empty tree and the genesis chain value."""
    path = tmp_path / "log.db"
    open_log(path).close()
    taken = checkpoint(path)
    assert (0, EMPTY_ROOT, genesis(taken.log_id).hex()) == (
        taken.size,
        taken.root,
        taken.chain_hash,
    )


def test_checkpoint_after_growth_matches_the_reference(tmp_path: Path) -> None:
    """Checkpoints taken after more appends, by path or from one kept prover (which indexes
    whole tiles and walks the rest), still match the reference."""
    path = tmp_path / "log.db"
    make_log(path, 20)
    log = open_log(path, read_only=True)
    prover = Prover(log)
    assert checkpoint(path) == prover.checkpoint()
    for more in (30, 1, 15):
        writer = open_log(path)
        writer.append_many([memory(f"more {i}") for i in range(more)])
        writer.close()
        taken = checkpoint(path)
        assert expected_head(path) == (taken.size, taken.root, taken.chain_hash)
        assert taken == prover.checkpoint()
    log.close()


def test_checkpoint_refuses_a_log_that_does_not_verify(tmp_path: Path) -> None:
    """Rows that fail verification are never indexed or checkpointed."""
    path = tmp_path / "log.db"
    make_log(path, 5)
    edit_payload(_raw(path))
    with pytest.raises(CorruptLogError, match="position 3"):
        checkpoint(path)


def test_checkpoint_of_missing_file_is_a_storage_error(tmp_path: Path) -> None:
    """No file, no log: nothing is created."""
    with pytest.raises(StorageError):
        checkpoint(tmp_path / "absent.db")
    assert not (tmp_path / "absent.db").exists()


def test_checkpoint_refuses_a_path_of_the_wrong_type() -> None:
    """The database path must be a str or os.PathLike."""
    with pytest.raises(InvalidTypeError):
        checkpoint(42)  # type: ignore[arg-type]


# -- the text form ---------------------------------------------------------------------------


def test_text_form_is_four_lines() -> None:
    """Origin, size, base64 root, chain hash: each on its own line."""
    expected = f"factledger/{LOG_ID}\n7\n{base64.b64encode(ROOT).decode()}\nchain {CHAIN}\n"
    assert expected == str(sample())


def test_text_round_trip_unsigned_and_signed(key_path: Path) -> None:
    """parse(str(cp)) gives back the same checkpoint, with or without its MAC."""
    unsigned = sample()
    signed = unsigned.sign(key_path)
    assert (unsigned, signed) == (Checkpoint.parse(str(unsigned)), Checkpoint.parse(str(signed)))
    assert str(signed).startswith(str(unsigned) + "\n\N{EM DASH} factledger-mac ")


def test_taken_checkpoint_round_trips(tmp_path: Path) -> None:
    """A checkpoint of a real log survives being written out and read back."""
    path = tmp_path / "log.db"
    make_log(path, 3)
    taken = checkpoint(path)
    assert taken == Checkpoint.parse(str(taken))


GOOD = str(sample())
LINES = GOOD.splitlines()
MAC_LINE = "\N{EM DASH} factledger-mac " + base64.b64encode(bytes(32)).decode()


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(GOOD[:-1], id="no final newline"),
        pytest.param(GOOD.replace("\n", "\r\n"), id="CRLF"),
        pytest.param(GOOD + "extra\n", id="five lines"),
        pytest.param(GOOD.replace("factledger/", "other/"), id="wrong origin"),
        pytest.param(GOOD.replace("factledger/" + LOG_ID, "factledger/"), id="empty log id"),
        pytest.param(GOOD.replace("\n7\n", "\n07\n"), id="leading zero"),
        pytest.param(GOOD.replace("\n7\n", "\n-7\n"), id="negative size"),
        pytest.param(GOOD.replace("\n7\n", "\n+7\n"), id="signed size"),
        pytest.param(GOOD.replace("\n7\n", "\n99999999999999999999\n"), id="size too big"),
        pytest.param(GOOD.replace(LINES[2], LINES[2][:-4]), id="short root"),
        pytest.param(GOOD.replace(LINES[2], LINES[2].rstrip("=")), id="unpadded root"),
        pytest.param(GOOD.replace(LINES[2], "!" + LINES[2][1:]), id="root not base64"),
        pytest.param(GOOD.replace(CHAIN, CHAIN.upper()), id="uppercase chain hash"),
        pytest.param(GOOD.replace(CHAIN, CHAIN[:-2]), id="short chain hash"),
        pytest.param(GOOD.replace("chain ", "chain:"), id="chain label"),
        pytest.param(GOOD + MAC_LINE + "\n\n", id="MAC without blank line"),
        pytest.param(GOOD + "x\n" + MAC_LINE + "\n", id="text instead of blank line"),
        pytest.param(GOOD + "\n" + MAC_LINE[:-4] + "\n", id="short MAC"),
        pytest.param(GOOD + "\n" + MAC_LINE.replace("\N{EM DASH}", "-") + "\n", id="hyphen"),
    ],
)
def test_parse_refuses_malformed_text(text: str) -> None:
    """Anything but the exact form is refused with a clear InvalidInputError."""
    with pytest.raises(InvalidInputError, match="checkpoint"):
        Checkpoint.parse(text)


def test_parse_refuses_non_text() -> None:
    """Bytes are not checkpoint text."""
    with pytest.raises(InvalidTypeError):
        Checkpoint.parse(GOOD.encode())  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"root": ROOT[:31]}, InvalidInputError),
        ({"root": ROOT.hex()}, InvalidTypeError),
        ({"chain_hash": CHAIN.upper()}, InvalidInputError),
        ({"size": -1}, InvalidInputError),
        ({"size": True}, InvalidTypeError),
        ({"log_id": "two\nlines"}, InvalidInputError),
        ({"mac": b"short"}, InvalidInputError),
    ],
)
def test_checkpoint_refuses_bad_fields(fields: dict[str, object], error: type[Exception]) -> None:
    """A Checkpoint is well formed from construction on."""
    with pytest.raises(error):
        sample(**fields)


# -- the MAC and the operator key ------------------------------------------------------------


def test_mac_verifies_under_its_own_key_only(tmp_path: Path, key_path: Path) -> None:
    """A MAC made with one key fails under another; an unsigned checkpoint fails under any."""
    other = generate_key(tmp_path / "other.key")
    signed = sample().sign(key_path)
    assert (True, False, False) == (
        signed.verify_mac(key_path),
        signed.verify_mac(other),
        sample().verify_mac(key_path),
    )


def test_mac_covers_every_line(key_path: Path) -> None:
    """Changing the size, root or chain hash of a signed checkpoint breaks its MAC."""
    signed = sample().sign(key_path)
    changed = [
        Checkpoint.parse(str(signed).replace("\n7\n", "\n8\n")),
        Checkpoint.parse(str(signed).replace(CHAIN, "cd" * 32)),
        msgspec.structs.replace(signed, root=bytes(32)),
    ]
    assert [False, False, False] == [cp.verify_mac(key_path) for cp in changed]


def test_mac_is_blake3_keyed_over_the_body(key_path: Path) -> None:
    """The MAC line holds BLAKE3(key=operator key) of the four lines, as documented."""
    signed = sample().sign(key_path)
    expected = blake3.blake3(str(sample()).encode(), key=key_path.read_bytes()).digest()
    assert expected == signed.mac


def test_checkpoint_with_key_is_signed(tmp_path: Path, key_path: Path) -> None:
    """checkpoint(..., key=path) returns a checkpoint whose MAC verifies under that key."""
    path = tmp_path / "log.db"
    make_log(path, 2)
    assert checkpoint(path, key=key_path).verify_mac(key_bytes := load_key(key_path))
    assert 32 == len(key_bytes)


def test_generated_key_is_32_bytes_mode_0600(key_path: Path) -> None:
    """A new key file holds 32 bytes nobody else may read."""
    assert (32, 0o600) == (len(key_path.read_bytes()), key_path.stat().st_mode & 0o777)


def test_generate_key_never_overwrites(key_path: Path) -> None:
    """An existing file is refused and left as it was."""
    before = key_path.read_bytes()
    with pytest.raises(InvalidInputError, match="refusing to overwrite"):
        generate_key(key_path)
    assert before == key_path.read_bytes()


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o620, 0o602, 0o644])
def test_key_file_open_to_group_or_others_is_refused(key_path: Path, mode: int) -> None:
    """A key file readable or writable by group or others is refused, naming its mode."""
    os.chmod(key_path, mode)
    with pytest.raises(InvalidInputError, match=f"{mode:04o}"):
        load_key(key_path)
    with pytest.raises(InvalidInputError):
        sample().sign(key_path)


@pytest.mark.parametrize("size", [0, 31, 33, 64])
def test_key_file_of_the_wrong_length_is_refused(tmp_path: Path, size: int) -> None:
    """Exactly 32 bytes, or the key is refused."""
    path = tmp_path / "bad.key"
    path.write_bytes(b"k" * size)
    os.chmod(path, 0o600)
    with pytest.raises(InvalidInputError, match="exactly 32 bytes"):
        load_key(path)


def test_missing_key_file_and_directory_are_refused(tmp_path: Path) -> None:
    """No file, or a directory, is not a key."""
    with pytest.raises(InvalidInputError, match="no key file"):
        load_key(tmp_path / "absent.key")
    with pytest.raises(InvalidInputError, match="not a regular file"):
        load_key(tmp_path)


def test_key_bytes_are_accepted_at_the_right_length_only() -> None:
    """32 raw bytes work as a key; other lengths and types are refused."""
    assert sample().sign(bytes(32)).verify_mac(bytes(32))
    with pytest.raises(InvalidInputError):
        load_key(bytes(16))
    with pytest.raises(InvalidTypeError):
        load_key(bytearray(32))  # type: ignore[arg-type]
