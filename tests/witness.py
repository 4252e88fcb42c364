"""A C2SP tlog-cosignature witness, written for the tests from the spec with `cryptography`
alone (nothing from factledger): it cosigns a checkpoint's text with a timestamped Ed25519
signature line, signature type 0x04."""

from __future__ import annotations

import base64
import hashlib

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey


class Witness:
    """One witness key, named `name`."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.private = Ed25519PrivateKey.generate()
        self.raw = self.private.public_key().public_bytes_raw()
        self.key_hash = hashlib.sha256(name.encode() + b"\n\x04" + self.raw).digest()[:4]

    @property
    def verifier_key(self) -> str:
        """`<name>+<key hash>+<base64(0x04 || key)>`: the C2SP vkey a log client is given."""
        encoded = base64.b64encode(b"\x04" + self.raw).decode()
        return f"{self.name}+{self.key_hash.hex()}+{encoded}"

    def cosign(self, note: str, timestamp: int) -> str:
        """`note` (a checkpoint's text, signed or not) with this witness's cosignature line
        added: over "cosignature/v1", "time <timestamp>" and the note's body."""
        signed = "\n\n" in note
        body = note.partition("\n\n")[0] + "\n" if signed else note
        message = f"cosignature/v1\ntime {timestamp}\n{body}".encode()
        blob = self.key_hash + timestamp.to_bytes(8, "big") + self.private.sign(message)
        line = f"\N{EM DASH} {self.name} {base64.b64encode(blob).decode()}\n"
        return note + line if signed else f"{note}\n{line}"
