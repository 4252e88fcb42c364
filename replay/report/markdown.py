"""An incident report as Markdown for a ticket: the same sections as the HTML file, the graph
as a nested list. Every string from the log goes through `replay.report.escaping`."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import msgspec

from replay.report.escaping import markdown_text
from replay.report.model import Graph, IncidentReport, More
from replay.report.wording import CATEGORIES, marks, summary_rows, when


def render_markdown(report: IncidentReport) -> str:
    """The report as one Markdown document."""
    s = report.summary
    e = report.evidence
    lines = [
        f"# Incident report: {markdown_text(s.suspect)}",
        "",
        f"Log {markdown_text(report.log_id)}, read at position {s.head_position}, "
        f"{when(report.generated_ts_ns)}. Lists show their first {report.top} rows.",
        "",
        "## Summary",
        "",
        *_table(("", ""), [(label, value) for label, value in summary_rows(report)]),
        "",
        "### What to do next",
        "",
        *(f"{n}. {markdown_text(step)}" for n, step in enumerate(s.next_steps, start=1)),
        "",
        "## Timeline",
        "",
        *_table(
            ("position", "time", "what", "detail"),
            [
                (
                    str(t.position),
                    when(t.ts_ns),
                    " ".join(CATEGORIES[t.category]),
                    t.text,
                )
                for t in report.timeline
            ],
        ),
        *_more(report.timeline_more),
        "",
        "## Lineage graph",
        "",
        *_graph(report.graph),
        *_more(report.graph.more),
        "",
        "## What the suspect wrote",
        "",
        *_table(("kind", "events"), [(c.name, str(c.count)) for c in report.kinds]),
        "",
        *_table(("subject", "events"), [(c.name, str(c.count)) for c in report.subjects]),
        "",
        *_table(
            ("position", "time", "kind", "subject", "producer", "adapter", "run", "state"),
            [
                (
                    str(w.position),
                    when(w.ts_ns),
                    w.kind,
                    w.subject,
                    w.producer_task_id,
                    w.source_adapter or "-",
                    w.run_id or "-",
                    w.state.value,
                )
                for w in report.writes
            ],
        ),
        *_more([] if report.writes_more is None else [report.writes_more]),
        "",
        "## Prompts reached",
        "",
        *_table(
            ("receipt", "time", "task", "adapter", "run", "tainting", "included", "kept out"),
            [
                (
                    str(p.receipt_position),
                    when(p.ts_ns),
                    p.task_id or "-",
                    p.adapter or "-",
                    p.run_id or "-",
                    _positions(p.tainting),
                    _positions(p.included),
                    f"{p.kept_out_total}: "
                    + ", ".join(f"{position} ({reason})" for position, reason in p.kept_out),
                )
                for p in report.prompts
            ],
        ),
        *_more([] if report.prompts_more is None else [report.prompts_more]),
        "",
        "## Operator actions",
        "",
        *_table(
            ("position", "time", "kind", "what", "signing key id", "in effect"),
            [
                (
                    str(a.position),
                    when(a.ts_ns),
                    a.kind,
                    a.text,
                    a.key_id or "unsigned",
                    "yes" if a.in_effect else "no (released)",
                )
                for a in report.actions
            ],
        ),
        "",
        "## Evidence",
        "",
        f"The {'signed' if e.signed else 'unsigned'} checkpoint of size {e.checkpoint.size} "
        f"and an inclusion proof for each of the {len(e.proofs)} events this report cites.",
        "",
        "```text",
        str(e.checkpoint).rstrip("\n"),
        "```",
        "",
        *(f"1. `{command}`" for command in e.commands),
        "",
        *(
            [f"Past the checkpoint (not proven): {_positions(e.uncovered)}", ""]
            if e.uncovered
            else []
        ),
        "Inclusion proofs, one JSON object a line:",
        "",
        "```json",
        *(msgspec.json.encode(p).decode() for p in e.proofs),
        "```",
    ]
    return "\n".join(lines) + "\n"


def _graph(graph: Graph) -> list[str]:
    """The graph as a nested list: each node under the first node with an edge to it."""
    parent: dict[str, str] = {}
    for edge in graph.edges:
        parent.setdefault(edge.target, edge.source)
    children: dict[str | None, list[str]] = {}
    for node in graph.nodes:
        children.setdefault(parent.get(node.id), []).append(node.id)
    by_id = {node.id: node for node in graph.nodes}
    lines: list[str] = []

    def walk(node_id: str, depth: int) -> None:
        node = by_id[node_id]
        lines.append(
            f"{'  ' * depth}- {markdown_text(node.label)}: {markdown_text(node.detail)} "
            f"({markdown_text(marks(node.marks))})"
        )
        for child in children.get(node_id, []):
            walk(child, depth + 1)

    for root in children.get(None, []):
        walk(root, 0)
    return lines or ["None."]


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    if not rows:
        return ["None."]
    return [
        "| " + " | ".join(markdown_text(h) for h in headers) + " |",
        "|" + "---|" * len(headers),
        *("| " + " | ".join(markdown_text(v) for v in row) + " |" for row in rows),
    ]


def _more(items: Iterable[More]) -> list[str]:
    return [
        f"\nand {item.count} more {markdown_text(item.what)}: `{item.command}`" for item in items
    ]


def _positions(values: Sequence[int]) -> str:
    return ", ".join(map(str, values)) or "-"
