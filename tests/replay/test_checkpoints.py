"""Checkpoints: what they hold, their text form, their signed-note signatures."""

from __future__ import annotations

import base64
import hashlib
import io
import json
from pathlib import Path

import msgspec
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from eventlog import (
    CorruptLogError,
    InvalidInputError,
    InvalidTypeError,
    StorageError,
    open_log,
)
from eventlog.chain import SHA256
from eventlog.contract import fact, memory
from projections import _merkle_index as merkle_index
from replay import Checkpoint, Ledger, NoteSignature, checkpoint, export_log
from replay.errors import KeyFileError, UnsignedCheckpointError
from replay.keys import generate_key, read_operator_key
from replay.proofs import Prover
from tests.eventlog.test_tampering import _raw, edit_payload, rewrite_with_chain_recomputed
from tests.replay.test_merkle import sha256_mth

LOG_ID = "00000000-0000-4000-8000-000000000000"
ROOT = bytes(range(32))
CHAIN = "ab" * 32


def make_log(path: Path, count: int) -> None:
    log = open_log(path)
    log.append_many([memory(f"m{i}") if i % 2 else fact(f"k{i}", f"v{i}") for i in range(count)])
    log.close()


def expected_head(path: Path) -> tuple[int, bytes, str]:
    """Size, Merkle root and chain hash, computed independently (hashlib, RFC 6962) from the
    stored rows."""
    log = open_log(path, read_only=True)
    try:
        bodies = [row.body for row in log.scan()]
        return len(bodies), sha256_mth(bodies), log.head().chain_hash
    finally:
        log.close()


def sample(**fields: object) -> Checkpoint:
    values: dict[str, object] = {"log_id": LOG_ID, "size": 7, "root": ROOT, "chain_hash": CHAIN}
    return Checkpoint(**{**values, **fields})  # type: ignore[arg-type]


@pytest.fixture
def key_path(tmp_path: Path) -> Path:
    """A private key file (its public key is beside it, in `operator.key.pub`)."""
    generate_key(tmp_path / "operator.key")
    return tmp_path / "operator.key"


@pytest.fixture
def pub_path(key_path: Path) -> Path:
    return key_path.with_name("operator.key.pub")


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


def test_the_checkpoint_root_is_the_rfc_6962_head_of_the_exported_bodies(
    tmp_path: Path,
) -> None:
    """An auditor holding only the export and the checkpoint recomputes the tree head with
    hashlib (RFC 6962: leaves SHA-256(0x00 || body), nodes SHA-256(0x01 || l || r)) from the
    exported bodies: it is the checkpoint's root, and its origin names format v2."""
    path = tmp_path / "log.db"
    make_log(path, 23)
    taken = checkpoint(path)
    out = io.StringIO()
    export_log(path, out)
    header, *events = [json.loads(line) for line in out.getvalue().splitlines()]
    bodies = [event["body"].encode("utf-8") for event in events]

    def head(leaves: list[bytes]) -> bytes:
        if len(leaves) == 1:
            return hashlib.sha256(b"\x00" + leaves[0]).digest()
        k = 1 << ((len(leaves) - 1).bit_length() - 1)
        return hashlib.sha256(b"\x01" + head(leaves[:k]) + head(leaves[k:])).digest()

    assert (23, 23) == (header["events"], taken.size)
    assert base64.b64encode(head(bodies)).decode() == str(taken).splitlines()[2]
    assert str(taken).startswith(f"factledger/v2/{header['log_id']}\n")


