"""Re-walk the log and re-hash every stored byte: the verification primitive.

Catches a row whose content no longer matches its hash, a missing row, rows in the wrong
place, an undecodable row and a broken chain link. A history rewritten with the chain
recomputed after it, and a cut-off tail, need a checkpoint taken earlier (see `replay`).
"""

from __future__ import annotations

import functools
import hmac
import operator
from array import array
from collections.abc import Callable, Iterable
from enum import StrEnum
from typing import Any, ClassVar, get_args

import msgspec

from eventlog.backend import EventLog, StoredRow
from eventlog.chain import LEAF_PREFIX, LINK_PREFIX
from eventlog.codec import read_row
from eventlog.errors import ChainBreak
from eventlog.events import EventPayload, Payload, RecordedEvent, Unreadable
from eventlog.formats import LogFormat


class Problem(StrEnum):
    """What verification found wrong: a row that fails the walk (the first five); held to a
    checkpoint taken earlier (`replay.verify`), the log as a whole (the next three); a file
    that holds the remains of a log, or none where a checkpoint says there was one
    (`log_missing`); a read model the log does not bear out (`read_model_drift`); or a
    migrated log that is not a copy of the v1 log file it is held to
    (`previous_log_mismatch`)."""

    ROW_MISSING = "row_missing"
    ROWS_REORDERED = "rows_reordered"
    UNDECODABLE = "undecodable"
    CONTENT_MISMATCH = "content_mismatch"
    CHAIN_BROKEN = "chain_broken"
    OTHER_LOG = "other_log"
    TAIL_CUT = "tail_cut"
    HISTORY_REWRITTEN = "history_rewritten"
    LOG_MISSING = "log_missing"
    READ_MODEL_DRIFT = "read_model_drift"
    PREVIOUS_LOG_MISMATCH = "previous_log_mismatch"


UNREADABLE = "unreadable"
"""A `Finding`'s problem for a row this version cannot decode (the others: `mismatch`,
`absent`, a text's state)."""
MAX_LISTED = 100
"""Rows of each kind (unreadable, text problems) a walk names; it counts every one."""


class Finding(msgspec.Struct, frozen=True, kw_only=True):
    """A row that did not stop the walk but is reported: one this version cannot decode
    (`unreadable`, with the writer its body names), or, in format v2, a text that does not
    match its `content_hash` (`mismatch`) or is not stored (`absent`)."""

    position: int
    problem: str
    reason: str
    source_adapter: str | None = None
    producer_task_id: str = ""


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
    findings: tuple[Finding, ...] = ()
    """Rows that link but could not be decoded, or whose text does not match (the first
    `MAX_LISTED` of each)."""


class _Payload(msgspec.Struct, frozen=True, gc=False, tag_field="kind"):
    """Only what a payload's content hash covers: the text it writes."""

    text: ClassVar[str] = ""
    """A payload that writes no text has none."""


def _light(kind: type[Payload]) -> type[msgspec.Struct]:
    """A struct decoding only the text the payload type `kind` writes, under its tag."""
    tag = kind.__struct_config__.tag
    name = f"_{kind.__name__}Text"
    if kind.text_field is None:
        return msgspec.defstruct(name, [], bases=(_Payload,), tag=tag, frozen=True, gc=False)
    return msgspec.defstruct(
        name,
        [("text", str)],
        bases=(_Payload,),
        tag=tag,
        rename={"text": kind.text_field},
        frozen=True,
        gc=False,
    )


_Fields = msgspec.defstruct(
    "_Fields",
    [
        ("position", int),
        ("event_id", str),
        ("content_hash", str),
        ("payload", functools.reduce(operator.or_, map(_light, get_args(EventPayload)))),
    ],
    frozen=True,
    gc=False,
)
"""The fields a walk checks, decoded without building the whole event, for every kind in
`EventPayload`. A row this cannot decode (an unknown kind, a field of the wrong type) goes to
`feed`, which decodes it fully and names the problem."""

_FIELDS: msgspec.json.Decoder[Any] = msgspec.json.Decoder(_Fields)

AUTHORITY_KINDS = frozenset(
    {"operator_added", "operator_removed", "log_migrated", "content_erased"}
)
"""The kinds that decide whether an erasure took effect: the operator keys a log registers
and removes, and the erasures themselves. A walk notes their positions (`authority_rows`), so
an absent text can be held to the erasures in force without reading the log again."""
_AUTHORITY_TYPES = frozenset(
    t
    for t in get_args(_Fields.__annotations__["payload"])
    if t.__struct_config__.tag in AUTHORITY_KINDS
)


