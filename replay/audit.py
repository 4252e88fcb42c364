"""`verify`: re-hash the whole log, streaming, and hold it to a checkpoint taken earlier.

The walk checks every row (`eventlog.verify.ChainWalker`) and, up to a checkpoint's size,
folds the leaf hashes into a Merkle root in O(log n) memory. A large log is cut into
contiguous segments, walked at once by this process and by fresh worker interpreters (never
forks: a forked SQLite handle is unsafe): a row's check needs only the stored chain value
before it, and the segments' subtrees join into one tree.
"""

from __future__ import annotations

import base64
import functools
import hmac
import itertools
import os
import sys
from collections.abc import Callable, Iterator
from enum import StrEnum
from multiprocessing.connection import Connection
from typing import NamedTuple

import msgspec

from eventlog import ChainBreak, EventLog, InvalidTypeError, Problem, StoredRow, open_log
from eventlog.chain import genesis
from eventlog.checks import check_path, check_position
from eventlog.logs import get_logger
from eventlog.verify import ChainWalker
from replay import workers
from replay.checkpoints import Checkpoint
from replay.merkle import CompactRange

log = get_logger("factledger.replay")

BATCH = 1 << 14
"""Rows walked between progress reports (and Merkle folds)."""
MIN_SEGMENT = 50_000
"""Fewest rows per process worth starting a worker interpreter for."""
WORKER_START_ROWS = 40_000
"""About the rows this process walks while a worker interpreter starts (0.15 to 0.2 s)."""

Progress = Callable[[int, int], object]
"""Called as `progress(done, total)` while a walk runs."""


class AuditProblem(StrEnum):
    """What `verify` found wrong: a row that fails (as `eventlog.Problem`), or the checkpoint."""

    ROW_MISSING = "row_missing"
    ROWS_REORDERED = "rows_reordered"
    UNDECODABLE = "undecodable"
    CONTENT_MISMATCH = "content_mismatch"
    CHAIN_BROKEN = "chain_broken"
    OTHER_LOG = "other_log"
    TAIL_CUT = "tail_cut"
    HISTORY_REWRITTEN = "history_rewritten"


class CheckpointSummary(msgspec.Struct, frozen=True, kw_only=True):
    """The checkpoint a verification was held to, as its text form shows it."""

    log_id: str
    size: int
    root: str
    """Base64, as on the checkpoint's third line."""
    chain_hash: str
    signed: bool
    """Whether it carries a MAC (`verify` does not check it: see `Checkpoint.verify_mac`)."""


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


class _Segment(msgspec.Struct, frozen=True, kw_only=True):
    """What walking the rows of one segment found (also sent back by a worker)."""

    position: int
    """The last position that verified."""
    chain_value: bytes
    failure: tuple[int, str, str] | None = None
    """(position, problem, reason) of the first row that failed."""
    tree: list[tuple[int, bytes]] = []
    """The subtrees (level, hash) over the segment's leaves up to the checkpoint's size."""
    checkpoint_chain: bytes | None = None
    """The chain value at the checkpoint's size, if this segment reached it."""


class _Message(msgspec.Struct, frozen=True, kw_only=True):
    """One message from a worker: progress, its result, or why it failed."""

    done: int = 0
    segment: _Segment | None = None
    error: str | None = None


_ENCODER = msgspec.msgpack.Encoder()
_DECODER = msgspec.msgpack.Decoder(_Message)
_WORKER_CODE = "from replay.audit import _worker_main; _worker_main()"