def test_checkpoint_of_empty_log_is_the_empty_tree_at_the_genesis(tmp_path: Path) -> None:
    """Size 0: the root of the empty tree and the genesis chain value."""
    path = tmp_path / "log.db"
    open_log(path).close()
    taken = checkpoint(path)
    assert (0, SHA256.empty_root(), SHA256.genesis(taken.log_id).hex()) == (
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


@pytest.mark.parametrize("read_only", [True, False], ids=["tip", "index"])
def test_checkpoint_reports_progress_up_to_the_head(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, read_only: bool
) -> None:
    """`checkpoint(progress=...)` is called with increasing positions ending at the head,
    whether the walk keeps only a tip (read-only) or writes the index; a later checkpoint
    walks only the rows appended since."""
    monkeypatch.setattr(merkle_index, "BATCH", 16)
    path = tmp_path / "log.db"
    make_log(path, 50)
    with Ledger.open(path, read_only=read_only) as ledger:
        first: list[tuple[int, int]] = []
        taken = ledger.checkpoint(progress=lambda done, total: first.append((done, total)))
        writer = open_log(path)
        writer.append_many([memory(f"more {i}") for i in range(20)])
        writer.close()
        later: list[tuple[int, int]] = []
        grown = ledger.checkpoint(progress=lambda done, total: later.append((done, total)))
    assert (50, 70) == (taken.size, grown.size)
    assert expected_head(path) == (grown.size, grown.root, grown.chain_hash)
    assert len(first) >= 4 and len(set(first)) == len(first) and sorted(first) == first
    assert (50, 50) == first[-1]
    assert all(done > 48 for done, _ in later) and (70, 70) == later[-1]


def test_a_kept_tip_walks_again_when_history_changes(tmp_path: Path) -> None:
    """A prover that keeps only a tip takes the next checkpoint from the log as it is now
    when a row under the tip was rewritten (chain recomputed), never from the old tip."""
    path = tmp_path / "log.db"
    make_log(path, 12)
    log = open_log(path, read_only=True)
    prover = Prover(log)
    before = prover.checkpoint()
    conn = _raw(path)
    rewrite_with_chain_recomputed(conn)
    conn.close()
    after = prover.checkpoint()
    log.close()
    assert before.root != after.root
    assert expected_head(path) == (after.size, after.root, after.chain_hash)


def test_checkpoint_refuses_a_progress_that_cannot_be_called(tmp_path: Path) -> None:
    """A progress that is not callable is refused before anything is walked."""
    path = tmp_path / "log.db"
    make_log(path, 3)
    with Ledger.open(path) as ledger, pytest.raises(InvalidTypeError, match="progress"):
        ledger.checkpoint(progress=5)  # type: ignore[arg-type]


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
    """Origin (naming format v2), size, base64 root, chain hash: each on its own line; a v1
    log's origin has no `v2/`, and each parses back to its format."""
    rest = f"7\n{base64.b64encode(ROOT).decode()}\nchain {CHAIN}\n"
    assert f"factledger/v2/{LOG_ID}\n{rest}" == str(sample())
    assert f"factledger/{LOG_ID}\n{rest}" == str(sample(format=1))
    assert [2, 1] == [Checkpoint.parse(str(sample(format=v))).format for v in (2, 1)]


def test_text_round_trip_unsigned_and_signed(key_path: Path) -> None:
    """parse(str(cp)) gives back the same checkpoint, with or without its signature line."""
    unsigned = sample()
    signed = unsigned.sign(key_path)
    assert (unsigned, signed) == (Checkpoint.parse(str(unsigned)), Checkpoint.parse(str(signed)))
    assert str(signed).startswith(str(unsigned) + "\n\N{EM DASH} operator ")


def test_taken_checkpoint_round_trips(tmp_path: Path) -> None:
    """A checkpoint of a real log survives being written out and read back."""
    path = tmp_path / "log.db"
    make_log(path, 3)
    taken = checkpoint(path)
    assert taken == Checkpoint.parse(str(taken))


GOOD = str(sample())
LINES = GOOD.splitlines()
SIG_LINE = "\N{EM DASH} operator " + base64.b64encode(bytes(68)).decode()


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(GOOD[:-1], id="no final newline"),
        pytest.param(GOOD.replace("\n", "\r\n"), id="CRLF"),
        pytest.param(GOOD + "extra\n", id="five lines"),
        pytest.param(GOOD.replace("factledger/", "other/"), id="wrong origin"),
        pytest.param(GOOD.replace("factledger/v2/" + LOG_ID, "factledger/v2/"), id="empty log id"),
        pytest.param(GOOD.replace("factledger/v2/" + LOG_ID, "factledger/"), id="empty v1 log id"),
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
        pytest.param(GOOD + "\n", id="blank line and no signature"),
        pytest.param(GOOD + SIG_LINE + "\n\n", id="signature without blank line"),
        pytest.param(GOOD + "x\n" + SIG_LINE + "\n", id="text instead of blank line"),
        pytest.param(GOOD + "\n" + SIG_LINE[:16] + "\n", id="short signature"),
        pytest.param(GOOD + "\n" + SIG_LINE.replace("\N{EM DASH}", "-") + "\n", id="hyphen"),
        pytest.param(GOOD + "\n" + SIG_LINE.replace("operator", "op+x") + "\n", id="plus"),
        pytest.param(GOOD + "\n" + SIG_LINE.replace(" operator ", " ") + "\n", id="no name"),
        pytest.param(GOOD + "\n" + SIG_LINE + "\n" + "\n" + SIG_LINE + "\n", id="gap"),
        pytest.param(GOOD + "\n" + (SIG_LINE + "\n") * 101, id="101 signatures"),
    ],
)
def test_parse_refuses_malformed_text(text: str) -> None:
    """Anything but the exact form is refused with a clear InvalidInputError."""
    with pytest.raises(InvalidInputError, match=r"checkpoint|signature"):
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
        ({"signatures": (b"sig",)}, InvalidTypeError),
        ({"signatures": [NoteSignature(name="a", key_hash=bytes(4), signature=b"s")]}, TypeError),
    ],
)
def test_checkpoint_refuses_bad_fields(fields: dict[str, object], error: type[Exception]) -> None:
    """A Checkpoint is well formed from construction on."""
    with pytest.raises(error):
        sample(**fields)


@pytest.mark.parametrize(
    "fields",
    [
        {"name": "two words"},
        {"name": "a+b"},
        {"name": ""},
        {"key_hash": bytes(3)},
        {"signature": b""},
    ],
)
def test_signature_line_refuses_bad_fields(fields: dict[str, object]) -> None:
    """A signature line is well formed from construction on."""
    values: dict[str, object] = {"name": "op", "key_hash": bytes(4), "signature": bytes(64)}
    with pytest.raises(InvalidInputError):
        NoteSignature(**{**values, **fields})  # type: ignore[arg-type]


