"""Inclusion and consistency proofs against checkpoints (RFC 6962/9162), and their checks.

A `Prover` proves from an open log and its Merkle index (`projections.internal.MerkleIndex`:
kept beside the read model, or in memory); it only reads the log, and refuses a checkpoint
the log no longer matches. It checks every proof against the checkpoint before returning it:
one made from a kept index that does not verify (an index edited by hand) makes it rebuild
the index from the log and prove again, and one that still does not is refused. A `Ledger`
keeps one.
Checking needs no log at all: only the proof, the checkpoint(s) and, for inclusion, the event
or its leaf hash. A check fails closed: a malformed or tampered proof gives False; only
arguments of the wrong type raise.
"""

from __future__ import annotations

import hmac
import re
import threading
from collections.abc import Callable
from typing import TypeVar

import msgspec

from eventlog import (
    CorruptLogError,
    Envelope,
    EventLog,
    InvalidInputError,
    InvalidTypeError,
    StoredRow,
)
from eventlog.chain import HASH_SIZE, ChainScheme
from eventlog.checks import check_position
from eventlog.codec import encode_body
from eventlog.merkle import (
    consistency_spans,
    inclusion_spans,
    root_from_inclusion,
    roots_from_consistency,
)
from projections.internal import IndexTables, MerkleIndex, MerkleIndexError, MerkleTip
from replay.audit import Progress
from replay.checkpoints import Checkpoint
from replay.keys import KeySource, operator_key

MAX_PATH = 64
"""No tree of 2**63 leaves or fewer needs a longer path."""

_HEX = re.compile(r"[0-9a-fA-F]{64}")


class InclusionProof(msgspec.Struct, frozen=True, kw_only=True):
    """That the event at `position` is leaf `position - 1` of the tree a checkpoint names."""

    log_id: str
    position: int
    size: int
    """The size of the checkpoint this proof is for."""
    leaf_hash: str
    """Hex leaf hash of the event proven (BLAKE3(0x00 || stored bytes))."""
    path: tuple[str, ...]
    """Hex sibling hashes, from the leaf up (RFC 6962 PATH)."""


class ConsistencyProof(msgspec.Struct, frozen=True, kw_only=True):
    """That the tree of `old_size` leaves is a prefix of the tree of `new_size` leaves."""

    log_id: str
    old_size: int
    new_size: int
    path: tuple[str, ...]
    """Hex subtree hashes (RFC 6962 PROOF)."""


P = TypeVar("P", InclusionProof, ConsistencyProof)


