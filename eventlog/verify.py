"""Re-walk the log and re-hash every stored byte: the verification primitive.

Catches a row whose content no longer matches its hash, a missing row, rows in the wrong
place, an undecodable row and a broken chain link. A history rewritten with the chain
recomputed after it, and a cut-off tail, need a checkpoint taken earlier (see `replay`).
"""

from __future__ import annotations

import hmac
from enum import StrEnum

import msgspec

from eventlog import chain
from eventlog.backend import EventLog, StoredRow
from eventlog.codec import content_hash, decode_record
from eventlog.errors import CorruptLogError


class Problem(StrEnum):
    """What verification found wrong with a row."""

    ROW_MISSING = "row_missing"
    ROWS_REORDERED = "rows_reordered"
    UNDECODABLE = "undecodable"
    CONTENT_MISMATCH = "content_mismatch"
    CHAIN_BROKEN = "chain_broken"


class ChainBreak(Exception):
    """Raised by `ChainWalker.feed` at the first row that does not verify."""

    def __init__(self, position: int, problem: Problem, reason: str) -> None:
        super().__init__(reason)
        self.position = position
        self.problem = problem
        self.reason = reason


class ChainReport(msgspec.Struct, frozen=True, kw_only=True):
    """The verdict of a walk over the whole log."""

    ok: bool
    checked: int
    """Rows that verified before the walk stopped."""
    first_bad_position: int | None = None
    problem: Problem | None = None
    reason: str | None = None
    head_position: int = 0
    """The last position that verified (0 when none did)."""
    head_chain_hash: str = ""
    """The chain value after `head_position`."""


class ChainWalker:
    """Checks stored rows one at a time, in position order, from the genesis."""

    def __init__(self, genesis: bytes) -> None:
        self.position = 0
        self.chain_value = genesis

    def feed(self, row: StoredRow) -> bytes:
        """Verify the next row and return its leaf hash; raise `ChainBreak` if it fails."""
        expected = self.position + 1
        if row.position != expected:
            raise ChainBreak(
                expected,
                Problem.ROW_MISSING,
                f"row missing: expected position {expected}, the next stored row is {row.position}",
            )
        try:
            record = decode_record(row.body, position=row.position, chain_hash="")
        except CorruptLogError as exc:
            raise ChainBreak(row.position, Problem.UNDECODABLE, str(exc)) from None
        if record.position != row.position:
            raise ChainBreak(
                row.position,
                Problem.ROWS_REORDERED,
                f"rows reordered: position {row.position} holds the event written for "
                f"position {record.position}",
            )
        if record.event_id != row.event_id:
            raise ChainBreak(
                row.position,
                Problem.CONTENT_MISMATCH,
                f"event id column at position {row.position} differs from the stored event",
            )
        text = record.payload.written_text().encode("utf-8")
        if not hmac.compare_digest(content_hash(text), record.content_hash):
            raise ChainBreak(
                row.position,
                Problem.CONTENT_MISMATCH,
                f"content changed: the content at position {row.position} does not match "
                "its content_hash",
            )
        leaf = chain.leaf_hash(row.body)
        linked = chain.link(self.chain_value, leaf)
        if not hmac.compare_digest(linked, bytes(row.chain_hash)):
            raise ChainBreak(
                row.position,
                Problem.CHAIN_BROKEN,
                f"chain link broken at position {row.position}: the stored bytes or the "
                "chain value were changed",
            )
        self.position = row.position
        self.chain_value = linked
        return leaf


def verify_chain(log: EventLog, genesis: bytes) -> ChainReport:
    """Walk every row of `log` from `genesis`, streaming, and report the first failure."""
    walker = ChainWalker(genesis)
    try:
        for row in log.scan():
            walker.feed(row)
    except ChainBreak as brk:
        return ChainReport(
            ok=False,
            checked=walker.position,
            first_bad_position=brk.position,
            problem=brk.problem,
            reason=brk.reason,
            head_position=walker.position,
            head_chain_hash=walker.chain_value.hex(),
        )
    return ChainReport(
        ok=True,
        checked=walker.position,
        head_position=walker.position,
        head_chain_hash=walker.chain_value.hex(),
    )
