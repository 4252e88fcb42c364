"""The lineage graph of a report, level by level: the suspect, the tasks its writes reached,
their tainted writes, the prompts those reached, and on down to the depth followed. Each
column keeps its first `top` nodes and counts the rest."""

from __future__ import annotations

from collections.abc import Iterable

from replay.forensics import BlastRadius, Exposure
from replay.report.model import Graph, GraphEdge, GraphNode, Mark, More
from replay.report.suspect import Suspect

TaskKey = tuple[str | None, str | None, str | None]
"""(task id, run id, adapter) of a reader."""


def exposed_tasks(exposed: Iterable[Exposure]) -> dict[TaskKey, list[Exposure]]:
    """The readers whose prompts included suspect writes, in order of their first exposure."""
    tasks: dict[TaskKey, list[Exposure]] = {}
    for item in exposed:
        tasks.setdefault((item.task_id, item.run_id, item.adapter), []).append(item)
    return tasks


def task_label(key: TaskKey) -> str:
    """A reader named by task, run and adapter."""
    task, run, adapter = key
    return f"task {task or '-'} (adapter {adapter or '-'}, run {run or '-'})"


class _Columns:
    """Nodes by column, each column cut to `top`, and edges between kept nodes."""

    def __init__(self, top: int) -> None:
        self.top = top
        self.nodes: dict[str, GraphNode] = {}
        self.left_out: dict[int, int] = {}
        self.edges: dict[tuple[str, str], None] = {}

    def add(self, node: GraphNode) -> None:
        if node.id in self.nodes:
            return
        shown = sum(1 for n in self.nodes.values() if n.column == node.column)
        if shown < self.top:
            self.nodes[node.id] = node
        else:
            self.left_out[node.column] = self.left_out.get(node.column, 0) + 1

    def link(self, sources: tuple[str, ...], target: str) -> None:
        """An edge to `target` from the first of `sources` kept."""
        source = next((s for s in sources if s in self.nodes), None)
        if source is not None and target in self.nodes:
            self.edges[(source, target)] = None


def lineage_graph(
    radius: BlastRadius,
    suspect: Suspect,
    quarantined: set[int],
    erased: set[int],
    readers: dict[int, TaskKey],
    top: int,
) -> Graph:
    """The graph of `radius`: `readers` names the reader of each receipt it cites,
    `quarantined` the positions a quarantine in effect covers, `erased` those whose text an
    erasure removed."""
    columns = _Columns(top)
    names = ["suspect", "exposed tasks"]
    columns.add(
        GraphNode(
            id="suspect",
            column=0,
            label=suspect.describe(),
            detail=f"{len(radius.events)} writes"
            + (f", {radius.summary.erased} erased" if radius.summary.erased else ""),
            marks=(Mark.SUSPECT,),
        )
    )
    task_ids: dict[TaskKey, str] = {}
    for index, (key, items) in enumerate(exposed_tasks(radius.exposed).items()):
        task_ids[key] = f"task-{index}"
        prompts = len({item.receipt_position for item in items})
        columns.add(
            GraphNode(
                id=task_ids[key],
                column=1,
                label=f"task {key[0] or '-'}",
                detail=f"{key[2] or '-'}, run {key[1] or '-'}: {prompts} prompts from "
                f"{items[0].receipt_position}",
                marks=(Mark.EXPOSED,),
                position=items[0].receipt_position,
            )
        )
        columns.link(("suspect",), task_ids[key])
    for depth, level in enumerate(radius.descendants, start=1):
        names += [f"tainted writes, level {depth}", f"prompts they reached, level {depth}"]
        writes, prompts = 2 * depth, 2 * depth + 1
        for node in level:
            marks: tuple[Mark, ...] = (Mark.TAINTED,)
            if node.position in erased:
                marks += (Mark.ERASED,)
            elif node.position in quarantined:
                marks += (Mark.QUARANTINED,)
            columns.add(
                GraphNode(
                    id=f"w{node.position}",
                    column=writes,
                    label=f"{node.kind} at {node.position}",
                    detail=f"by {node.producer_task_id} ({node.source_adapter or '-'})",
                    marks=marks,
                    position=node.position,
                )
            )
            origins = _origins(node.linked_to, node.via, depth, readers, task_ids)
            columns.link(origins, f"w{node.position}")
            for receipt in node.reached:
                columns.add(
                    GraphNode(
                        id=f"p{receipt}",
                        column=prompts,
                        label=f"prompt at {receipt}",
                        detail=task_label(readers.get(receipt, (None, None, None))),
                        marks=(Mark.PROMPT,),
                        position=receipt,
                    )
                )
                columns.link((f"w{node.position}",), f"p{receipt}")
    listing = suspect.listing(10 * top)
    return Graph(
        columns=names,
        nodes=list(columns.nodes.values()),
        edges=[GraphEdge(source=s, target=t) for s, t in columns.edges],
        more=[
            More(count=count, what=names[column], command=listing)
            for column, count in sorted(columns.left_out.items())
        ],
    )


def _origins(
    linked_to: int,
    via: int | None,
    depth: int,
    readers: dict[int, TaskKey],
    task_ids: dict[TaskKey, str],
) -> tuple[str, ...]:
    """The nodes a tainted write may be drawn from, nearest first: at the first level the
    exposed task whose read recorded the link, else the suspect (a declared source); below,
    the prompt that carried the link, else the write it names."""
    if depth == 1:
        reader = None if via is None else readers.get(via)
        task = None if reader is None else task_ids.get(reader)
        return ("suspect",) if task is None else (task, "suspect")
    return (f"w{linked_to}",) if via is None else (f"p{via}", f"w{linked_to}")
