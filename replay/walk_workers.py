"""Verify's walk over several cores: a SQLite log's rows cut into ranges, each range after the
first walked by a worker process (`python -I -m replay.walk_workers`) from the chain value
stored at its start, while this process walks the first. The ranges are then joined in
order: each worker's start must equal the chain value the walk before it reached (compared
in constant time), so the result is the one walk the rows would have had in one process.

A worker that cannot start, dies or answers what cannot be decoded costs time, not truth:
its range is walked here instead. Nothing a worker sends carries a payload's contents.
"""

from __future__ import annotations

import hmac
import itertools
import os
import struct
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from typing import IO

import msgspec

from eventlog import (
    ChainBreak,
    ChainWalker,
    EventLog,
    FactledgerError,
    Problem,
    SQLiteEventLog,
    StoredRow,
)
from eventlog.logs import get_logger
from eventlog.merkle import CompactRange
from eventlog.verify import MAX_LISTED, Finding

log = get_logger(__name__)

BATCH = 1 << 14
"""Rows walked between progress reports (and Merkle folds)."""
PARALLEL_FROM = 200_000
"""Rows below which a log is walked in one process: a worker's start (importing the package,
opening the file: about 0.3 s) costs more than it saves."""
MAX_WORKERS = 4
"""The most processes a walk uses by default (measured only up to 2 cores)."""
_FRAME = struct.Struct(">I")
_COMMAND = [sys.executable, "-I", "-m", "replay.walk_workers"]
"""How a worker starts: isolated (-I), so neither the working directory nor PYTHON*
variables can put other code in its place."""


class RangeRequest(msgspec.Struct, frozen=True):
    """What a worker walks: rows (`after`, `until`] of the log at `path`, folding leaves up
    to `tree_size` into a Merkle range."""

    path: str
    log_id: str
    after: int
    until: int
    tree_size: int


class Walked(msgspec.Struct, frozen=True, tag=True):
    """A worker's answer: the chain value it started from, where it stopped, the first row
    that failed (position, problem, reason), its Merkle range's nodes and what it read on."""

    start_chain: bytes
    position: int
    chain_value: bytes
    failure: tuple[int, str, str] | None
    nodes: list[tuple[int, bytes]]
    checkpoint_chain: bytes | None
    findings: list[Finding]
    unreadable: int
    text_problems: int
    first_mismatch: int | None
    absent: bytes
    authority_rows: bytes


class Progressed(msgspec.Struct, frozen=True, tag=True):
    """Rows a worker has walked so far."""

    done: int


_Frame = Walked | Progressed
_DECODER: msgspec.msgpack.Decoder[_Frame] = msgspec.msgpack.Decoder(_Frame)


def walk_range(
    event_log: EventLog,
    walker: ChainWalker,
    tree: CompactRange,
    end: int,
    tree_size: int,
    on_batch: Callable[[int], object],
) -> bytes | None:
    """Walk rows (`walker.position`, `end`], folding leaves up to `tree_size` into `tree`;
    return the chain value at `tree_size` if the range holds it. Raises `ChainBreak`."""
    checkpoint_chain = None
    leaves: list[bytes] = []
    for begin, stop in _batches(walker.position, end, tree_size):
        folding = stop <= tree_size
        walker.walk(event_log.scan(after=begin, until=stop), leaves.append if folding else None)
        while walker.position < stop:
            walker.feed(_next_row(event_log, walker.position))
        if folding:
            tree.add_leaves(leaves)
            leaves.clear()
        if stop == tree_size:
            checkpoint_chain = walker.chain_value
        on_batch(stop)
    return checkpoint_chain


