"""Erasure: remove the texts of chosen writes for good, keeping every proof.

An erasure is an operator-signed `content_erased` event naming positions and a reason, never
the text. Once folded with effect the texts and salts of those positions leave the content
store and the read model (the version shows as erased; subscribe falls back to the version
before it), while the chain, checkpoints and proofs stay valid: they commit to each text's
salted hash, and without the salt no one can confirm a guess of the text. In a SQLite file
the freed pages are overwritten and the write-ahead log truncated; a PostgreSQL log's server
removes the rows in the append that stores the erasure, and the dead tuples stay in the
table's pages until the operator runs `VACUUM FULL` on it (`Erasure.note` says so).

What was derived from the erased writes (their descendants by lineage) is quarantined in the
same step by default, erased with them with `descendants="erase"`, or left with `"none"`.
An erasure always needs an operator key registered in the log: an open log cannot erase.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Literal

import msgspec

from eventlog import (
    InvalidInputError,
    LogSnapshot,
    NewEvent,
    QuarantineApplied,
    SQLiteEventLog,
)
from eventlog.backend import ServerErasingLog
from eventlog.checks import check_optional_identifier, check_position, check_positions
from eventlog.events import ContentErased
from eventlog.logs import get_logger
from projections.internal import Queryable, inquiries, remove_snapshots
from projections.internal import lineage as graph
from replay.errors import NotAuthorizedError
from replay.keys import KeySource, operator_key
from replay.lineage import levels
from replay.operators import Actor, append_with_effect, check_reason, signed_event
from replay.quarantine import RESPONDER
from replay.snapshots import directory_of

if TYPE_CHECKING:
    from replay.ledger import Ledger

log = get_logger("factledger.replay")

Descendants = Literal["quarantine", "erase", "none"]
DESCENDANTS: tuple[Descendants, ...] = ("quarantine", "erase", "none")
CONTENT_KINDS = frozenset({"memory_added", "fact_published"})
DENSE = 8
"""Positions that fill at least one in this many of their span are read in one pass."""
"""The kinds whose events write a text an erasure can remove."""
VACUUM_NOTE = (
    "the server removed the texts; their dead rows stay in the table's pages until the "
    "table's owner (or a superuser) runs: VACUUM FULL {table} (PostgreSQL's own WAL, "
    "archives and backups keep them until they are recycled: see docs/operations.md)"
)


class Erasure(msgspec.Struct, frozen=True, kw_only=True):
    """What `erase` did."""

    position: int
    """The `content_erased` event."""
    key_id: str
    """The operator key that signed it."""
    reason: str
    erased: list[int]
    """The positions whose texts were erased (the chosen writes, and with `descendants=
    "erase"` what was derived from them)."""
    already_erased: list[int]
    """Chosen positions an earlier erasure had erased (named again in no event)."""
    descendants: list[int]
    """Writes derived from the chosen ones by lineage, to `depth` levels."""
    descendants_action: Descendants
    quarantine_position: int | None
    """The quarantine of the descendants (`descendants="quarantine"`), if any were found."""
    texts_removed: int
    """Texts removed from a log file's content store (0 on PostgreSQL: see `note`)."""
    note: str
    """What the operator does next, if anything."""


