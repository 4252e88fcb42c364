"""Witness cosignatures (C2SP tlog-cosignature/v1): a checkpoint a witness cosigned still
verifies with the operator's key, in the library and the command line, and
`cosignature_time` checks the cosignature with the witness's key."""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path

import pytest

from eventlog import InvalidInputError, open_log
from eventlog.contract import fact
from replay import Checkpoint, checkpoint, cosignature_time, generate_key
from replay.cli import main
from tests.witness import Witness

WHEN = 1_700_000_000


@pytest.fixture
def taken(tmp_path: Path) -> tuple[Path, Path, str]:
    """A log of three events, its operator's key, and a checkpoint of it the key signed."""
    db, key = tmp_path / "log.db", tmp_path / "operator"
    log = open_log(db)
    log.append_many([fact(f"k{n}", f"v{n}") for n in range(3)])
    log.close()
    generate_key(key)
    return db, key, str(checkpoint(db, key=key))


def test_a_cosigned_checkpoint_verifies_with_the_operators_key(
    taken: tuple[Path, Path, str],
) -> None:
    """The witness's line parses beside the operator's and leaves the operator's signature
    valid; the witness's line alone is not the operator's signature."""
    _, key, note = taken
    cosigned = Checkpoint.parse(Witness("witness.example/w1").cosign(note, WHEN))
    assert 2 == len(cosigned.signatures)
    assert cosigned.verify_signature(f"{key}.pub")
    body = note.partition("\n\n")[0] + "\n"
    alone = Checkpoint.parse(Witness("operator").cosign(body, WHEN))
    assert not alone.verify_signature(f"{key}.pub")


def test_cosignature_time_checks_the_witness_key(taken: tuple[Path, Path, str]) -> None:
    """The witness's key gives the cosignature's time; another witness's key, or a checkpoint
    with another size, root or time than the one cosigned, gives None."""
    _, _, note = taken
    witness, other = Witness("witness.example/w1"), Witness("witness.example/w1")
    cosigned = witness.cosign(note, WHEN)
    assert WHEN == cosignature_time(Checkpoint.parse(cosigned), witness.verifier_key)
    assert None is cosignature_time(Checkpoint.parse(cosigned), other.verifier_key)
    assert None is cosignature_time(Checkpoint.parse(note), witness.verifier_key)
    lines = cosigned.split("\n")
    lines[1] = str(int(lines[1]) + 1)
    assert None is cosignature_time(Checkpoint.parse("\n".join(lines)), witness.verifier_key)
    name, blob = lines[-2].removeprefix("\N{EM DASH} ").split(" ")
    data = base64.b64decode(blob)
    later = data[:4] + (WHEN + 1).to_bytes(8, "big") + data[12:]
    lines[1] = cosigned.split("\n")[1]
    lines[-2] = f"\N{EM DASH} {name} {base64.b64encode(later).decode()}"
    assert None is cosignature_time(Checkpoint.parse("\n".join(lines)), witness.verifier_key)


def test_the_operators_signature_is_not_a_cosignature(taken: tuple[Path, Path, str]) -> None:
    """The operator's own key given as a witness key finds nothing in the operator-signed
    checkpoint: a cosigning key's hash (type 0x04) is not its signing hash (0x01)."""
    _, key, note = taken
    name, _, encoded = Path(f"{key}.pub").read_text().strip().split("+", 2)
    raw = base64.b64decode(encoded)[1:]
    digits = hashlib.sha256(name.encode() + b"\n\x04" + raw).digest()[:4].hex()
    encoded = base64.b64encode(b"\x04" + raw).decode()
    as_witness = f"{name}+{digits}+{encoded}"
    assert None is cosignature_time(Checkpoint.parse(note), as_witness)


@pytest.mark.parametrize(
    "witness",
    [
        "",
        "w1",
        "w1+00000000+" + base64.b64encode(b"\x04" + bytes(32)).decode(),
        "w1+" + "0" * 8 + "+" + base64.b64encode(b"\x01" + bytes(32)).decode(),
        "w1+" + "0" * 8 + "+AAAA",
    ],
)
def test_a_malformed_witness_key_is_refused(taken: tuple[Path, Path, str], witness: str) -> None:
    """A witness key that is not `<name>+<key hash>+<base64(0x04 || 32 bytes)>` with its own
    hash is a clear InvalidInputError."""
    with pytest.raises(InvalidInputError, match="witness key"):
        cosignature_time(Checkpoint.parse(taken[2]), witness)


def test_factledger_verify_accepts_a_cosigned_checkpoint(
    taken: tuple[Path, Path, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`factledger verify --checkpoint FILE --pub KEY.pub` exits 0 on a cosigned checkpoint,
    and 2 on the witness's line alone."""
    db, key, note = taken
    cosigned, alone = tmp_path / "cosigned.txt", tmp_path / "alone.txt"
    cosigned.write_text(Witness("witness.example/w1").cosign(note, WHEN), encoding="utf-8")
    body = note.partition("\n\n")[0] + "\n"
    alone.write_text(Witness("operator").cosign(body, WHEN), encoding="utf-8")
    args = ["verify", "--db", str(db), "--pub", f"{key}.pub", "--checkpoint"]
    assert 0 == main([*args, str(cosigned)])
    assert 2 == main([*args, str(alone)])
    assert "no valid signature" in capsys.readouterr().err
