"""The documented offline verifier's signature check (docs/spec/export.md): pure-Python
Ed25519 (RFC 8032 section 5.1.7) and the C2SP signed-note check, taken from the doc block as
written and held to factledger's checkpoints, RFC 8032's vectors and `cryptography`."""

from __future__ import annotations

import base64
import random
from collections.abc import Callable
from pathlib import Path

import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from eventlog import open_log
from eventlog.contract import fact
from replay import checkpoint, generate_key
from tests.test_docs import docs_export_functions
from tests.witness import Witness

DOCUMENTED = docs_export_functions()
ed25519_verify: Callable[[bytes, bytes, bytes], bool] = DOCUMENTED["ed25519_verify"]
signed_by: Callable[[str, str], bool] = DOCUMENTED["signed_by"]
L = 2**252 + 27742317777372353535851937790883648493

RFC8032_VECTORS = [
    (
        "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
        "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a",
        "",
        "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e3970"
        "1cf9b46bd25bf5f0595bbe24655141438e7a100b",
    ),
    (
        "4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
        "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c",
        "72",
        "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613"
        "d0f11d8c387b2eaeb4302aeeb00d291612bb0c00",
    ),
    (
        "c5aa8df43f9f837bedb7442f31dcb7b166d38535076f094b85ce3a2e0b4458f7",
        "fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025",
        "af82",
        "6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac18ff9b538d16f290ae67f760"
        "984dc6594a7c15e9716ed28dc027beceea1ec40a",
    ),
]
"""RFC 8032 section 7.1, TEST 1 to 3: secret key, public key, message, signature (hex)."""


def cryptography_verdict(public_key: bytes, signature: bytes, message: bytes) -> bool:
    """pyca cryptography's (OpenSSL's) Ed25519 verdict."""
    try:
        Ed25519PublicKey.from_public_bytes(public_key).verify(signature, message)
    except (InvalidSignature, ValueError):
        return False
    return True


