"""Lineage of one log position: what it was derived from and what was derived from it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Literal

import msgspec

from eventlog import InvalidInputError, LogSnapshot
from eventlog.checks import check_position
from projections.internal import (
    Queryable,
    inquiries,
)
from projections.internal import (
    lineage as graph,
)

if TYPE_CHECKING:
    from replay.ledger import Ledger

Direction = Literal["up", "down", "both"]
DIRECTIONS: tuple[Direction, ...] = ("up", "down", "both")

Step = Callable[[Queryable, Sequence[int]], list[graph.Link]]
"""`projections._lineage.parents` or `children`."""


class LineageNode(msgspec.Struct, frozen=True, kw_only=True):
    """An event in a lineage, and the edge that reached it from the level before."""

    position: int
    kind: str
    producer_task_id: str
    run_id: str | None
    source_adapter: str | None
    linked_to: int
    """The position one level nearer the start this one is linked to (the first, if several)."""
    via: int | None
    """The recall receipt that recorded the link, or None for a source the writer declared."""


class Lineage(msgspec.Struct, frozen=True, kw_only=True):
    """Ancestors and descendants of `position`, nearest level first."""

    position: int
    head_position: int
    ancestors: list[list[LineageNode]]
    descendants: list[list[LineageNode]]


def lineage(
    ledger: Ledger,
    position: int,
    *,
    direction: Direction = "both",
    depth: int | None = None,
) -> Lineage:
    """Walk the derivation graph from `position`, up (ancestors), down (descendants) or both,
    at most `depth` levels each way (all, when None). Only reads."""
    start = check_position("position", position, minimum=1)
    if direction not in DIRECTIONS:
        raise InvalidInputError(f"direction must be one of {', '.join(DIRECTIONS)}")
    bound = None if depth is None else check_position("depth", depth, minimum=1)
    with ledger.at_head() as (snap, model):
        head = snap.head().position
        if start > head:
            raise InvalidInputError(f"position {start} is past the log's head ({head})")
        up = levels(model, [start], graph.parents, bound) if direction != "down" else []
        down = levels(model, [start], graph.children, bound) if direction != "up" else []
        return Lineage(
            position=start,
            head_position=head,
            ancestors=[nodes(snap, level) for level in up],
            descendants=[nodes(snap, level) for level in down],
        )


def levels(
    model: Queryable, roots: Sequence[int], step: Step, depth: int | None
) -> list[list[tuple[int, int, int | None]]]:
    """Breadth-first from `roots` along `step`: for each level, (position, linked_to, via)
    of the positions first reached there, in position order."""
    seen = set(roots)
    frontier = sorted(seen)
    found: list[list[tuple[int, int, int | None]]] = []
    while frontier and (depth is None or len(found) < depth):
        level: dict[int, tuple[int, int | None]] = {}
        for link in step(model, frontier):
            if link.reached not in seen and link.reached not in level:
                level[link.reached] = (link.origin, link.via)
        if not level:
            break
        seen.update(level)
        found.append([(p, *level[p]) for p in sorted(level)])
        frontier = sorted(level)
    return found


def nodes(snap: LogSnapshot, level: Sequence[tuple[int, int, int | None]]) -> list[LineageNode]:
    """The events of one level, described from the log."""
    shown = []
    for position, linked_to, via in level:
        record = snap.event_at(position)
        shown.append(
            LineageNode(
                position=position,
                kind=record.kind,
                producer_task_id=record.producer_task_id,
                run_id=record.run_id,
                source_adapter=record.source_adapter,
                linked_to=linked_to,
                via=via,
            )
        )
    return shown


class Descendant(LineageNode, frozen=True, kw_only=True):
    """A write derived, directly or not, from a suspect, and the prompts it reached."""

    reached: list[int]
    """The recall receipts that included it."""


def descendant_levels(
    snap: LogSnapshot, model: Queryable, roots: Sequence[int], depth: int | None
) -> list[list[Descendant]]:
    """What was derived from `roots`, level by level (at most `depth` levels), each write
    with the receipts of the prompts it reached in turn."""
    found = levels(model, roots, graph.children, depth)
    included: dict[int, list[int]] = {}
    for row in inquiries.receipts_touching(model, [p for level in found for p, _, _ in level]):
        if row.included:
            included.setdefault(row.event_position, []).append(row.receipt_position)
    return [
        [
            Descendant(**msgspec.structs.asdict(node), reached=included.get(node.position, []))
            for node in nodes(snap, level)
        ]
        for level in found
    ]
