"""`Ledger.verify`: re-hash the whole log, streaming, and hold it to a checkpoint taken earlier.

The walk checks every row (`eventlog.ChainWalker`) in one process and, up to a checkpoint's
size, folds the leaf hashes into a Merkle root in O(log n) memory. The read model kept in
the log's file is held to the log too: its projector checkpoints always (a read model that
folded past the head, or at a chain value the log does not hold, shows a cut or rewritten
log; tables kept with no checkpoint, an edited checkpoint table), and with `deep` every row
of every projection, against the log refolded (`projections._comparison`), a projection it
cannot compare counting as drift. A file holding the remains of a log, or none where a
checkpoint says there was one, fails as `log_missing` (the verdict `log_missing` gives when
no ledger opens on it). The log is only read.
"""

from __future__ import annotations

import base64
import hmac
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

import msgspec

from eventlog import (
    ChainBreak,
    ChainWalker,
    EventLog,
    InvalidInputError,
    InvalidTypeError,
    LogMissingError,
    Problem,
    SQLiteEventLog,
)
from eventlog.merkle import CompactRange
from eventlog.stored import genesis_of
from eventlog.verify import Finding
from projections.internal import (
    DriftReport,
    ErasureVerdict,
    cache_hint,
    checkpoint_drift,
    judge_erasures,
    read_model_drift,
)
from replay import walk_workers
from replay.checkpoints import Checkpoint
from replay.migrate import previous_problem

if TYPE_CHECKING:
    from replay.ledger import Ledger


Progress = Callable[[int, int], object]
"""Called as `progress(done, total)` while a walk runs."""
Phase = Callable[[str], object]
"""Called as `phase(name)` when the next phase of a long check begins."""

AuditProblem = Problem
"""What `verify` found wrong: a row that fails, the log held to the checkpoint (`other_log`,
`tail_cut`, `history_rewritten`), a log's remains or none where the checkpoint says one was
(`log_missing`), or the read model held to the log (`read_model_drift`). The same enum as
`eventlog.Problem`."""


class CheckpointSummary(msgspec.Struct, frozen=True, kw_only=True):
    """The checkpoint a verification was held to, as its text form shows it."""

    log_id: str
    size: int
    root: str
    """Base64, as on the checkpoint's third line."""
    chain_hash: str
    signed: bool
    """Whether it carries signatures (`verify` does not check them: see
    `Checkpoint.verify_signature`)."""


class AuditReport(msgspec.Struct, frozen=True, kw_only=True):
    """The verdict of `verify`."""

    ok: bool
    checked: int
    """Rows that verified before the walk stopped."""
    first_bad_position: int | None = None
    problem: AuditProblem | None = None
    reason: str | None = None
    head_position: int = 0
    """The last position that verified (0 when none did)."""
    head_chain_hash: str = ""
    """The chain value after `head_position`."""
    log_id: str = ""
    empty: bool = False
    """The log holds no events, so nothing was checked (ok unless a checkpoint covers some)."""
    checkpoint: CheckpointSummary | None = None
    read_model: DriftReport | None = None
    """With `deep`, how the read model in the log's file compares with the log refolded;
    without, the projector checkpoints the log does not bear out, if any."""
    findings: tuple[Finding, ...] = ()
    """Rows that link but were read on: `unreadable` ones (this version cannot decode them;
    they change nothing, and the log still verifies), and texts that do not match their
    `content_hash` (`mismatch`) or are not stored (`absent`) where no erasure in force names
    them, which fail it. Each names its position and the writer its body claims; the first
    `MAX_LISTED` of each kind."""
    erasures: list[ErasureVerdict] = msgspec.field(default_factory=list)
    """Every erasure in the log: the positions it names, its key and reason, and whether it
    took effect. A text an authorized erasure names may be absent; the log still verifies."""


