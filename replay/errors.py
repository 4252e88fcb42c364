"""The audit side's own errors: operator keys, operator authority, and the `Ledger` handle."""

from __future__ import annotations

from eventlog.errors import FactledgerError, InvalidInputError, ReadOnlyStoreError


class KeyFileError(InvalidInputError):
    """A key file is missing, unreadable, not a key, or the wrong kind of key (a public key
    where a private one is needed, or the other way round). Its message never quotes the
    file's contents."""


class NotRegularFileError(InvalidInputError):
    """A file to read (a key, a checkpoint) is a pipe, a device, a socket or a directory;
    `kind` says which."""

    def __init__(self, path: str, kind: str) -> None:
        super().__init__(f"{path} is {kind}, not a regular file")
        self.kind = kind


class NotAuthorizedError(FactledgerError):
    """An operator action was refused before anything was written: the log has an operator and
    no key was given, or the key given is not a registered operator key at the log's head."""


class UnsignedCheckpointError(InvalidInputError):
    """A checkpoint's signature was to be checked, but the checkpoint carries none."""


class ReadOnlyLedgerError(ReadOnlyStoreError):
    """A `Ledger` opened read-only was asked to write (an operator action, or a rebuild that
    swaps the read model); nothing was written."""


class LedgerClosedError(FactledgerError):
    """A `Ledger` was used after it was closed."""