def flipped(data: bytes, bit: int) -> bytes:
    """`data` with one bit inverted."""
    changed = bytearray(data)
    changed[bit // 8] ^= 1 << (bit % 8)
    return bytes(changed)


@pytest.fixture
def signed(tmp_path: Path) -> tuple[str, str, Path]:
    """A log's checkpoint signed by a fresh operator key: its text, the .pub file's contents,
    and the private key's path."""
    db, key = tmp_path / "memory.db", tmp_path / "operator"
    log = open_log(db)
    log.append_many([fact(f"k{n}", f"v{n}") for n in range(3)])
    log.close()
    pub = generate_key(key).read_text(encoding="utf-8")
    return str(checkpoint(db, key=key)), pub, key


@pytest.mark.parametrize(("secret", "public", "message", "signature"), RFC8032_VECTORS)
def test_rfc8032_vectors_verify(secret: str, public: str, message: str, signature: str) -> None:
    """RFC 8032's test vectors 1 to 3 verify; `cryptography` derives the same key and the
    same (deterministic) signature from each secret, so the vectors are the RFC's."""
    private = Ed25519PrivateKey.from_private_bytes(bytes.fromhex(secret))
    assert bytes.fromhex(public) == private.public_key().public_bytes_raw()
    assert bytes.fromhex(signature) == private.sign(bytes.fromhex(message))
    key, sig, msg = bytes.fromhex(public), bytes.fromhex(signature), bytes.fromhex(message)
    assert ed25519_verify(key, sig, msg)
    assert not ed25519_verify(key, flipped(sig, 3), msg)
    assert not ed25519_verify(key, sig, msg + b"\x00")


def test_verdicts_equal_cryptographys_on_random_keys_and_messages() -> None:
    """Across 50 random keys and messages, for the signature, a flipped bit in it, another
    message, another key, and random bytes as key and signature, the documented verifier
    says what `cryptography` says (and accepts exactly the genuine signature)."""
    rng = random.Random(8032)
    for _ in range(50):
        private = Ed25519PrivateKey.from_private_bytes(rng.randbytes(32))
        key = private.public_key().public_bytes_raw()
        message = rng.randbytes(rng.randrange(0, 200))
        signature = private.sign(message)
        other = Ed25519PrivateKey.from_private_bytes(rng.randbytes(32)).public_key()
        cases = [
            (key, signature, message),
            (key, flipped(signature, rng.randrange(512)), message),
            (key, signature, message + b"!"),
            (other.public_bytes_raw(), signature, message),
            (rng.randbytes(32), rng.randbytes(64), message),
        ]
        verdicts = [ed25519_verify(*case) for case in cases]
        assert [cryptography_verdict(*case) for case in cases] == verdicts
        assert [True, False, False, False, False] == verdicts


def test_a_non_canonical_s_is_refused() -> None:
    """S + L satisfies the group equation as S does ([L]B is the neutral element), but a
    signature whose S is not below L is refused, as RFC 8032 and `cryptography` refuse it."""
    private = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
    key, message = private.public_key().public_bytes_raw(), b"checkpoint"
    signature = private.sign(message)
    s = int.from_bytes(signature[32:], "little")
    malleated = signature[:32] + (s + L).to_bytes(32, "little")
    assert ed25519_verify(key, signature, message)
    assert (False, False) == (
        ed25519_verify(key, malleated, message),
        cryptography_verdict(key, malleated, message),
    )


def test_a_checkpoint_factledger_signs_verifies(signed: tuple[str, str, Path]) -> None:
    """The documented check accepts factledger's signed checkpoint given the .pub file's
    contents alone."""
    note, pub, _ = signed
    assert signed_by(note, pub)


@pytest.mark.parametrize("line", [0, 1, 2])
def test_a_changed_origin_size_or_root_is_refused(signed: tuple[str, str, Path], line: int) -> None:
    """A checkpoint whose origin, tree size or root was changed after signing is refused."""
    note, pub, _ = signed
    lines = note.split("\n")
    lines[line] = {0: lines[0] + "x", 1: str(int(lines[1]) + 1), 2: "A" * 43 + "="}[line]
    assert not signed_by("\n".join(lines), pub)


def test_a_signature_by_another_key_is_refused(
    signed: tuple[str, str, Path], tmp_path: Path
) -> None:
    """The same note checked with another key's .pub (of the same name, too) is refused."""
    note, _, _ = signed
    (tmp_path / "other").mkdir()
    other = generate_key(tmp_path / "other" / "operator").read_text(encoding="utf-8")
    assert not signed_by(note, other)


def test_a_flipped_signature_bit_is_refused(signed: tuple[str, str, Path]) -> None:
    """A signature line whose signature has one bit flipped fails, and rejects the note."""
    note, pub, _ = signed
    body, _, line = note.partition("\n\n")
    name, blob = line.removeprefix("\N{EM DASH} ").split(" ")
    data = base64.b64decode(blob)
    for bit in (0, 255, 256, 511):
        forged = data[:4] + flipped(data[4:], bit)
        text = f"{body}\n\n\N{EM DASH} {name} {base64.b64encode(forged).decode()}\n"
        assert not signed_by(text, pub)


def test_a_non_canonical_s_in_a_checkpoint_is_refused(signed: tuple[str, str, Path]) -> None:
    """The checkpoint's own signature with S + L in place of S is refused."""
    note, pub, _ = signed
    body, _, line = note.partition("\n\n")
    name, blob = line.removeprefix("\N{EM DASH} ").split(" ")
    data = base64.b64decode(blob)
    s = int.from_bytes(data[36:], "little")
    forged = data[:36] + (s + L).to_bytes(32, "little")
    assert not signed_by(f"{body}\n\n\N{EM DASH} {name} {base64.b64encode(forged).decode()}\n", pub)


def test_a_cosigned_checkpoint_verifies_and_a_cosignature_is_not_the_operators(
    signed: tuple[str, str, Path],
) -> None:
    """A witness's cosignature line beside the operator's is passed over; alone, or named
    like the operator's key, it is never counted as the operator's signature."""
    note, pub, _ = signed
    name = pub.split("+")[0]
    cosigned = Witness("witness.example/w1").cosign(note, 1_700_000_000)
    assert signed_by(cosigned, pub)
    body = note.partition("\n\n")[0] + "\n"
    assert not signed_by(Witness("witness.example/w1").cosign(body, 1_700_000_000), pub)
    assert not signed_by(Witness(name).cosign(body, 1_700_000_000), pub)
    assert signed_by(Witness(name).cosign(note, 1_700_000_000), pub)