def verify(
    ledger: Ledger,
    *,
    checkpoint: Checkpoint | None = None,
    progress: Progress | None = None,
    deep: bool = False,
    phase: Phase | None = None,
    previous: str | os.PathLike[str] | None = None,
    workers: int | None = None,
) -> AuditReport:
    """Re-hash every row of the log and report the first failure; with a `checkpoint`, also
    fail unless the log still extends it; with `deep`, also fail unless every projection in
    the log's file equals the log refolded; with `previous`, the format-v1 log file a
    migration copied, also fail unless the log is its migration
    (`replay.migrate.previous_problem`). Only reads. `progress(done, total)` reports each
    phase's work, `phase(name)` the start of each after the first (with `deep`:
    'refolding', then 'comparing'). `workers` caps the processes the walk of a SQLite log of
    200,000 rows or more uses (None: one per core, at most 4; 1: this process alone); the
    report is the same either way."""
    _check_checkpoint(checkpoint)
    _check_workers(workers)
    if progress is not None and not callable(progress):
        raise InvalidTypeError("progress must be callable as progress(done, total)")
    if phase is not None and not callable(phase):
        raise InvalidTypeError("phase must be callable as phase(name)")
    if not isinstance(deep, bool):
        raise InvalidTypeError(f"deep must be a bool, not {type(deep).__name__}")
    event_log = ledger.event_log
    if deep and not isinstance(event_log, SQLiteEventLog):
        raise InvalidInputError(
            "a deep verify compares the read model kept in a log's own file; a log held "
            "elsewhere keeps none (rebuild a host's cache to compare it)"
        )
    log_id, head = event_log.log_id, event_log.head().position
    summary = None if checkpoint is None else _summary(checkpoint)
    report = _Report(log_id, head, genesis_of(event_log), summary)
    if checkpoint is not None and checkpoint.log_id != log_id:
        return report.failed(
            0,
            None,
            AuditProblem.OTHER_LOG,
            f"the checkpoint is for log {checkpoint.log_id}, this database holds log "
            f"{log_id}: a different log was put in its place",
        )
    tree_size = min(checkpoint.size, head) if checkpoint is not None else 0
    walked = _walk(event_log, report, tree_size, progress, workers)
    verdict = msgspec.structs.replace(
        _judge(report, walked, checkpoint, tree_size),
        findings=walked.findings,
        erasures=list(walked.erasures),
    )
    if verdict.ok and previous is not None:
        problem = previous_problem(ledger, previous)
        if problem is not None:
            return report.failed(
                verdict.head_position,
                bytes.fromhex(verdict.head_chain_hash),
                AuditProblem.PREVIOUS_LOG_MISMATCH,
                problem,
            )
    if not verdict.ok or not isinstance(event_log, SQLiteEventLog):
        return verdict
    return _held_to_read_model(event_log, verdict, deep=deep, progress=progress, phase=phase)


def log_missing(missing: LogMissingError, checkpoint: Checkpoint | None) -> AuditReport:
    """The verdict on a target with no usable log: its remains, or none where `checkpoint`
    says there was one; `missing` itself, raised again, for a file that never held a log
    (and no checkpoint says it did)."""
    _check_checkpoint(checkpoint)
    if checkpoint is None and not missing.remnants:
        raise missing
    reason = str(missing) + cache_hint(missing.remnants)
    if checkpoint is not None:
        reason += (
            f"; the checkpoint covers {checkpoint.size} events of log {checkpoint.log_id}: "
            "the log was removed or replaced"
        )
    return AuditReport(
        ok=False,
        checked=0,
        problem=AuditProblem.LOG_MISSING,
        reason=reason,
        log_id="" if checkpoint is None else checkpoint.log_id,
        empty=True,
        checkpoint=None if checkpoint is None else _summary(checkpoint),
    )


def _check_workers(workers: object) -> None:
    if workers is None:
        return
    if not isinstance(workers, int) or isinstance(workers, bool):
        raise InvalidTypeError(f"workers must be an int or None, not {type(workers).__name__}")
    if workers < 1:
        raise InvalidInputError(f"workers must be at least 1, not {workers}")


def _check_checkpoint(checkpoint: object) -> None:
    if checkpoint is not None and not isinstance(checkpoint, Checkpoint):
        raise InvalidTypeError(f"checkpoint must be a Checkpoint, not {type(checkpoint).__name__}")


def _held_to_read_model(
    event_log: SQLiteEventLog,
    verdict: AuditReport,
    *,
    deep: bool,
    progress: Progress | None,
    phase: Phase | None,
) -> AuditReport:
    """`verdict` (a log that verified), failed if the read model in its file shows drift:
    checkpoints the log does not bear out, or with `deep` any row unlike the refold."""
    if deep:
        compared = read_model_drift(event_log, progress=progress, phase=phase)
    else:
        drift = checkpoint_drift(event_log)
        compared = DriftReport(compared=[], differences=len(drift), drift=drift)
    if not compared.drift:
        return msgspec.structs.replace(verdict, read_model=compared if deep else None)
    first = compared.drift[0]
    where = f"{first.table} row {first.row}" if first.row else first.table
    more = compared.differences - 1
    reason = f"the read model does not match the log: {where}: {first.reason}"
    if more:
        reason += f" ({more} more difference{'s' if more > 1 else ''})"
    return msgspec.structs.replace(
        verdict,
        ok=False,
        problem=AuditProblem.READ_MODEL_DRIFT,
        reason=reason,
        read_model=compared,
    )


class _Report(NamedTuple):
    """What every report of one verification shares."""

    log_id: str
    head: int
    genesis: bytes
    summary: CheckpointSummary | None

    def failed(
        self,
        position: int,
        chain_value: bytes | None,
        problem: AuditProblem,
        reason: str,
        *,
        first_bad: int | None = None,
    ) -> AuditReport:
        return AuditReport(
            ok=False,
            checked=position,
            first_bad_position=first_bad,
            problem=problem,
            reason=reason,
            head_position=position,
            head_chain_hash=(chain_value or self.genesis).hex(),
            log_id=self.log_id,
            empty=self.head == 0,
            checkpoint=self.summary,
        )