def verify(
    db_path: str | os.PathLike[str],
    *,
    checkpoint: Checkpoint | None = None,
    progress: Progress | None = None,
    workers: int | None = None,
) -> AuditReport:
    """Re-hash every row of the log at `db_path` (opened read-only) and report the first
    failure; with a `checkpoint`, also fail unless the log still extends it.

    `workers` caps the processes sharing the walk (default: one per CPU on a large log).
    """
    check_path(db_path)
    if checkpoint is not None and not isinstance(checkpoint, Checkpoint):
        raise InvalidTypeError(f"checkpoint must be a Checkpoint, not {type(checkpoint).__name__}")
    if progress is not None and not callable(progress):
        raise InvalidTypeError("progress must be callable as progress(done, total)")
    if workers is not None:
        check_position("workers", workers, minimum=1)
    event_log = open_log(db_path, read_only=True)
    try:
        log_id, head = event_log.log_id, event_log.head().position
        summary = None if checkpoint is None else _summary(checkpoint)
        report = _Report(log_id, head, genesis(log_id), summary)
        if checkpoint is not None and checkpoint.log_id != log_id:
            return report.failed(
                0,
                None,
                AuditProblem.OTHER_LOG,
                f"the checkpoint is for log {checkpoint.log_id}, this database holds log "
                f"{log_id}: a different log was put in its place",
            )
        tree_size = min(checkpoint.size, head) if checkpoint is not None else 0
        cuts = _cuts(head, _worker_count(workers, head))
        walked = _walk(event_log, str(db_path), cuts, tree_size, progress)
    finally:
        event_log.close()
    return _judge(report, walked, checkpoint, tree_size)


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
    report: _Report, walked: list[_Segment], checkpoint: Checkpoint | None, tree_size: int
) -> AuditReport:
    """The verdict from the segments' results, in order."""
    done = walked[0]
    tree = CompactRange()
    checkpoint_chain = report.genesis
    for segment in walked:
        if segment.failure is not None:
            position, problem, reason = segment.failure
            return report.failed(
                segment.position,
                segment.chain_value,
                AuditProblem(problem),
                reason,
                first_bad=position,
            )
        for level, node in segment.tree:
            tree.push(level, node)
        if segment.checkpoint_chain is not None:
            checkpoint_chain = segment.checkpoint_chain
        done = segment
    if checkpoint is not None:
        if report.head < checkpoint.size:
            return report.failed(
                done.position,
                done.chain_value,
                AuditProblem.TAIL_CUT,
                f"tail cut off: the log ends at position {report.head}, but the checkpoint "
                f"covers {checkpoint.size} events",
                first_bad=report.head + 1,
            )
        if not hmac.compare_digest(checkpoint_chain.hex(), checkpoint.chain_hash):
            return report.failed(
                done.position,
                done.chain_value,
                AuditProblem.HISTORY_REWRITTEN,
                f"history rewritten: the chain hash at position {tree_size} differs from the "
                f"checkpoint's, so some event at positions 1 to {tree_size} was changed and "
                "the chain recomputed after it",
            )
        if not hmac.compare_digest(tree.root(), checkpoint.root):
            return report.failed(
                done.position,
                done.chain_value,
                AuditProblem.HISTORY_REWRITTEN,
                f"the Merkle root over positions 1 to {tree_size} differs from the checkpoint's "
                "although the chain hash matches: the checkpoint was not taken from this log",
            )
    return AuditReport(
        ok=True,
        checked=done.position,
        head_position=done.position,
        head_chain_hash=done.chain_value.hex(),
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
        signed=checkpoint.mac is not None,
    )


# -- walking -------------------------------------------------------------------------------


