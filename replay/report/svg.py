"""The lineage graph drawn as inline SVG: a column per level, a box per node, its marks as
words and shapes (a thick frame for the suspect, a dashed one for an exposed task, hatching
for a tainted write, rounded corners for a prompt, a double frame when quarantined, a cross
when erased), so the graph reads in grayscale and in print."""

from __future__ import annotations

from replay.report.escaping import html_text
from replay.report.model import Graph, GraphNode, Mark
from replay.report.wording import marks

COLUMN_WIDTH = 250
NODE_WIDTH = 220
NODE_HEIGHT = 54
ROW_HEIGHT = 66
TOP = 40
MAX_LABEL = 34

_DEFS = (
    "<defs>"
    '<pattern id="hatch" width="8" height="8" patternUnits="userSpaceOnUse" '
    'patternTransform="rotate(45)"><rect width="8" height="8" fill="#fdecea"/>'
    '<line x1="0" y1="0" x2="0" y2="8" stroke="#c9a0a0" stroke-width="3"/></pattern>'
    '<marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" '
    'markerHeight="7" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#555"/></marker>'
    "</defs>"
)


def graph_svg(graph: Graph) -> str:
    """The graph as an `<svg>` element; every string in it escaped."""
    rows: dict[int, int] = {}
    places: dict[str, tuple[int, int]] = {}
    for node in graph.nodes:
        row = rows.get(node.column, 0)
        rows[node.column] = row + 1
        places[node.id] = (20 + node.column * COLUMN_WIDTH, TOP + row * ROW_HEIGHT)
    width = 40 + max(len(graph.columns), 1) * COLUMN_WIDTH
    height = TOP + max(rows.values(), default=1) * ROW_HEIGHT + 10
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" role="img" class="graph" '
        f'width="{width}" height="{height}" viewBox="0 0 {width} {height}">',
        "<title>lineage graph</title>",
        _DEFS,
    ]
    parts += [
        f'<text class="column" x="{20 + i * COLUMN_WIDTH}" y="20">{html_text(name)}</text>'
        for i, name in enumerate(graph.columns)
    ]
    for edge in graph.edges:
        (x1, y1), (x2, y2) = places[edge.source], places[edge.target]
        parts.append(
            f'<line class="edge" x1="{x1 + NODE_WIDTH}" y1="{y1 + NODE_HEIGHT // 2}" '
            f'x2="{x2}" y2="{y2 + NODE_HEIGHT // 2}" marker-end="url(#arrow)"/>'
        )
    parts += [_node(node, *places[node.id]) for node in graph.nodes]
    parts.append("</svg>")
    return "".join(parts)


def _node(node: GraphNode, x: int, y: int) -> str:
    classes = " ".join(f"mark-{m.value}" for m in node.marks)
    rounded = ' rx="16"' if Mark.PROMPT in node.marks else ""
    frame = [
        f'<rect class="box" x="{x}" y="{y}" width="{NODE_WIDTH}" height="{NODE_HEIGHT}"{rounded}/>'
    ]
    if Mark.QUARANTINED in node.marks:
        frame.append(
            f'<rect class="inner" x="{x + 4}" y="{y + 4}" width="{NODE_WIDTH - 8}" '
            f'height="{NODE_HEIGHT - 8}"{rounded}/>'
        )
    if Mark.ERASED in node.marks:
        right, bottom = x + NODE_WIDTH, y + NODE_HEIGHT
        frame.append(
            f'<path class="cross" d="M{x},{y} L{right},{bottom} M{right},{y} L{x},{bottom}"/>'
        )
    return (
        f'<g class="node {classes}" id="node-{html_text(node.id)}">'
        f"<title>{html_text(node.label)}: {html_text(node.detail)}</title>"
        + "".join(frame)
        + f'<text x="{x + 8}" y="{y + 16}" class="label">{html_text(_short(node.label))}</text>'
        f'<text x="{x + 8}" y="{y + 32}">{html_text(_short(node.detail))}</text>'
        f'<text x="{x + 8}" y="{y + 47}" class="marks">{html_text(marks(node.marks))}</text>'
        "</g>"
    )


def _short(text: str) -> str:
    return text if len(text) <= MAX_LABEL else text[: MAX_LABEL - 1] + "\N{HORIZONTAL ELLIPSIS}"
