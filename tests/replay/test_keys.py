"""Operator key files: Ed25519 pairs in the signed-note formats, made safely and read warily."""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import os
import re
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from eventlog import InvalidInputError, InvalidTypeError
from replay.errors import KeyFileError
from replay.keys import (
    generate_key,
    operator_key,
    read_operator_key,
    read_public_key,
)

VECTORS = json.loads(
    (Path(__file__).resolve().parents[1] / "data" / "signed_note_vectors.json").read_text()
)


@pytest.fixture
def pair(tmp_path: Path) -> tuple[Path, Path]:
    public = generate_key(tmp_path / "ops.key")
    return tmp_path / "ops.key", public


def write_key(path: Path, data: bytes | str, mode: int = 0o600) -> Path:
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    os.chmod(path, mode)
    return path


def test_generate_key_writes_a_private_and_a_public_file(pair: tuple[Path, Path]) -> None:
    """FILE is `PRIVATE+KEY+name+hash+base64`, mode 0600; FILE.pub is `name+hash+base64`,
    mode 0644; the name defaults to FILE's name without its suffix."""
    private, public = pair
    assert public == private.with_name("ops.key.pub")
    assert (0o600, 0o644) == (private.stat().st_mode & 0o777, public.stat().st_mode & 0o777)
    assert re.fullmatch(r"PRIVATE\+KEY\+ops\+[0-9a-f]{8}\+[A-Za-z0-9+/]{44}\n", private.read_text())
    assert re.fullmatch(r"ops\+[0-9a-f]{8}\+[A-Za-z0-9+/]{44}\n", public.read_text())


def test_key_id_is_the_signed_note_key_hash(pair: tuple[Path, Path]) -> None:
    """The id is SHA-256(name || 0x0A || 0x01 || public key)[:4] in hex, computed here."""
    private, public = pair
    name, key_hash, blob = public.read_text().strip().split("+", 2)
    raw = base64.b64decode(blob)
    expected = hashlib.sha256(name.encode() + b"\n" + raw).digest()[:4].hex()
    assert (expected, expected) == (key_hash, read_operator_key(private).key_id)


def test_go_signed_note_vectors(tmp_path: Path) -> None:
    """The key formats and signatures are Go's sumdb/note ones: its signer key reads, derives
    its verifier key, and signs its text to its signature byte for byte."""
    key = read_operator_key(write_key(tmp_path / "go.key", VECTORS["signer_key"] + "\n"))
    assert VECTORS["verifier_key"] == key.public.verifier_key
    blob = base64.b64encode(bytes.fromhex(key.key_id) + key.sign(VECTORS["text"].encode()))
    assert VECTORS["signature_line"] == f"\N{EM DASH} {key.name} {blob.decode()}\n"


def test_signatures_are_checked_by_cryptography_directly(pair: tuple[Path, Path]) -> None:
    """A key's signature verifies with pyca cryptography's own verify, given the public key's
    raw bytes from the .pub file."""
    private, public = pair
    raw = base64.b64decode(public.read_text().strip().split("+", 2)[2])[1:]
    signature = read_operator_key(private).sign(b"message")
    Ed25519PublicKey.from_public_bytes(raw).verify(signature, b"message")
    assert read_public_key(public).verify(signature, b"message")
    assert not read_public_key(public).verify(signature, b"messagE")


def test_generate_key_never_overwrites(pair: tuple[Path, Path], tmp_path: Path) -> None:
    """An existing key file, or an existing .pub beside a new one, is refused; nothing is
    written or left behind."""
    private, public = pair
    before = (private.read_bytes(), public.read_bytes())
    with pytest.raises(InvalidInputError, match="refusing to overwrite"):
        generate_key(private)
    assert before == (private.read_bytes(), public.read_bytes())
    (tmp_path / "new.key.pub").write_text("someone else's\n")
    with pytest.raises(InvalidInputError, match="refusing to overwrite"):
        generate_key(tmp_path / "new.key")
    assert not (tmp_path / "new.key").exists()


def test_generate_key_refuses_a_link_in_its_place(tmp_path: Path) -> None:
    """A symbolic link at the key's path (even to nowhere) is not followed."""
    (tmp_path / "trap.key").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(InvalidInputError, match="refusing to overwrite"):
        generate_key(tmp_path / "trap.key")
    assert not (tmp_path / "elsewhere").exists()


@pytest.mark.parametrize("name", ["two words", "a+b", "", "é", "x" * 129])
def test_key_names_are_plain_ascii(tmp_path: Path, name: str) -> None:
    """A name holds ASCII letters, digits and ._:-/@ only (no space or '+')."""
    with pytest.raises(InvalidInputError):
        generate_key(tmp_path / "k.key", name=name)
    assert [] == list(tmp_path.iterdir())


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o620, 0o602, 0o644])
def test_private_key_open_to_group_or_others_is_refused(pair: tuple[Path, Path], mode: int) -> None:
    """A private key file readable or writable by group or others is refused, naming its mode."""
    private, _ = pair
    os.chmod(private, mode)
    with pytest.raises(KeyFileError, match=f"{mode:04o}"):
        read_operator_key(private)