def _judge(
    report: _Report, walked: _Walked, checkpoint: Checkpoint | None, tree_size: int
) -> AuditReport:
    """The verdict from the walk and the checkpoint."""
    if walked.failure is not None:
        return report.failed(
            walked.position,
            walked.chain_value,
            walked.failure.problem,
            walked.failure.reason,
            first_bad=walked.failure.position,
        )
    if walked.text_problem is not None:  # an absent text is lawful only where erased
        position, reason = walked.text_problem
        return report.failed(
            walked.position,
            walked.chain_value,
            AuditProblem.CONTENT_MISMATCH,
            f"content changed at position {position}: {reason}",
            first_bad=position,
        )
    if checkpoint is not None:
        if report.head < checkpoint.size:
            return report.failed(
                walked.position,
                walked.chain_value,
                AuditProblem.TAIL_CUT,
                f"tail cut off: the log ends at position {report.head}, but the checkpoint "
                f"covers {checkpoint.size} events",
                first_bad=report.head + 1,
            )
        if not hmac.compare_digest(walked.checkpoint_chain.hex(), checkpoint.chain_hash):
            return report.failed(
                walked.position,
                walked.chain_value,
                AuditProblem.HISTORY_REWRITTEN,
                f"history rewritten: the chain hash at position {tree_size} differs from the "
                f"checkpoint's, so some event at positions 1 to {tree_size} was changed and "
                "the chain recomputed after it",
            )
        if not hmac.compare_digest(walked.tree.root(), checkpoint.root):
            return report.failed(
                walked.position,
                walked.chain_value,
                AuditProblem.HISTORY_REWRITTEN,
                f"the Merkle root over positions 1 to {tree_size} differs from the checkpoint's "
                "although the chain hash matches: the checkpoint was not taken from this log",
            )
    return AuditReport(
        ok=True,
        checked=walked.position,
        head_position=walked.position,
        head_chain_hash=walked.chain_value.hex(),
        log_id=report.log_id,
        empty=report.head == 0,
        checkpoint=report.summary,
    )


def _summary(checkpoint: Checkpoint) -> CheckpointSummary:
    return CheckpointSummary(
        log_id=checkpoint.log_id,
        size=checkpoint.size,
        root=base64.b64encode(checkpoint.root).decode("ascii"),
        chain_hash=checkpoint.chain_hash,
        signed=bool(checkpoint.signatures),
    )


# -- walking -------------------------------------------------------------------------------


class _Walked(NamedTuple):
    """What walking the rows found."""

    position: int
    """The last position that verified."""
    chain_value: bytes
    failure: ChainBreak | None
    """The first row that failed, if one did."""
    tree: CompactRange
    """The Merkle tree over the leaves up to the checkpoint's size."""
    checkpoint_chain: bytes
    """The chain value at the checkpoint's size."""
    findings: tuple[Finding, ...]
    """Rows read on: unreadable, or whose text does not match (erased ones left out)."""
    erasures: tuple[ErasureVerdict, ...] = ()
    text_problem: tuple[int, str] | None = None
    """The first text that fails the log: one that does not match, or is absent where no
    erasure in force names it."""


def _walk(
    event_log: EventLog,
    report: _Report,
    tree_size: int,
    progress: Progress | None,
    workers: int | None,
) -> _Walked:
    """Verify every row (`replay.walk_workers`: in several processes where that pays); fold
    the leaves up to `tree_size` into a Merkle tree."""
    walker = ChainWalker(event_log.log_format, report.genesis)
    tree = CompactRange(event_log.log_format.chain)
    try:
        found = walk_workers.walk_log(
            event_log, walker, tree, report.head, tree_size, progress, workers
        )
    except ChainBreak as brk:
        findings = tuple(walker.findings)
        return _Walked(walker.position, walker.chain_value, brk, tree, report.genesis, findings)
    checkpoint_chain = report.genesis if found is None else found
    erasures = tuple(
        judge_erasures(event_log.log_id, (event_log.event_at(p) for p in walker.authority_rows))
    )
    erased = {p for e in erasures if e.authorized for p in e.positions}
    unlawful = next((p for p in walker.absent if p not in erased), None)
    problems = [
        (p, reason)
        for p, reason in (
            (unlawful, _ABSENT),
            (walker.first_mismatch, _MISMATCH),
        )
        if p is not None
    ]
    findings = tuple(
        f for f in walker.findings if not (f.problem == "absent" and f.position in erased)
    )
    return _Walked(
        walker.position,
        walker.chain_value,
        None,
        tree,
        checkpoint_chain,
        findings,
        erasures,
        min(problems) if problems else None,
    )


_ABSENT = "no text is stored beside the event, and no erasure in force names it"
_MISMATCH = "the text stored beside the event does not match its content_hash"