def erase(
    ledger: Ledger,
    positions: Iterable[int] | None = None,
    *,
    source_adapter: str | None = None,
    producer_task_id: str | None = None,
    run_id: str | None = None,
    reason: str,
    key: KeySource,
    descendants: Descendants = "quarantine",
    depth: int | None = None,
    actor: Actor = RESPONDER,
) -> Erasure:
    """Erase the texts of the writes chosen by exactly one selector (positions, an adapter, a
    producer task or a run), and deal with what was derived from them (`descendants`, to
    `depth` levels; all when None). Signed with `key`, which must be an operator key of the
    log. Refuses, writing nothing, a selector that chooses no write, a position that holds no
    text, and an unknown key."""
    chosen = check_positions("positions", positions)
    adapter = check_optional_identifier("source_adapter", source_adapter)
    producer = check_optional_identifier("producer_task_id", producer_task_id)
    run = check_optional_identifier("run_id", run_id)
    given = sum(1 for s in (chosen or None, adapter, producer, run) if s is not None)
    if given != 1:
        raise InvalidInputError(
            "erase needs exactly one selector: positions, source_adapter, producer_task_id "
            "or run_id"
        )
    why = check_reason(reason)
    if descendants not in DESCENDANTS:
        raise InvalidInputError(f"descendants must be one of {', '.join(DESCENDANTS)}")
    levels_down = None if depth is None else check_position("depth", depth, minimum=1)
    if key is None:
        raise NotAuthorizedError("erasure needs an operator key (give --key FILE)")
    signer = operator_key(key)
    with ledger.at_head() as (snap, model):
        if not inquiries.has_operator(model):
            raise NotAuthorizedError(
                "erasure needs an operator key registered in this log, which has none: "
                "register one first (factledger operator add); nothing was written"
            )
        targets = (
            _content_at(snap, chosen)
            if chosen
            else _content_by(snap, adapter=adapter, producer=producer, run=run)
        )
        if not targets:
            raise InvalidInputError(
                "no write holding a text matches the selector; nothing was erased"
            )
        done = inquiries.erased_among(model, targets)
        derived = _derived(snap, model, targets, levels_down)
    pending = [p for p in targets if p not in done]
    if descendants == "erase":
        pending = sorted({*pending, *(p for p in derived if p not in done)})
    if not pending:
        raise InvalidInputError(
            f"every chosen position was erased already (at {sorted(set(done.values()))}); "
            "nothing was written"
        )
    events: list[tuple[str, ContentErased | QuarantineApplied]] = [
        ("erasure", ContentErased(positions=tuple(pending), reason=why))
    ]
    to_quarantine = [p for p in derived if p not in done] if descendants == "quarantine" else []
    if to_quarantine:
        events.append(
            (
                "quarantine",
                QuarantineApplied(
                    reason=f"derived from erased writes: {why}"[:2000],
                    match_positions=tuple(to_quarantine),
                ),
            )
        )
    if isinstance(ledger.event_log, ServerErasingLog):
        ledger.event_log.require_erasure()
    with ledger.write_transaction("erasure") as tx:
        signed: list[NewEvent] = [
            signed_event(tx, ledger.log_id, payload, actor=actor, key=signer, action=action)
            for action, payload in events
        ]
        records = append_with_effect(tx, signed)
        removed = tx.erase_texts(records[0].position, pending)
    note = _after(ledger)
    remove_snapshots(directory_of(ledger))
    log.info(
        "content_erased",
        position=records[0].position,
        erased=len(pending),
        descendants=len(derived),
        by=signer.key_id,
    )
    return Erasure(
        position=records[0].position,
        key_id=signer.key_id,
        reason=why,
        erased=pending,
        already_erased=sorted(p for p in targets if p in done),
        descendants=derived,
        descendants_action=descendants,
        quarantine_position=records[1].position if len(records) > 1 else None,
        texts_removed=removed,
        note=note,
    )


def _content_at(snap: LogSnapshot, positions: Sequence[int]) -> list[int]:
    """`positions`, each checked to hold a write with a text."""
    head = snap.head().position
    beyond = [p for p in positions if p > head]
    if beyond:
        raise InvalidInputError(f"position {beyond[0]} is past the log head {head}")
    for position, kind in sorted(_kinds(snap, positions).items()):
        if kind not in CONTENT_KINDS:
            raise InvalidInputError(
                f"position {position} holds a {kind} event, which writes no text to erase "
                "(erase memory entries and fact versions)"
            )
    return sorted(set(positions))


def _kinds(snap: LogSnapshot, positions: Sequence[int]) -> dict[int, str]:
    """The kind of the event at each of `positions`: read in one pass over their span when
    they are dense in it (a suspect's writes), else one lookup each."""
    wanted = set(positions)
    if not wanted:
        return {}
    low, high = min(wanted), max(wanted)
    if high - low + 1 > DENSE * len(wanted):
        return {p: snap.event_at(p).kind for p in sorted(wanted)}
    return {
        r.position: r.kind for r in snap.read(after=low - 1, until=high) if r.position in wanted
    }


def _content_by(
    snap: LogSnapshot, *, adapter: str | None, producer: str | None, run: str | None
) -> list[int]:
    """The writes with a text whose envelope names the adapter, producer task or run."""
    found = []
    for record in snap.read():
        if record.kind not in CONTENT_KINDS:
            continue
        if (
            (adapter is not None and record.source_adapter == adapter)
            or (producer is not None and record.producer_task_id == producer)
            or (run is not None and record.run_id == run)
        ):
            found.append(record.position)
    return found


def _derived(
    snap: LogSnapshot, model: Queryable, roots: Sequence[int], depth: int | None
) -> list[int]:
    """The writes with a text derived from `roots` by lineage, to `depth` levels."""
    found = levels(model, roots, graph.children, depth)
    reached = {p for level in found for p, _, _ in level} - set(roots)
    return sorted(p for p, kind in _kinds(snap, sorted(reached)).items() if kind in CONTENT_KINDS)


def _after(ledger: Ledger) -> str:
    """Take erased bytes out of a log file's write-ahead log; say what a server needs."""
    event_log = ledger.event_log
    if isinstance(event_log, SQLiteEventLog):
        if event_log.fold_wal():
            return ""
        return (
            "another process is reading the log, so its write-ahead log still holds pages "
            "from before the erasure; they are removed at the next checkpoint (when the "
            "last reader closes)"
        )
    if isinstance(event_log, ServerErasingLog):
        return VACUUM_NOTE.format(table=event_log.content_table)
    return ""