# -- signatures anyone can check ---------------------------------------------------------------


def test_signature_verifies_with_its_own_public_key_only(
    tmp_path: Path, key_path: Path, pub_path: Path
) -> None:
    """A signature checks out under the signer's public key file, not under another key's."""
    other = generate_key(tmp_path / "other.key")
    signed = sample().sign(key_path)
    assert (True, False) == (signed.verify_signature(pub_path), signed.verify_signature(other))


def test_unsigned_checkpoint_is_a_clear_error(pub_path: Path) -> None:
    """Checking the signature of a checkpoint that carries none says so."""
    with pytest.raises(UnsignedCheckpointError, match="carries no signature"):
        sample().verify_signature(pub_path)


def test_signature_covers_every_line(key_path: Path, pub_path: Path) -> None:
    """Changing the log id, size, root or chain hash of a signed checkpoint breaks it."""
    signed = sample().sign(key_path)
    changed = [
        Checkpoint.parse(str(signed).replace(LOG_ID, "another-log")),
        Checkpoint.parse(str(signed).replace("\n7\n", "\n8\n")),
        Checkpoint.parse(str(signed).replace(CHAIN, "cd" * 32)),
        msgspec.structs.replace(signed, root=bytes(32)),
    ]
    assert [False] * 4 == [cp.verify_signature(pub_path) for cp in changed]


def test_a_failing_signature_by_the_key_rejects_the_note(key_path: Path, pub_path: Path) -> None:
    """As C2SP says, a bad signature by a known key rejects the checkpoint, even beside a good
    one by the same key."""
    good = sample().sign(key_path)
    [line] = good.signatures
    bad = msgspec.structs.replace(line, signature=bytes(64))
    assert not msgspec.structs.replace(good, signatures=(line, bad)).verify_signature(pub_path)


def test_signatures_by_two_keys_each_verify(tmp_path: Path, key_path: Path, pub_path: Path) -> None:
    """Two keys may sign one checkpoint; signing again with a key replaces its line."""
    other_pub = generate_key(tmp_path / "witness.key")
    signed = sample().sign(key_path).sign(tmp_path / "witness.key").sign(key_path)
    assert ["witness", "operator"] == [s.name for s in signed.signatures]
    assert signed.verify_signature(pub_path) and signed.verify_signature(other_pub)


def test_signature_line_is_c2sp_signed_note_checked_by_cryptography(
    key_path: Path, pub_path: Path
) -> None:
    """The signature line is `— name base64(key hash || Ed25519 signature)` over the four
    lines; pyca cryptography's own verify accepts it with the key from the .pub file, whose
    hash is SHA-256(name || 0x0A || 0x01 || key)[:4]."""
    text = str(sample().sign(key_path))
    body, _, line = text.partition("\n\n")
    name, blob = line.removeprefix("\N{EM DASH} ").rstrip("\n").split(" ")
    data = base64.b64decode(blob)
    vkey_name, vkey_hash, vkey = pub_path.read_text().strip().split("+", 2)
    raw = base64.b64decode(vkey)
    assert (name, data[:4].hex(), raw[0]) == (vkey_name, vkey_hash, 1)
    assert data[:4] == hashlib.sha256(name.encode() + b"\n\x01" + raw[1:]).digest()[:4]
    Ed25519PublicKey.from_public_bytes(raw[1:]).verify(data[4:], (body + "\n").encode())


def test_checkpoint_with_key_is_signed(tmp_path: Path, key_path: Path, pub_path: Path) -> None:
    """checkpoint(..., key=path) returns a checkpoint whose signature verifies."""
    path = tmp_path / "log.db"
    make_log(path, 2)
    assert checkpoint(path, key=key_path).verify_signature(pub_path)
    assert checkpoint(path, key=read_operator_key(key_path)).verify_signature(pub_path)


def test_signed_checkpoint_verifies_offline_from_the_public_key_file_only(
    tmp_path: Path, key_path: Path, pub_path: Path
) -> None:
    """With the database and the private key gone, the checkpoint text and the .pub file are
    all an auditor needs."""
    path = tmp_path / "log.db"
    make_log(path, 5)
    (tmp_path / "checkpoint.txt").write_text(str(checkpoint(path, key=key_path)))
    path.unlink()
    key_path.unlink()
    held = Checkpoint.parse((tmp_path / "checkpoint.txt").read_text())
    assert held.verify_signature(pub_path)


def test_a_private_key_where_a_public_key_is_needed_is_refused(key_path: Path) -> None:
    """verify_signature wants the .pub file; given the private key it refuses, quoting none
    of it."""
    signed = sample().sign(key_path)
    with pytest.raises(KeyFileError, match="holds a private key") as caught:
        signed.verify_signature(key_path)
    prefix, _, _, _, secret = key_path.read_text().strip().split("+", 4)
    assert ("PRIVATE", 44) == (prefix, len(secret))
    assert secret not in str(caught.value)