def _batches(begin: int, end: int, tree_size: int) -> Iterator[tuple[int, int]]:
    """(begin, end) pairs covering the range, cut at multiples of BATCH and at tree_size."""
    cuts = {begin, end, *range((begin // BATCH + 1) * BATCH, end, BATCH)}
    if begin < tree_size < end:
        cuts.add(tree_size)
    return itertools.pairwise(sorted(cuts))


def _next_row(event_log: EventLog, position: int) -> StoredRow:
    """The first stored row after `position`, to name what a walk that stopped short missed."""
    row = next(event_log.scan(after=position, limit=1), None)
    if row is None:
        raise ChainBreak(
            position + 1,
            Problem.ROW_MISSING,
            f"row missing: expected position {position + 1}, no later row is stored",
        )
    return row


def cuts(event_log: EventLog, head: int, workers: int | None) -> list[int]:
    """Where the ranges end, the last at `head`: one range unless the log is a SQLite file of
    at least `PARALLEL_FROM` rows and more than one process is allowed (None: one per core
    this process may use, at most `MAX_WORKERS`)."""
    if workers is None:
        workers = min(_cores(), MAX_WORKERS)
    if workers < 2 or head < PARALLEL_FROM or not _walkable_elsewhere(event_log):
        return [head]
    step = -(-head // workers // BATCH) * BATCH
    return [*range(step, head, step), head]


def _cores() -> int:
    """The cores this process may run on (all of them where the system cannot say)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on every system
        return os.cpu_count() or 1


def _walkable_elsewhere(event_log: EventLog) -> bool:
    return isinstance(event_log, SQLiteEventLog) and event_log.path != ":memory:"


class Worker:
    """One worker process walking one range, and a thread reading what it sends."""

    def __init__(self, request: RangeRequest) -> None:
        self.request = request
        self.done = request.after
        self.answer: Walked | None = None
        self.trouble: str | None = None
        try:
            self._process: subprocess.Popen[bytes] | None = subprocess.Popen(
                _COMMAND,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
            )
        except OSError as exc:
            self._process, self.trouble = None, f"could not start: {exc.strerror}"
            return
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        process = self._process
        assert process is not None and process.stdin is not None and process.stdout is not None
        try:
            process.stdin.write(msgspec.msgpack.encode(self.request))
            process.stdin.close()
            for frame in _frames(process.stdout):
                if isinstance(frame, Progressed):
                    self.done = frame.done
                else:
                    self.answer = frame
        except (OSError, msgspec.DecodeError, ValueError) as exc:
            self.trouble = f"its answer could not be read ({type(exc).__name__})"

    def result(self, on_wait: Callable[[], object]) -> Walked | None:
        """The worker's answer, calling `on_wait` while it works; None (and a warning) if it
        gave none, so the caller walks the range itself."""
        if self._process is not None:
            while self._reader.is_alive():
                self._reader.join(0.25)
                on_wait()
            self._process.wait()
            if self.answer is None and self.trouble is None:
                self.trouble = f"it exited with status {self._process.returncode}"
        if self.answer is None:
            log.warning(
                "walk_worker_failed",
                after=self.request.after,
                until=self.request.until,
                reason=self.trouble,
            )
        return self.answer

    def stop(self) -> None:
        """End the worker if it still runs (the walk before its range failed)."""
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.wait()


def _frames(stream: IO[bytes]) -> Iterator[_Frame]:
    while header := stream.read(_FRAME.size):
        (size,) = _FRAME.unpack(header)
        body = stream.read(size)
        if len(body) != size:
            raise ValueError("a frame was cut short")
        yield _DECODER.decode(body)


def walk_log(
    event_log: EventLog,
    walker: ChainWalker,
    tree: CompactRange,
    head: int,
    tree_size: int,
    progress: Callable[[int, int], object] | None,
    workers: int | None,
) -> bytes | None:
    """Walk every row up to `head` from the genesis `walker` starts at, in ranges (`cuts`),
    the ones after the first by workers; fold leaves up to `tree_size` into `tree`; return
    the chain value at `tree_size` if the walk passed it. Raises `ChainBreak` at the first
    row that fails, `walker` then describing the last one that verified."""
    ends = cuts(event_log, head, workers)
    started = [
        Worker(RangeRequest(_path(event_log), event_log.log_id, begin, end, tree_size))
        for begin, end in itertools.pairwise(ends)
    ]
    walked_here = 0

    def report(done: int | None = None) -> None:
        nonlocal walked_here
        walked_here = walked_here if done is None else done
        if progress is not None:
            progress(walked_here + sum(w.done - w.request.after for w in started), head)

    try:
        found = walk_range(event_log, walker, tree, ends[0], tree_size, report)
        for worker in started:
            walked = worker.result(report)
            if walked is None:

                def advance(done: int, worker: Worker = worker) -> None:
                    worker.done = done
                    report()

                until = worker.request.until
                there = walk_range(event_log, walker, tree, until, tree_size, advance)
            else:
                there = join(walker, tree, walked, worker.request.until)
            found = found if there is None else there
            report()
        return found
    finally:
        for worker in started:
            worker.stop()


def _path(event_log: EventLog) -> str:
    return event_log.path if isinstance(event_log, SQLiteEventLog) else ""


def join(walker: ChainWalker, tree: CompactRange, walked: Walked, until: int) -> bytes | None:
    """Take on the range up to `until` a worker walked right after `walker`'s: its findings,
    its Merkle nodes, its end; return its chain value at the checkpoint's size, if it held
    it. Raises `ChainBreak` where the worker's start is not where `walker` stopped (the log
    changed while it was walked), at the worker's first failed row, or where it says it
    stopped short of `until` with no failure (never believed)."""
    if not hmac.compare_digest(walker.chain_value, walked.start_chain):
        raise ChainBreak(
            walker.position + 1,
            Problem.CHAIN_BROKEN,
            f"the log changed while it was verified: the chain value stored at position "
            f"{walker.position} was read twice and differed",
        )
    room = 2 * MAX_LISTED - len(walker.findings)
    walker.findings.extend(walked.findings[: max(room, 0)])
    walker.unreadable += walked.unreadable
    walker.text_problems += walked.text_problems
    if walker.first_mismatch is None:
        walker.first_mismatch = walked.first_mismatch
    walker.absent.frombytes(walked.absent)
    walker.authority_rows.frombytes(walked.authority_rows)
    for level, node in walked.nodes:
        tree.push(level, node)
    walker.position, walker.chain_value = walked.position, walked.chain_value
    if walked.failure is not None:
        position, problem, reason = walked.failure
        raise ChainBreak(position, Problem(problem), reason)
    if walked.position != until:
        raise ChainBreak(
            walked.position + 1,
            Problem.ROW_MISSING,
            f"a worker walked to position {walked.position}, not {until}: rows after it unread",
        )
    return walked.checkpoint_chain


def walk_request(request: RangeRequest, send: Callable[[_Frame], object]) -> Walked:
    """What a worker does: open the log read-only, walk its range, answer."""
    event_log = SQLiteEventLog(request.path, read_only=True)
    try:
        if event_log.log_id != request.log_id:
            raise FactledgerError("the file holds another log than the one being verified")
        stored = next(event_log.scan(after=request.after - 1, until=request.after), None)
        if stored is None or stored.position != request.after:
            raise FactledgerError(f"no row is stored at position {request.after}")
        start = bytes(stored.chain_hash)
        walker = ChainWalker(event_log.log_format, start, position=request.after)
        tree = CompactRange(event_log.log_format.chain, request.after)
        failure, checkpoint_chain = None, None
        try:
            checkpoint_chain = walk_range(
                event_log,
                walker,
                tree,
                request.until,
                request.tree_size,
                lambda done: send(Progressed(done)),
            )
        except ChainBreak as brk:
            failure = (brk.position, str(brk.problem), brk.reason)
    finally:
        event_log.close()
    return Walked(
        start_chain=start,
        position=walker.position,
        chain_value=walker.chain_value,
        failure=failure,
        nodes=tree.nodes(),
        checkpoint_chain=checkpoint_chain,
        findings=walker.findings,
        unreadable=walker.unreadable,
        text_problems=walker.text_problems,
        first_mismatch=walker.first_mismatch,
        absent=walker.absent.tobytes(),
        authority_rows=walker.authority_rows.tobytes(),
    )


def main() -> int:
    """A worker: read one `RangeRequest` on stdin, write frames on stdout."""
    request = msgspec.msgpack.decode(sys.stdin.buffer.read(), type=RangeRequest)
    out = sys.stdout.buffer

    def send(frame: _Frame) -> None:
        body = msgspec.msgpack.encode(frame)
        out.write(_FRAME.pack(len(body)) + body)
        out.flush()

    send(walk_request(request, send))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