def _worker_count(requested: int | None, rows: int) -> int:
    if requested is not None:
        return max(1, min(requested, rows))
    return max(1, min(workers.usable_cpus(), rows // MIN_SEGMENT))


def _cuts(head: int, parts: int) -> list[int]:
    """Segment boundaries 0 = c0 < c1 < ... = head. The first segment, walked here, is longer
    by what this process walks while the workers start; the others share the rest evenly."""
    even = head // parts
    first = even + min(WORKER_START_ROWS, even // 2) if parts > 1 else head
    rest = head - first
    return sorted({0, first, *(first + rest * i // (parts - 1) for i in range(1, parts))})


def _walk(
    event_log: EventLog, db_path: str, cuts: list[int], tree_size: int, progress: Progress | None
) -> list[_Segment]:
    """Walk every segment: the first here, the others in worker interpreters when possible."""
    total = cuts[-1]
    spans = list(itertools.pairwise(cuts)) or [(0, 0)]
    counts = [0] * len(spans)

    def report(index: int, done: int) -> None:
        counts[index] = done
        if progress is not None:
            progress(sum(counts), total)

    def here(index: int) -> _Segment:
        after, until = spans[index]
        return _walk_segment(event_log, after, until, tree_size, functools.partial(report, index))

    if len(spans) == 1 or not workers.available():
        return [here(index) for index in range(len(spans))]
    results: dict[int, _Segment] = {}
    failed: set[int] = set()
    arguments = [[db_path, str(after), str(until), str(tree_size)] for after, until in spans[1:]]
    with workers.interpreters(_WORKER_CODE, arguments) as pipes:

        def drain(index: int, pipe: Connection, *, wait: bool) -> None:
            while index not in results and index not in failed and (wait or pipe.poll()):
                message = _read(pipe)
                if message is None:
                    failed.add(index)
                elif message.segment is not None:
                    results[index] = message.segment
                else:
                    report(index, message.done)

        def own_progress(done: int) -> None:
            report(0, done)
            for index, pipe in enumerate(pipes, start=1):
                drain(index, pipe, wait=False)

        results[0] = _walk_segment(event_log, *spans[0], tree_size, own_progress)
        for index, pipe in enumerate(pipes, start=1):
            drain(index, pipe, wait=True)
    for index in sorted(failed):
        log.warning("verify_worker_failed", segment=index)
        results[index] = here(index)
    return [results[index] for index in range(len(spans))]


def _read(pipe: Connection) -> _Message | None:
    """The next message from a worker; None once it has failed or ended without a result."""
    message = workers.receive(pipe, _DECODER)
    return None if message is None or message.error is not None else message


def _worker_main() -> None:
    """A worker interpreter: walk the segment named on the command line, report on a pipe."""
    db_path, after, until, tree_size = sys.argv[1:-1]

    def walk(send: workers.Send) -> None:
        event_log = open_log(db_path, read_only=True)
        try:
            segment = _walk_segment(
                event_log,
                int(after),
                int(until),
                int(tree_size),
                lambda done: send(_ENCODER.encode(_Message(done=done))),
            )
        finally:
            event_log.close()
        send(_ENCODER.encode(_Message(segment=segment)))

    workers.serve(walk, lambda reason: _ENCODER.encode(_Message(error=reason)))


def _walk_segment(
    event_log: EventLog, after: int, until: int, tree_size: int, progress: Callable[[int], object]
) -> _Segment:
    """Verify rows after..until; fold leaves up to `tree_size` into the segment's subtrees."""
    start = _stored_chain(event_log, after)
    if start is None:
        failure = (after, Problem.ROW_MISSING.value, f"row missing: position {after}")
        return _Segment(position=after, chain_value=b"", failure=failure)
    walker = ChainWalker(start, position=after)
    tree = CompactRange(after)
    checkpoint_chain = start if after == tree_size else None
    leaves: list[bytes] = []
    try:
        for begin, end in _batches(after, until, tree_size):
            folding = end <= tree_size
            walker.walk(event_log.scan(begin, end), leaves.append if folding else None)
            while walker.position < end:
                walker.feed(_next_row(event_log, walker.position))
            if folding:
                tree.add_leaves(leaves)
                leaves.clear()
            if end == tree_size:
                checkpoint_chain = walker.chain_value
            progress(end - after)
    except ChainBreak as brk:
        failure = (brk.position, brk.problem.value, brk.reason)
        return _Segment(position=walker.position, chain_value=walker.chain_value, failure=failure)
    return _Segment(
        position=walker.position,
        chain_value=walker.chain_value,
        tree=tree.nodes(),
        checkpoint_chain=checkpoint_chain,
    )


def _batches(after: int, until: int, tree_size: int) -> Iterator[tuple[int, int]]:
    """(begin, end) pairs covering after..until, cut at multiples of BATCH and at tree_size."""
    cuts = {after, until, *range(after - after % BATCH + BATCH, until, BATCH)}
    if after < tree_size < until:
        cuts.add(tree_size)
    return itertools.pairwise(sorted(cuts))


def _next_row(event_log: EventLog, position: int) -> StoredRow:
    """The first stored row after `position`, to name what a walk that stopped short missed."""
    row = next(iter(event_log.scan(position)), None)
    if row is None:
        raise ChainBreak(
            position + 1,
            Problem.ROW_MISSING,
            f"row missing: expected position {position + 1}, no later row is stored",
        )
    return row


def _stored_chain(event_log: EventLog, position: int) -> bytes | None:
    """The stored chain value at `position` (the genesis at 0), or None if the row is gone."""
    if position == 0:
        return genesis(event_log.log_id)
    row = next(iter(event_log.scan(position - 1, position)), None)
    return None if row is None or row.position != position else row.chain_hash
