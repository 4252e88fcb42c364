"""`Ledger`'s operations as functions of a log's path or DSN, for one call each.

`replay.history("memory.db", tag="api")` opens a `Ledger` on the file, makes the one call
and closes it: read-only for an investigation, for writing for an operator action. For many
calls, or a log in PostgreSQL read through this host's cache, open a `Ledger` and keep it:
each of these walks or folds what a kept one already has.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable
from typing import Concatenate, ParamSpec, TypeVar

from eventlog import LogMissingError
from replay.audit import AuditReport, Phase, Progress, log_missing
from replay.checkpoints import Checkpoint
from replay.ledger import Ledger
from replay.rebuild import Progress as RebuildProgress
from replay.rebuild import RebuildReport

P = ParamSpec("P")
R = TypeVar("R")
Target = str | os.PathLike[str]


def one_call(
    operation: Callable[Concatenate[Ledger, P], R], *, writes: bool = False
) -> Callable[Concatenate[Target, P], R]:
    """`operation` as a function of the log's path or DSN, on a `Ledger` opened for the call
    (for writing if it `writes`, else read-only)."""

    def call(path_or_dsn: Target, /, *args: P.args, **kwargs: P.kwargs) -> R:
        with Ledger.open(path_or_dsn, read_only=not writes) as ledger:
            return operation(ledger, *args, **kwargs)

    mode = "for writing" if writes else "read-only"
    first = inspect.Parameter(
        "path_or_dsn", inspect.Parameter.POSITIONAL_ONLY, annotation="str | os.PathLike[str]"
    )
    signature = inspect.signature(operation)
    call.__name__ = call.__qualname__ = operation.__name__
    done = inspect.cleandoc(operation.__doc__ or "")
    call.__doc__ = f"{done}\n\nOpens a `Ledger` on `path_or_dsn` {mode} for this call."
    call.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[first, *list(signature.parameters.values())[1:]]
    )
    return call


def verify(
    path_or_dsn: Target,
    *,
    checkpoint: Checkpoint | None = None,
    progress: Progress | None = None,
    deep: bool = False,
    phase: Phase | None = None,
    previous: Target | None = None,
    workers: int | None = None,
) -> AuditReport:
    """`Ledger.verify` on the log at `path_or_dsn`, opened read-only for this call. A file
    holding a log's remains, or none where `checkpoint` says one was, is reported as
    `log_missing`; one that never held a log raises `LogMissingError`."""
    try:
        ledger = Ledger.open(path_or_dsn)
    except LogMissingError as missing:
        return log_missing(missing, checkpoint)
    with ledger:
        return ledger.verify(
            checkpoint=checkpoint,
            progress=progress,
            deep=deep,
            phase=phase,
            previous=previous,
            workers=workers,
        )


def rebuild(
    path_or_dsn: Target, *, swap: bool = False, progress: RebuildProgress | None = None
) -> RebuildReport:
    """`Ledger.rebuild` on the log at `path_or_dsn`, opened for this call: read-only to
    compare, for writing to swap."""
    with Ledger.open(path_or_dsn, read_only=swap is not True) as ledger:
        return ledger.rebuild(swap=swap, progress=progress)


checkpoint = one_call(Ledger.checkpoint)
prove_inclusion = one_call(Ledger.prove_inclusion)
prove_consistency = one_call(Ledger.prove_consistency)
as_of = one_call(Ledger.as_of)
history = one_call(Ledger.history)
blame = one_call(Ledger.blame)
diff = one_call(Ledger.diff)
lineage = one_call(Ledger.lineage)
blast_radius = one_call(Ledger.blast_radius)
export_log = one_call(Ledger.export)
list_operators = one_call(Ledger.operators)
add_operator = one_call(Ledger.add_operator, writes=True)
remove_operator = one_call(Ledger.remove_operator, writes=True)
quarantine = one_call(Ledger.quarantine, writes=True)
release = one_call(Ledger.release, writes=True)
set_conflict_policy = one_call(Ledger.set_conflict_policy, writes=True)
approve = one_call(Ledger.approve, writes=True)
reject = one_call(Ledger.reject, writes=True)
