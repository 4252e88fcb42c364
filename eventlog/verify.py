"""Re-walk the log and re-hash every stored byte: the verification primitive.

Catches a row whose content no longer matches its hash, a missing row, rows in the wrong
place, an undecodable row and a broken chain link. A history rewritten with the chain
recomputed after it, and a cut-off tail, need a checkpoint taken earlier (see `replay`).
"""

from __future__ import annotations

import functools
import hmac
import operator
from collections.abc import Callable, Iterable
from enum import StrEnum
from typing import Any, ClassVar, get_args

import blake3
import msgspec

from eventlog import chain
from eventlog.backend import EventLog, StoredRow
from eventlog.codec import CONTENT_HASH_PREFIX, content_hash, decode_record
from eventlog.errors import ChainBreak, CorruptLogError
from eventlog.events import EventPayload, Payload


class Problem(StrEnum):
    """What verification found wrong: a row that fails the walk (the first five); held to a
    checkpoint taken earlier (`replay.verify`), the log as a whole (the next three); a file
    that holds the remains of a log, or none where a checkpoint says there was one
    (`log_missing`); or a read model the log does not bear out (`read_model_drift`)."""

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


class ChainWalker:
    """Checks stored rows in position order, from the genesis or from a verified position.

    `feed` checks one row and decodes it fully; `walk` is its fast path for many rows, and
    hands any row that does not pass to `feed`, so both report alike.
    """

    def __init__(self, genesis: bytes, *, position: int = 0) -> None:
        self.position = position
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
            text = record.payload.written_text().encode("utf-8")
        except CorruptLogError as exc:
            raise ChainBreak(row.position, Problem.UNDECODABLE, str(exc)) from None
        except UnicodeEncodeError:
            raise ChainBreak(
                row.position,
                Problem.UNDECODABLE,
                f"row at position {row.position} holds text that is not valid Unicode",
            ) from None
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
        if not _same_text_hash(content_hash(text), record.content_hash):
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

    def walk(
        self, rows: Iterable[StoredRow], on_leaf: Callable[[bytes], object] | None = None
    ) -> None:
        """Verify `rows`, the next rows in order, handing each leaf hash to `on_leaf`.

        Raises `ChainBreak` at the first row that fails; `position` and `chain_value` then
        describe the last row that verified.
        """
        decode = _FIELDS.decode
        hasher = blake3.blake3()  # one hasher, reset per hash: cheaper than a new one each
        reset, update, digest = hasher.reset, hasher.update, hasher.digest
        hexdigest = hasher.hexdigest
        same = hmac.compare_digest
        leaf_prefix, link_prefix = chain.LEAF_PREFIX, chain.LINK_PREFIX
        position, chain_value = self.position, self.chain_value
        for row in rows:
            row_position, event_id, body, stored = row
            reset()
            update(leaf_prefix + body)
            leaf = digest()
            reset()
            update(link_prefix + chain_value + leaf)
            linked = digest()
            try:
                fields = decode(body)
                reset()
                update(fields.payload.text.encode("utf-8"))
                intact = (
                    row_position == position + 1
                    and fields.position == row_position
                    and fields.event_id == event_id
                    and same(CONTENT_HASH_PREFIX + hexdigest(), fields.content_hash)
                    and same(linked, stored)
                )
            except (msgspec.DecodeError, UnicodeEncodeError, TypeError):
                intact = False
            if not intact:
                self.position, self.chain_value = position, chain_value
                leaf = self.feed(row)
                linked = self.chain_value
            position, chain_value = row_position, linked
            if on_leaf is not None:
                on_leaf(leaf)
        self.position, self.chain_value = position, chain_value


def _same_text_hash(computed: str, stored: str) -> bool:
    """Constant-time comparison of content hashes; a stored hash that is not ASCII differs."""
    return stored.isascii() and hmac.compare_digest(computed, stored)


def verify_chain(log: EventLog, genesis: bytes) -> ChainReport:
    """Walk every row of `log` from `genesis`, streaming, and report the first failure."""
    walker = ChainWalker(genesis)
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
        )
    return ChainReport(
        ok=True,
        checked=walker.position,
        head_position=walker.position,
        head_chain_hash=walker.chain_value.hex(),
    )
