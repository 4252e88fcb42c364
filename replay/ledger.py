"""`Ledger`: a log opened once, knowing what it holds, with every audit and operator
operation as a method.

It holds a file with the log and its read model, or a log in PostgreSQL (a `postgresql://`
DSN) with this host's cache file (`cache=`; without one, a read model in memory). Opened
read-only (the default) it investigates, writes nothing to the log, creates no file and
refuses every operator action; `read_only=False` opens the log for writing (creating a file
log). A host's cache is a copy of the log, not evidence: reads catch it up in either mode.

Each operation is a function of its module (`replay.history`, `replay.forensics`, ...) that
takes the ledger first; the class binds them as methods. The log, its read model and a
`Prover` stay open until `close()` (or the end of a `with` block).
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Concatenate, ParamSpec, TypeVar

from eventlog import EventLog, FactledgerError, InvalidTypeError, LogSnapshot, open_log
from eventlog.checks import check_path, is_dsn
from eventlog.logs import get_logger
from projections.internal import (
    IndexTables,
    LiveReadModel,
    ProjectedTransaction,
    Projector,
    Queryable,
    check_cache,
    default_projectors,
    index_in_cache,
    index_in_log_file,
    open_read_model,
    read_model_at_head,
)
from replay.audit import Progress, verify
from replay.checkpoints import Checkpoint
from replay.conflicts import approve, reject, set_conflict_policy
from replay.erasure import erase
from replay.errors import LedgerClosedError, ReadOnlyLedgerError
from replay.forensics import blast_radius
from replay.history import blame, diff, history
from replay.keys import KeySource
from replay.lineage import lineage
from replay.migrate import migrate
from replay.operators import add_operator, list_operators, remove_operator
from replay.proofs import ConsistencyProof, InclusionProof, Prover
from replay.quarantine import quarantine, release
from replay.rebuild import rebuild
from replay.receipts import receipts
from replay.report import report
from replay.snapshots import check_snapshots, snapshot, snapshot_at_head
from replay.timetravel import as_of
from replay.transfer import export_log, import_legacy

log = get_logger("factledger.replay")

P = ParamSpec("P")
R = TypeVar("R")


def operator_action(
    action: Callable[Concatenate[Ledger, P], R],
) -> Callable[Concatenate[Ledger, P], R]:
    """`action`, refused up front (`ReadOnlyLedgerError`) by a ledger opened read-only."""

    @functools.wraps(action)
    def checked(ledger: Ledger, /, *args: P.args, **kwargs: P.kwargs) -> R:
        ledger.require_writable(action.__name__.replace("_", " "))
        return action(ledger, *args, **kwargs)

    return checked


class Ledger:
    """One open log, its read model and a `Prover`: see `replay.ledger`. Open it with
    `Ledger.open`; close it with `close()` or a `with` block."""

    def __init__(
        self, event_log: EventLog, *, target: str, cache: str | None, read_only: bool
    ) -> None:
        self._log = event_log
        self._target = target
        self._remote = cache is not None or is_dsn(target)
        self._cache = cache
        self._read_only = read_only
        self._model: LiveReadModel | None = None
        self._kept_prover: Prover | None = None
        self._lock = threading.Lock()
        self._closed = False

    @classmethod
    def open(
        cls,
        path_or_dsn: str | os.PathLike[str],
        *,
        cache: str | os.PathLike[str] | None = None,
        read_only: bool = True,
    ) -> Ledger:
        """Open the log at `path_or_dsn` once: a file, which holds its read model, or a
        `postgresql://` DSN; with `cache`, read through this host's cache file of that log (a
        log file given with a cache is read as a log held elsewhere, as a store does).

        Raises `CacheChoiceError` for a cache it cannot use (a DSN), and `LogMissingError`
        when a read-only open finds no log in the file.
        """
        target = check_path(path_or_dsn)
        if not isinstance(read_only, bool):
            raise InvalidTypeError(f"read_only must be a bool, not {type(read_only).__name__}")
        kept = None if cache is None else check_cache(cache)
        event_log = open_log(target, read_only=read_only)
        return cls(event_log, target=target, cache=kept, read_only=read_only)

    # -- what it holds ---------------------------------------------------------------------

    @property
    def event_log(self) -> EventLog:
        """The open log (opened read-only unless the ledger was opened `read_only=False`)."""
        self.require_open()
        return self._log

    @property
    def target(self) -> str:
        """The log's file path or `postgresql://` DSN, as opened."""
        return self._target

    @property
    def log_id(self) -> str:
        """The id of the log."""
        return self.event_log.log_id

    @property
    def read_only(self) -> bool:
        """Whether this ledger refuses every write (the default: investigations only)."""
        return self._read_only

    @property
    def cache(self) -> str | None:
        """This host's cache file of a log in PostgreSQL (None: a file log, whose read model
        is in the file, or a log in PostgreSQL read through a read model in memory)."""
        return self._cache

    @property
    def read_model(self) -> LiveReadModel:
        """The read model reads and writes go through, made on first use: the log file's own
        tables, or this host's cache (or one in memory), claimed and caught up then."""
        event_log = self.event_log
        with self._lock:
            if self._model is None:
                projectors = default_projectors(event_log.log_id)
                model = open_read_model(event_log, projectors, cache=self._cache)
                if self._remote:
                    try:
                        model.open()
                    except BaseException:
                        model.close()
                        raise
                self._model = model
            return self._model

    @contextmanager
    def at_head(
        self, projectors: Sequence[Projector] | None = None
    ) -> Iterator[tuple[LogSnapshot, Queryable]]:
        """One read of the log with a read model at its head: the ledger's cache, caught up
        first (its head is the one it reached); for a file, its own tables when current, else
        `projectors` (default: all) folded in memory."""
        event_log = self.event_log
        if self._remote:
            with self.read_model.snapshot() as snap:
                yield snap, snap
            return
        chosen = projectors or default_projectors(event_log.log_id)
        with read_model_at_head(event_log, chosen) as found:
            yield found

    def require_writable(self, action: str) -> None:
        """Refuse `action` (`ReadOnlyLedgerError`) on a ledger opened read-only."""
        self.require_open()
        if self._read_only:
            raise ReadOnlyLedgerError(
                f"{action}: this ledger was opened read-only, and investigations never write; "
                "open it with read_only=False to act as operator. Nothing was written"
            )

    def write_transaction(self, action: str) -> AbstractContextManager[ProjectedTransaction]:
        """A write for the operator action `action`, folded into the read model as
        `SQLiteMemoryStore.write_transaction` folds it; refused when opened read-only."""
        self.require_writable(action)
        return self.read_model.transaction()

    # -- checkpoints and proofs, from the Prover it keeps -------------------------------------

    @property
    def _prover(self) -> Prover:
        """The `Prover` this ledger keeps, made on first use with the Merkle index kept
        beside the read model: in a log file (written only when opened for writing), or in
        this host's cache (then caught up first); a log in PostgreSQL read without a cache
        keeps it in memory."""
        with self._lock:
            prover = self._kept_prover
        if prover is None:
            tables: IndexTables | None = None
            if not self._remote:
                tables = index_in_log_file(self._log, writable=not self._read_only)
            elif self._cache is not None:
                tables = index_in_cache(self.read_model.database)
            with self._lock:
                if self._kept_prover is None:
                    self._kept_prover = Prover(self._log, tables)
                prover = self._kept_prover
        return prover

    def checkpoint(
        self,
        *,
        key: KeySource | None = None,
        snapshot: bool | None = None,
        progress: Progress | None = None,
    ) -> Checkpoint:
        """A checkpoint of the log at its head now, signed if `key` (an operator key or its
        file) is given. The first checkpoint walks and verifies the log (a row that fails
        raises `CorruptLogError`), calling `progress(done, head)` as it goes; later ones
        walk only what was appended since. A proof reads the Merkle index kept beside the
        read model instead, checked against the checkpoint (`replay.proofs.Prover`).

        `snapshot`: None (the default) also writes a snapshot of the read model at the log's
        head when the ledger was opened for writing and its snapshots are enabled (`snapshot`
        made their directory), logging a warning if it cannot; True always writes one
        (refused up front by a ledger opened read-only); False never does."""
        self.require_open()
        if snapshot is True:
            self.require_writable("a checkpoint with a snapshot writes a snapshot file")
        made = self._prover.checkpoint(key=key, progress=progress)
        if snapshot is True:
            snapshot_at_head(self, required=True)
        elif snapshot is None:
            try:
                snapshot_at_head(self)
            except (FactledgerError, OSError) as exc:
                log.warning("snapshot_failed", error=type(exc).__name__)
        return made

    def prove_inclusion(self, position: int, checkpoint: Checkpoint) -> InclusionProof:
        """Prove that the event at `position` is in the log as `checkpoint` describes it."""
        self.require_open()
        return self._prover.prove_inclusion(position, checkpoint)

    def prove_consistency(self, old: Checkpoint, new: Checkpoint) -> ConsistencyProof:
        """Prove that the log as `new` describes it extends the log as `old` described it."""
        self.require_open()
        return self._prover.prove_consistency(old, new)

    # -- every other operation: a function of its module, taking the ledger first ------------

    verify = verify
    rebuild = rebuild
    snapshot = snapshot
    check_snapshots = check_snapshots
    as_of = as_of
    history = history
    blame = blame
    diff = diff
    lineage = lineage
    blast_radius = blast_radius
    receipts = receipts
    report = report
    export = export_log
    operators = list_operators

    add_operator = operator_action(add_operator)
    remove_operator = operator_action(remove_operator)
    quarantine = operator_action(quarantine)
    release = operator_action(release)
    erase = operator_action(erase)
    set_conflict_policy = operator_action(set_conflict_policy)
    approve = operator_action(approve)
    reject = operator_action(reject)
    import_legacy = operator_action(import_legacy)
    migrate = migrate

    # -- lifetime ----------------------------------------------------------------------------

    def require_open(self) -> None:
        """Refuse a closed ledger (`LedgerClosedError`)."""
        if self._closed:
            raise LedgerClosedError("this ledger was closed; open the log again (Ledger.open)")

    def close(self) -> None:
        """Close the read model and the log; closing again does nothing."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._model is not None:
                self._model.close()
        finally:
            self._log.close()

    def __enter__(self) -> Ledger:
        self.require_open()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
