"""A report's evidence: the checkpoint it cites, an inclusion proof for every event it cites,
and how to check both offline."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from eventlog import InvalidInputError, InvalidTypeError
from replay.checkpoints import Checkpoint
from replay.keys import KeySource
from replay.report.model import Evidence

if TYPE_CHECKING:
    from replay.ledger import Ledger

CHECKS = [
    "save the checkpoint below as checkpoint.txt, away from this host",
    "factledger verify --checkpoint checkpoint.txt --pub OPERATOR.pub   # its signature, and "
    "that the log still extends it",
    "factledger prove POSITION --checkpoint checkpoint.txt   # a proof for any event, again",
    "offline, with the library alone: replay.verify_inclusion(proof, leaf, "
    "Checkpoint.parse(text)), the proof decoded with msgspec.json.decode(..., "
    "type=replay.InclusionProof) and the leaf hash recomputed from the event in an export "
    "(factledger export; docs/spec/export.md)",
]
SIGN = (
    "this checkpoint is unsigned: take a signed one with `factledger checkpoint --key FILE "
    "--out checkpoint.txt` and run the report again with `--checkpoint checkpoint.txt`"
)


def gather_evidence(
    ledger: Ledger,
    cited: Iterable[int],
    *,
    checkpoint: Checkpoint | None,
    key: KeySource | None,
) -> Evidence:
    """Proofs of the `cited` positions against `checkpoint` (one taken earlier), else
    against a checkpoint of the head now, signed with `key` if given. Only reads the log."""
    if checkpoint is not None and key is not None:
        raise InvalidInputError("give a checkpoint taken earlier or a key to sign one, not both")
    if checkpoint is not None and not isinstance(checkpoint, Checkpoint):
        raise InvalidTypeError(f"checkpoint must be a Checkpoint, not {type(checkpoint).__name__}")
    held = checkpoint if checkpoint is not None else ledger.checkpoint(key=key)
    wanted = sorted(set(cited))
    signed = bool(held.signatures)
    return Evidence(
        checkpoint=held,
        signed=signed,
        proofs=[ledger.prove_inclusion(p, held) for p in wanted if p <= held.size],
        uncovered=tuple(p for p in wanted if p > held.size),
        commands=CHECKS if signed else [SIGN, *CHECKS],
    )