class Prover:
    """Proofs and checkpoints for one open log, from its Merkle index.

    Create it once per log and keep it, as tessera's proof builder. With `tables` (where the
    index is kept: beside the read model, `projections.internal.MerkleIndex`) a fresh
    prover reads the index kept there and walks only the rows appended since; without, its
    first use walks and verifies the rows it needs, and later uses only those appended
    since. A proof then reads a few hashes and a tile of rows, and is checked against its
    checkpoint before it is returned. A checkpoint is taken only from subtrees this prover
    hashed itself (the first walks the log). It never writes the log, so open the log
    read-only. If the history it walked is rewritten, it starts over. Safe to share between
    threads.
    """

    def __init__(self, event_log: EventLog, tables: IndexTables | None = None) -> None:
        self._index = MerkleIndex(event_log, tables)
        self._tip = MerkleTip(event_log)
        self._lock = threading.Lock()

    @property
    def log(self) -> EventLog:
        """The log this prover reads."""
        return self._index.log

    def checkpoint(
        self, *, key: KeySource | None = None, progress: Progress | None = None
    ) -> Checkpoint:
        """A checkpoint of the log at its head now, signed if `key` (an operator key or its
        file) is given; `progress(done, head)` as the rows it walks are verified. Where the
        index is written to its tables, or already holds subtrees this prover hashed for
        proofs, the walk extends it; otherwise, rather than hold every subtree in memory, a
        `MerkleTip` walks, so a prover that only takes checkpoints keeps constant memory."""
        signer = None if key is None else operator_key(key)
        if progress is not None and not callable(progress):
            raise InvalidTypeError("progress must be callable as progress(done, total)")
        reached = [-1]

        def report(done: int, total: int) -> None:
            reached[0] = done
            if progress is not None:
                progress(done, total)

        with self._lock:
            index = self._index
            head = index.refresh()
            if index.persists or (index.walked and index.size):
                if not index.walked:
                    index.reset()
                index.extend(head, progress=report)
                root, chain_value = index.tip(head)
            else:
                root, chain_value = self._tip.at(head, report)
        if reached[0] != head:
            report(head, head)
        taken = Checkpoint(
            log_id=self.log.log_id,
            size=head,
            root=root,
            chain_hash=chain_value.hex(),
            format=self.log.log_format.version,
        )
        return taken if signer is None else taken.sign(signer)

    def prove_inclusion(self, position: int, checkpoint: Checkpoint) -> InclusionProof:
        """Prove that the event at `position` is in the log as `checkpoint` describes it."""
        check_position("position", position, minimum=1)
        _check_checkpoint("checkpoint", checkpoint)
        if position > checkpoint.size:
            raise InvalidInputError(
                f"position {position} is past the checkpoint, which covers {checkpoint.size} events"
            )
        size = checkpoint.size
        spans = [(position - 1, position), *inclusion_spans(position - 1, size)]

        def prove() -> InclusionProof:
            self._prepare(checkpoint)
            leaf, *path = self._index.span_hashes(spans, size)
            return InclusionProof(
                log_id=checkpoint.log_id,
                position=position,
                size=size,
                leaf_hash=leaf.hex(),
                path=tuple(node.hex() for node in path),
            )

        with self._lock:
            return self._checked(
                prove,
                lambda proof: verify_inclusion(proof, proof.leaf_hash, checkpoint),
                [checkpoint],
            )

    def prove_consistency(self, old: Checkpoint, new: Checkpoint) -> ConsistencyProof:
        """Prove that the log as `new` describes it extends the log as `old` described it."""
        _check_checkpoint("old", old)
        _check_checkpoint("new", new)
        if old.log_id != new.log_id:
            raise InvalidInputError(f"the checkpoints name two logs: {old.log_id} and {new.log_id}")
        if old.size > new.size:
            raise InvalidInputError(
                f"the old checkpoint (size {old.size}) is larger than the new one (size {new.size})"
            )
        spans = consistency_spans(old.size, new.size) if 0 < old.size < new.size else []

        def prove() -> ConsistencyProof:
            self._prepare(new)
            _require_chain(self._index, old)
            path = self._index.span_hashes(spans, new.size)
            return ConsistencyProof(
                log_id=new.log_id,
                old_size=old.size,
                new_size=new.size,
                path=tuple(node.hex() for node in path),
            )

        with self._lock:
            return self._checked(
                prove, lambda proof: verify_consistency(proof, old, new), [old, new]
            )

    def _checked(
        self, prove: Callable[[], P], holds: Callable[[P], bool], checkpoints: list[Checkpoint]
    ) -> P:
        """`prove()`, returned only if it `holds` against its checkpoints. A proof made from
        an index read from its tables that fails (or a kept subtree that is damaged) makes
        the index start over from the log, and the proof is made once more."""
        index = self._index
        for _ in range(2):
            try:
                proof = prove()
            except (CorruptLogError, MerkleIndexError):
                if index.walked:
                    raise
                index.start_over("a subtree of the kept index does not match the log's rows")
                continue
            if holds(proof):
                return proof
            if index.walked:
                break
            index.start_over("a proof from the kept index does not verify against the checkpoint")
        roots = index.span_hashes([(0, c.size) for c in checkpoints], checkpoints[-1].size)
        for taken, found in zip(checkpoints, roots, strict=True):
            if not hmac.compare_digest(found, taken.root):
                raise InvalidInputError(
                    f"the Merkle root at size {taken.size} differs from the checkpoint's "
                    "although its chain hash matches: the checkpoint was not taken from this log"
                )
        raise CorruptLogError(
            "the proof made from the log does not verify against the checkpoint; run verify",
            position=checkpoints[-1].size,
        )

    def _prepare(self, checkpoint: Checkpoint) -> None:
        """Index the log up to the checkpoint, after refusing another log, a checkpoint past
        the head or one whose chain hash the log no longer has."""
        index = self._index
        if checkpoint.log_id != index.log.log_id:
            raise InvalidInputError(
                f"the checkpoint is for log {checkpoint.log_id}, not for log {index.log.log_id}"
            )
        head = index.refresh()
        if checkpoint.size > head:
            raise InvalidInputError(
                f"the log holds {head} events, fewer than the {checkpoint.size} the checkpoint "
                "covers; run verify with that checkpoint"
            )
        index.extend(checkpoint.size)
        _require_chain(index, checkpoint)


