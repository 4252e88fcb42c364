"""The log formats this version reads, and the one it writes.

A log's format is stored in its metadata (`format`: `factledger-log/N` in a file,
`factledger-postgres-log/N` in PostgreSQL); a log with no marker is format 1.

- v2 (written): SHA-256 chain and tree (`chain.SHA256`); the chained body holds the envelope
  and the payload with its text field empty; the text and a 32-byte random salt sit beside it
  in a content table; `content_hash` is `blake3-keyed:` and BLAKE3 keyed by the salt over the
  UTF-8 text. docs/spec/format-v2.md is the specification.
- v1 (read, verified and exported; never written): BLAKE3 chain (`chain.BLAKE3`), the text
  inside the body, `content_hash` `blake3:` and unkeyed BLAKE3 over the text.
"""

from __future__ import annotations

import hmac
from typing import NamedTuple

import blake3

from eventlog.chain import BLAKE3, SHA256, ChainScheme
from eventlog.checks import MAX_CONTENT_BYTES
from eventlog.errors import LegacyFormatError, StorageError

MAX_ENVELOPE_BYTES = 256 * 1024
"""Limit on a v2 body: the envelope and payload without the text (tags, positions, names)."""
MAX_V1_BODY_BYTES = 8 * 1024 * 1024
"""Limit on a v1 body, which holds its text (escaped) too: the limit v1 wrote under."""
MAX_TEXT_BYTES = MAX_CONTENT_BYTES
"""Limit on a text read from the content table (1 MiB of UTF-8)."""
SALT_BYTES = 32
KEYED_PREFIX = "blake3-keyed:"
UNKEYED_PREFIX = "blake3:"


class LogFormat(NamedTuple):
    """What tells one format from another: its number, chain scheme, where its text is
    stored, and the largest body a reader decodes."""

    version: int
    chain: ChainScheme
    text_beside: bool
    """Whether texts sit beside the chained bodies, in a content table (v2)."""
    max_body_bytes: int

    def content_hash(self, text: bytes, salt: bytes | None) -> str:
        """`content_hash` of UTF-8 `text`: keyed by `salt` in v2, unkeyed in v1."""
        if not self.text_beside:
            return UNKEYED_PREFIX + blake3.blake3(text).hexdigest()
        if salt is None:
            return ""  # no salt, no hash: matches no stored one
        return KEYED_PREFIX + blake3.blake3(text, key=salt).hexdigest()

    def text_matches(self, text: bytes, salt: bytes | None, stored_hash: str) -> bool:
        """Whether `text` (and `salt`) hash to `stored_hash`, compared in constant time; a
        salt of the wrong size, or a stored hash that is not ASCII, never matches."""
        if not self.text_beside:
            computed = UNKEYED_PREFIX + blake3.blake3(text).hexdigest()
        elif salt is None or len(salt) != SALT_BYTES:
            return False
        else:  # `content_hash`, inline: a walk calls this once per event
            computed = KEYED_PREFIX + blake3.blake3(text, key=salt).hexdigest()
        return stored_hash.isascii() and hmac.compare_digest(computed, stored_hash)

    def check_writable(self, where: str) -> None:
        """Refuse to write a log of a format this version only reads."""
        if self is not CURRENT:
            raise LegacyFormatError(
                f"{where} holds a format-v{self.version} log, which this version reads, "
                "verifies and exports but never writes; copy it into a new log with "
                "`factledger migrate OLD NEW --key FILE`; no event was appended"
            )


V1 = LogFormat(1, BLAKE3, False, MAX_V1_BODY_BYTES)
V2 = LogFormat(2, SHA256, True, MAX_ENVELOPE_BYTES)
CURRENT = V2
"""The format new logs are written in."""
_BY_VERSION = {f.version: f for f in (V1, V2)}


def marker(prefix: str, log_format: LogFormat = CURRENT) -> str:
    """The metadata value naming `log_format` for a backend whose markers start `prefix`."""
    return f"{prefix}/{log_format.version}"


def format_named(prefix: str, value: str | None, where: str) -> LogFormat:
    """The format a metadata value names (None, no marker: v1), or `StorageError` for a
    format this version does not know (written by a later version)."""
    if value is None:
        return V1
    name, _, number = value.rpartition("/")
    found = _BY_VERSION.get(int(number)) if name == prefix and number.isdigit() else None
    if found is None:
        raise StorageError(
            f"{where} holds a log of format {value!r}; this version reads "
            + " and ".join(repr(marker(prefix, f)) for f in _BY_VERSION.values())
        )
    return found