def _swap_type(private: str) -> str:
    *prefix, blob = private.split("+", 4)
    raw = bytearray(base64.b64decode(blob))
    raw[0] = 2
    return "+".join([*prefix, base64.b64encode(bytes(raw)).decode()]) + "\n"


BAD_PRIVATE = {
    "binary": (os.urandom(32), "not text"),
    "empty": (b"", "not a factledger key file"),
    "two lines": ("PRIVATE+KEY+a+00000000+AAAA\nmore\n", "one line"),
    "pem": ("-----BEGIN PRIVATE KEY-----\n", "one line"),
    "garbage": ("hello\n", "not a factledger key file"),
    "too large": ("A" * 5000, "too large"),
    "short key": ("PRIVATE+KEY+a+00000000+AQID\n", "33 bytes"),
    "bad hash": ("PRIVATE+KEY+a+XYZ+AQID\n", "8 lowercase hex"),
}


@pytest.mark.parametrize("data, says", BAD_PRIVATE.values(), ids=BAD_PRIVATE.keys())
def test_a_file_that_is_not_a_private_key_is_a_one_line_error(
    tmp_path: Path, data: bytes | str, says: str
) -> None:
    """Binary, empty, PEM or damaged files are a KeyFileError of one line, naming the file."""
    path = write_key(tmp_path / "bad.key", data)
    with pytest.raises(KeyFileError, match=says) as caught:
        read_operator_key(path)
    assert "\n" not in str(caught.value) and str(path) in str(caught.value)


def test_wrong_kinds_of_key_are_refused_by_name(pair: tuple[Path, Path], tmp_path: Path) -> None:
    """A .pub file where a private key is needed, a private key where a public one is, a key
    of another signature type, and a key whose hash does not match are each refused, and no
    message quotes the key material."""
    private, public = pair
    secret = private.read_text().strip().split("+", 4)[4]
    with pytest.raises(KeyFileError, match="holds a public key"):
        read_operator_key(write_key(tmp_path / "pub-as-private", public.read_text()))
    with pytest.raises(KeyFileError, match="holds a private key") as caught:
        read_public_key(private)
    assert secret not in str(caught.value)
    with pytest.raises(KeyFileError, match="not Ed25519"):
        read_operator_key(write_key(tmp_path / "type2", _swap_type(private.read_text().strip())))
    damaged = private.read_text().replace("+ops+", "+opz+")
    with pytest.raises(KeyFileError, match="does not match") as caught:
        read_operator_key(write_key(tmp_path / "damaged", damaged))
    assert secret not in str(caught.value)


def test_missing_unreadable_and_directory_key_files_are_refused(tmp_path: Path) -> None:
    """No file, a directory, or a path of the wrong type is a clear error."""
    with pytest.raises(KeyFileError, match="no key file"):
        read_operator_key(tmp_path / "absent.key")
    with pytest.raises(KeyFileError):
        read_operator_key(tmp_path)
    with pytest.raises(InvalidTypeError):
        operator_key(b"\x00" * 32)
    with pytest.raises(InvalidInputError):
        read_public_key("nul\x00.pub")


def test_an_operator_key_never_shows_its_private_half(pair: tuple[Path, Path]) -> None:
    """repr names the key; it holds no secret an accidental print would show."""
    private, _ = pair
    key = read_operator_key(private)
    assert f"OperatorKey(name='ops', key_id='{key.key_id}')" == repr(key)


def without_waiting(read: Callable[[], object], fifo: Path) -> BaseException:
    """What `read` raised, run in a thread; if it is still waiting on the named pipe `fifo`
    after 10 s, a writer is opened to free it and the test fails."""
    raised: list[BaseException] = []

    def run() -> None:
        try:
            read()
        except BaseException as exc:
            raised.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(timeout=10)
    if worker.is_alive():
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        worker.join()
        pytest.fail(f"reading {fifo} waited for a writer")
    assert 1 == len(raised)
    return raised[0]


@pytest.mark.parametrize("read", [read_operator_key, read_public_key], ids=["private", "public"])
def test_a_named_pipe_as_a_key_file_is_refused_at_once(
    tmp_path: Path, read: Callable[[Path], object]
) -> None:
    """A FIFO (or a link to one) as a key file is refused as a pipe, without waiting for a
    writer that may never come."""
    fifo = tmp_path / "ops.key"
    os.mkfifo(fifo, 0o600)
    link = tmp_path / "link.key"
    link.symlink_to(fifo)
    for path in (fifo, link):
        error = without_waiting(functools.partial(read, path), fifo)
        assert isinstance(error, KeyFileError)
        assert f"key file {path} is a named pipe (FIFO), not a regular file" == str(error)


def test_a_device_as_a_key_file_is_refused_by_kind() -> None:
    """A character device (which may never end) is refused by what it is, unread."""
    with pytest.raises(KeyFileError, match="is a character device, not a regular file"):
        read_operator_key("/dev/zero")