def verify_inclusion(
    proof: InclusionProof,
    event_leaf_hash_or_record: bytes | str | Envelope | StoredRow,
    checkpoint: Checkpoint,
) -> bool:
    """Whether `proof` shows the event (an Envelope or StoredRow, or its leaf hash as bytes
    or hex) at the proof's position in the tree `checkpoint` names."""
    if not isinstance(proof, InclusionProof):
        raise InvalidTypeError(f"proof must be an InclusionProof, not {type(proof).__name__}")
    _check_checkpoint("checkpoint", checkpoint)
    leaf = _leaf(event_leaf_hash_or_record, proof.position, checkpoint)
    claimed = _hex(proof.leaf_hash)
    path = _hashes(proof.path)
    if leaf is None or claimed is None or path is None or not _is_count(proof.position):
        return False
    if proof.log_id != checkpoint.log_id or proof.size != checkpoint.size:
        return False
    if not hmac.compare_digest(claimed, leaf):
        return False
    root = root_from_inclusion(proof.position - 1, checkpoint.size, leaf, path, checkpoint.scheme)
    return root is not None and hmac.compare_digest(root, checkpoint.root)


def verify_consistency(proof: ConsistencyProof, old: Checkpoint, new: Checkpoint) -> bool:
    """Whether `proof` shows that the tree `new` names extends the tree `old` names."""
    if not isinstance(proof, ConsistencyProof):
        raise InvalidTypeError(f"proof must be a ConsistencyProof, not {type(proof).__name__}")
    _check_checkpoint("old", old)
    _check_checkpoint("new", new)
    path = _hashes(proof.path)
    if path is None or not proof.log_id == old.log_id == new.log_id:
        return False
    if (proof.old_size, proof.new_size) != (old.size, new.size) or old.size > new.size:
        return False
    if old.size == new.size:
        return (
            not path
            and hmac.compare_digest(old.root, new.root)
            and hmac.compare_digest(old.chain_hash, new.chain_hash)
        )
    if old.format != new.format:
        return False
    scheme = new.scheme
    if old.size == 0:
        return (
            not path
            and hmac.compare_digest(old.root, scheme.empty_root())
            and hmac.compare_digest(old.chain_hash, scheme.genesis(old.log_id).hex())
        )
    roots = roots_from_consistency(old.size, new.size, old.root, path, scheme)
    return (
        roots is not None
        and hmac.compare_digest(roots[0], old.root)
        and hmac.compare_digest(roots[1], new.root)
    )


def _require_chain(index: MerkleIndex, checkpoint: Checkpoint) -> None:
    """Refuse to prove anything against a checkpoint whose chain hash the log no longer has.

    The chain hash covers every leaf up to the checkpoint's size, so a rewrite changes it;
    a checkpoint whose root is wrong for its chain hash is refused when the proof is checked.
    """
    size = checkpoint.size
    if not hmac.compare_digest(index.stored_chain(size) or "", checkpoint.chain_hash):
        raise InvalidInputError(
            f"the log no longer matches the checkpoint of size {size} (a rewritten history, "
            "or a checkpoint of another log); run verify with that checkpoint"
        )


def _leaf(value: object, position: object, checkpoint: Checkpoint) -> bytes | None:
    """The leaf hash `value` stands for in the tree `checkpoint` names, or None if it is
    malformed or for another position. An Envelope is encoded as its format stores it (in
    v2, without its text)."""
    scheme: ChainScheme = checkpoint.scheme
    if isinstance(value, bytes):
        return value if len(value) == HASH_SIZE else None
    if isinstance(value, str):
        return _hex(value)
    if isinstance(value, StoredRow):
        if value.position != position or not isinstance(value.body, bytes):
            return None
        return value.leaf or scheme.leaf_hash(value.body)
    if isinstance(value, Envelope):
        if value.position != position:
            return None
        fields = {name: getattr(value, name) for name in Envelope.__struct_fields__}
        try:
            return scheme.leaf_hash(encode_body(Envelope(**fields), checkpoint.log_format))
        except (msgspec.EncodeError, TypeError, ValueError):
            return None
    raise InvalidTypeError(
        "expected a leaf hash (bytes or hex str), a RecordedEvent or a StoredRow, not "
        f"{type(value).__name__}"
    )


def _hashes(path: object) -> list[bytes] | None:
    """The 32-byte hashes of a proof's hex path, or None if it is malformed."""
    if not isinstance(path, (tuple, list)) or len(path) > MAX_PATH:
        return None
    hashes = [_hex(item) for item in path]
    return None if None in hashes else [h for h in hashes if h is not None]


def _hex(text: object) -> bytes | None:
    """32 bytes from 64 hex digits, or None."""
    if not isinstance(text, str) or not _HEX.fullmatch(text):
        return None
    return bytes.fromhex(text)


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _check_checkpoint(name: str, value: object) -> None:
    if not isinstance(value, Checkpoint):
        raise InvalidTypeError(f"{name} must be a Checkpoint, not {type(value).__name__}")
