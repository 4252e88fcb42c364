"""The exceptions the read side adds. Each derives from `eventlog.FactledgerError`."""

from __future__ import annotations

from eventlog.errors import FactledgerError, InvalidInputError, StorageError


class LegacyImportError(FactledgerError, ValueError):
    """A legacy row cannot be imported as it is; nothing was imported."""


class CacheRefusedError(FactledgerError):
    """A host's read-model cache does not match the log it was opened with: it folds another
    log, is ahead of the log, or holds a chain value the log does not. The cache is kept as
    it is (it may hold evidence of history the log lost); move it aside to rebuild it."""

    def __init__(self, message: str, *, path: str, position: int | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.position = position


class CacheChoiceError(InvalidInputError):
    """A cache that cannot serve was given: a `postgresql://` DSN (a host's cache is a SQLite
    file on this host), or, to a `Ledger`, any cache with a log kept in a file (whose read
    model is in that file). Nothing was opened."""


class SyncTimeoutError(FactledgerError, TimeoutError):
    """The log did not reach the position a `sync` waited for within its timeout."""


class SecretRefusedError(InvalidInputError):
    """Text a write would record holds a secret, and the store refuses secrets (the default,
    `FACTLEDGER_SECRETS=refuse`; a name, such as a tag, is refused under `redact` too):
    nothing was written. It names the field, the detector and the character offset, never
    the secret."""

    def __init__(self, field: str, *, detector: str, offset: int, name: bool = False) -> None:
        remedy = (
            "a name is never redacted; take it out"
            if name
            else "take it out, or write with secrets='redact' (FACTLEDGER_SECRETS=redact) to "
            f"store [REDACTED:{detector}] in its place"
        )
        super().__init__(
            f"{field} holds a secret ({detector}) at character {offset}; nothing was "
            f"written: {remedy}"
        )
        self.field = field
        self.detector = detector
        self.offset = offset
        self.name = name

    def within(self, where: str) -> SecretRefusedError:
        """The same refusal, its field named inside `where` (a row of a batch or import)."""
        return SecretRefusedError(
            f"{where}: {self.field}", detector=self.detector, offset=self.offset, name=self.name
        )


class MerkleIndexError(StorageError):
    """The Merkle index kept beside the read model is damaged (a subtree's hash missing or
    not a hash): it is disposable, and is rebuilt from the log."""