class ChainWalker:
    """Checks stored rows in position order, from the genesis or from a verified position.

    `feed` checks one row and decodes it fully; `walk` is its fast path for many rows, and
    hands any row that does not pass to `feed`, so both report alike. A row that breaks the
    chain raises `ChainBreak`; a row that links but cannot be decoded, or whose text (kept
    beside the chain in v2) does not match, is counted and named in `findings`.
    """

    def __init__(self, log_format: LogFormat, genesis: bytes, *, position: int = 0) -> None:
        self.log_format = log_format
        self.position = position
        self.chain_value = genesis
        self.findings: list[Finding] = []
        self.unreadable = 0
        self.text_problems = 0
        self.first_mismatch: int | None = None
        """The first position whose stored text does not match its hash."""
        self.absent = array("q")
        """Every position whose text is not stored (an erasure's, or a row edited away): 8
        bytes each, bounded by the texts absent, not by the log's length."""
        self.authority_rows = array("q")
        """Every position holding an event of `AUTHORITY_KINDS` (8 bytes each)."""

    def feed(self, row: StoredRow) -> bytes:
        """Verify the next row and return its leaf hash; raise `ChainBreak` if it fails."""
        expected = self.position + 1
        if row.position != expected:
            raise ChainBreak(
                expected,
                Problem.ROW_MISSING,
                f"row missing: expected position {expected}, the next stored row is {row.position}",
            )
        scheme = self.log_format.chain
        leaf = row.leaf if row.leaf is not None else scheme.leaf_hash(row.body)
        linked = scheme.link(self.chain_value, leaf)
        record = read_row(row, self.log_format)
        if not isinstance(record.payload, Unreadable):
            self._check_record(row, record)
        if not hmac.compare_digest(linked, bytes(row.chain_hash)):
            raise ChainBreak(
                row.position,
                Problem.CHAIN_BROKEN,
                f"chain link broken at position {row.position}: the stored bytes or the "
                "chain value were changed",
            )
        if isinstance(record.payload, Unreadable):
            self.unreadable += 1
            self._note(record, UNREADABLE, record.payload.reason)
        elif record.text_state != "intact":
            self.text_problems += 1
            if record.text_state == "absent":
                self.absent.append(record.position)
            elif self.first_mismatch is None:
                self.first_mismatch = record.position
            self._note(record, record.text_state, _TEXT_PROBLEMS[record.text_state])
        if record.kind in AUTHORITY_KINDS:
            self.authority_rows.append(row.position)
        self.position = row.position
        self.chain_value = linked
        return leaf

    def _check_record(self, row: StoredRow, record: RecordedEvent) -> None:
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
        if self.log_format.text_beside:
            return
        try:
            text = record.payload.written_text().encode("utf-8")
        except UnicodeEncodeError:
            raise ChainBreak(
                row.position,
                Problem.UNDECODABLE,
                f"row at position {row.position} holds text that is not valid Unicode",
            ) from None
        if not self.log_format.text_matches(text, None, record.content_hash):
            raise ChainBreak(
                row.position,
                Problem.CONTENT_MISMATCH,
                f"content changed: the content at position {row.position} does not match "
                "its content_hash",
            )

    def _note(self, record: RecordedEvent, problem: str, reason: str) -> None:
        if len(self.findings) < 2 * MAX_LISTED:
            self.findings.append(
                Finding(
                    position=record.position,
                    problem=problem,
                    reason=reason,
                    source_adapter=record.source_adapter,
                    producer_task_id=record.producer_task_id,
                )
            )

    def walk(
        self, rows: Iterable[StoredRow], on_leaf: Callable[[bytes], object] | None = None
    ) -> None:
        """Verify `rows`, the next rows in order, handing each leaf hash to `on_leaf`.

        Raises `ChainBreak` at the first row that fails; `position` and `chain_value` then
        describe the last row that verified.
        """
        decode = _FIELDS.decode
        scheme, log_format = self.log_format.chain, self.log_format
        new = scheme.new
        beside = log_format.text_beside
        text_matches = log_format.text_matches
        leaf_prefix, link_prefix = LEAF_PREFIX, LINK_PREFIX
        same = hmac.compare_digest
        authority, noted = _AUTHORITY_TYPES, self.authority_rows.append
        position, chain_value = self.position, self.chain_value
        for row in rows:
            row_position, event_id, body, stored, text, salt, streamed = row
            if streamed is not None:
                intact = False
            else:
                leaf = new(leaf_prefix + body).digest()
                linked = new(link_prefix + chain_value + leaf).digest()
                try:
                    fields = decode(body)
                    if beside:
                        matches = text is not None and text_matches(text, salt, fields.content_hash)
                    else:
                        written = fields.payload.text.encode("utf-8")
                        matches = text_matches(written, None, fields.content_hash)
                    intact = (
                        matches
                        and row_position == position + 1
                        and fields.position == row_position
                        and fields.event_id == event_id
                        and same(linked, stored)
                    )
                except (msgspec.DecodeError, UnicodeEncodeError, TypeError):
                    intact = False
            if not intact:
                self.position, self.chain_value = position, chain_value
                leaf = self.feed(row)
                linked = self.chain_value
            elif type(fields.payload) in authority:
                noted(row_position)
            position, chain_value = row_position, linked
            if on_leaf is not None:
                on_leaf(leaf)
        self.position, self.chain_value = position, chain_value


_TEXT_PROBLEMS = {
    "mismatch": "the text stored beside the event does not match its content_hash",
    "absent": "no text is stored beside the event",
}


def verify_chain(log: EventLog) -> ChainReport:
    """Walk every row of `log` from its genesis, streaming, and report the first failure,
    and the rows it could not decode or whose text does not match."""
    walker = ChainWalker(log.log_format, log.log_format.chain.genesis(log.log_id))
    try:
        walker.walk(log.scan())
    except ChainBreak as brk:
        return ChainReport(
            ok=False,
            checked=walker.position,
            first_bad_position=brk.position,
            problem=brk.problem,
            reason=brk.reason,
            head_position=walker.position,
            head_chain_hash=walker.chain_value.hex(),
            findings=tuple(walker.findings),
        )
    text_problems = [f for f in walker.findings if f.problem != UNREADABLE]
    return ChainReport(
        ok=walker.text_problems == 0,
        checked=walker.position,
        first_bad_position=text_problems[0].position if text_problems else None,
        problem=Problem.CONTENT_MISMATCH if text_problems else None,
        reason=text_problems[0].reason if text_problems else None,
        head_position=walker.position,
        head_chain_hash=walker.chain_value.hex(),
        findings=tuple(walker.findings),
    )
