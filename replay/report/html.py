"""An incident report as one self-contained HTML file: inline CSS and SVG, no script, no
external asset, and a Content-Security-Policy that forbids every fetch, so it opens from
`file://` offline and nothing in it can call out. Every string from the log goes through
`replay.report.escaping`; marks and categories are words and shapes beside their colours."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import msgspec

from replay.report.escaping import html_block, html_text
from replay.report.model import IncidentReport, More
from replay.report.svg import graph_svg
from replay.report.wording import CATEGORIES, marks, summary_rows, when

POLICY = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; "
    "form-action 'none'"
)

STYLE = """
body{font:14px/1.45 system-ui,sans-serif;color:#111;background:#fff;margin:2em auto;
max-width:1200px;padding:0 1em}
h1{font-size:1.6em;margin-bottom:.2em}h2{border-bottom:2px solid #333;padding-bottom:.1em;
margin-top:1.6em}
table{border-collapse:collapse;margin:.5em 0;width:100%}
th,td{border:1px solid #999;padding:.2em .5em;text-align:left;vertical-align:top}
th{background:#eee}
.stats{display:grid;grid-template-columns:repeat(auto-fill,minmax(170px,1fr));gap:.5em}
.stat{border:1px solid #999;padding:.4em .6em}.stat b{display:block;font-size:1.5em}
.stat.alarm{border:3px solid #b00020}
.badge{font-weight:bold;white-space:nowrap}
.cat-write{color:#b00020}.cat-exposure{color:#b35900}.cat-derived{color:#6a1b9a}
.cat-operator{color:#0b5394}
.state-live{color:#b00020;font-weight:bold}.state-quarantined{color:#0b5394}
.state-erased{color:#444;text-decoration:line-through}
.more{font-style:italic}
code,pre{font:12px/1.4 ui-monospace,monospace;background:#f4f4f4}
pre{padding:.5em;overflow-x:auto;white-space:pre-wrap;word-break:break-all}
.graph-wrap{overflow-x:auto;border:1px solid #999}
svg.graph text{font:11px system-ui,sans-serif;fill:#111}
svg.graph text.label{font-weight:bold}svg.graph text.column{font-weight:bold;fill:#333}
svg.graph .box{fill:#fff;stroke:#555;stroke-width:1.5}
svg.graph .inner{fill:none;stroke:#0b5394;stroke-width:1.5}
svg.graph .mark-suspect .box{fill:#fdecea;stroke:#b00020;stroke-width:4}
svg.graph .mark-exposed .box{fill:#fff4e5;stroke:#b35900;stroke-dasharray:6 3}
svg.graph .mark-tainted .box{fill:url(#hatch);stroke:#6a1b9a}
svg.graph .mark-prompt .box{fill:#eef4fb;stroke:#0b5394}
svg.graph .mark-erased .box{fill:#eee;stroke:#444}
svg.graph .cross{stroke:#999;stroke-width:1}
svg.graph .edge{stroke:#555;stroke-width:1.2}
@media print{body{margin:0;max-width:none;font-size:10pt}
h2{break-after:avoid}tr,.stat,g.node{break-inside:avoid}
.graph-wrap{overflow:visible;border:0}svg.graph{max-width:100%;height:auto}
a{color:inherit;text-decoration:none}}
"""


def render_html(report: IncidentReport) -> str:
    """The report as one HTML document."""
    s = report.summary
    title = f"Incident report: {s.suspect}"
    body = [
        f"<h1>{html_text(title)}</h1>",
        f"<p>log {html_text(report.log_id)}, read at position {s.head_position}, "
        f"{html_text(when(report.generated_ts_ns))}. Lists show their first {report.top} "
        "rows.</p>",
        _summary(report),
        _timeline(report),
        _graph(report),
        _writes(report),
        _prompts(report),
        _actions(report),
        _evidence(report),
    ]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{POLICY}">'
        '<meta name="referrer" content="no-referrer">'
        '<meta name="viewport" content="width=device-width">'
        f"<title>{html_text(title)}</title><style>{STYLE}</style></head>\n<body>\n"
        + "\n".join(body)
        + "\n</body></html>\n"
    )


def _summary(report: IncidentReport) -> str:
    s = report.summary
    alarms = {"live", "prompts reached", "exposed tasks", "descendants"}
    stats = "".join(
        f'<div class="stat{" alarm" if label in alarms and value != "0" else ""}">'
        f"<b>{html_text(value)}</b>{html_text(label)}</div>"
        for label, value in summary_rows(report)[3:]
    )
    head = "".join(
        f"<tr><th>{html_text(label)}</th><td>{html_text(value)}</td></tr>"
        for label, value in summary_rows(report)[:3]
    )
    steps = "".join(f"<li>{html_text(step)}</li>" for step in s.next_steps)
    return (
        f'<section id="summary"><h2>Summary</h2><table>{head}</table>'
        f'<div class="stats">{stats}</div>'
        f"<h3>What to do next</h3><ol>{steps}</ol></section>"
    )


def _timeline(report: IncidentReport) -> str:
    rows = []
    for item in report.timeline:
        symbol, name = CATEGORIES[item.category]
        where = f'<a href="#node-{html_text(item.node)}">graph</a>' if item.node is not None else ""
        rows.append(
            f'<tr id="t{item.position}"><td>{item.position}</td>'
            f"<td>{html_text(when(item.ts_ns))}</td>"
            f'<td class="badge cat-{item.category}">{symbol} {html_text(name)}</td>'
            f"<td>{html_text(item.text)}</td><td>{where}</td></tr>"
        )
    return _section(
        "timeline",
        "Timeline",
        _table(("position", "time", "what", "detail", "node"), rows) + _more(report.timeline_more),
    )


def _graph(report: IncidentReport) -> str:
    legend = "".join(
        f"<li>{html_text(marks((mark,)))}</li>"
        for mark in sorted({m for n in report.graph.nodes for m in n.marks})
    )
    return _section(
        "graph",
        "Lineage graph",
        f'<div class="graph-wrap">{graph_svg(report.graph)}</div>'
        f"<ul>{legend}</ul>" + _more(report.graph.more),
    )


def _writes(report: IncidentReport) -> str:
    kinds = _table(("kind", "events"), [_row(c.name, c.count) for c in report.kinds])
    subjects = _table(("subject", "events"), [_row(c.name, c.count) for c in report.subjects])
    writes = _table(
        ("position", "time", "kind", "subject", "producer", "adapter", "run", "state"),
        [
            f'<tr id="w-{w.position}">'
            + "".join(
                f"<td>{html_text(v)}</td>"
                for v in (
                    w.position,
                    when(w.ts_ns),
                    w.kind,
                    w.subject,
                    w.producer_task_id,
                    w.source_adapter or "-",
                    w.run_id or "-",
                )
            )
            + f'<td class="state-{w.state.value}">{html_text(w.state.value)}</td></tr>'
            for w in report.writes
        ],
    )
    more = [] if report.writes_more is None else [report.writes_more]
    return _section(
        "writes",
        "What the suspect wrote",
        f"<h3>By kind</h3>{kinds}<h3>By subject (top {report.top})</h3>{subjects}"
        f"<h3>Writes</h3>{writes}" + _more(more),
    )


def _prompts(report: IncidentReport) -> str:
    rows = [
        _row(
            p.receipt_position,
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
    ]
    more = [] if report.prompts_more is None else [report.prompts_more]
    return _section(
        "prompts",
        "Prompts reached",
        _table(
            ("receipt", "time", "task", "adapter", "run", "tainting", "included", "kept out"),
            rows,
        )
        + _more(more),
    )


def _actions(report: IncidentReport) -> str:
    rows = [
        _row(
            a.position,
            when(a.ts_ns),
            a.kind,
            a.text,
            a.key_id or "unsigned",
            "yes" if a.in_effect else "no (released)",
        )
        for a in report.actions
    ]
    return _section(
        "actions",
        "Operator actions",
        _table(("position", "time", "kind", "what", "signing key id", "in effect"), rows),
    )


def _evidence(report: IncidentReport) -> str:
    e = report.evidence
    signed = "signed" if e.signed else "unsigned"
    steps = "".join(f"<li><code>{html_text(c)}</code></li>" for c in e.commands)
    proofs = "".join(
        f'<details id="proof-{p.position}"><summary>position {p.position}</summary>'
        f'<pre class="proof">{html_block(msgspec.json.encode(p).decode())}</pre></details>'
        for p in e.proofs
    )
    uncovered = (
        f"<p>Past the checkpoint (not proven): {html_text(_positions(e.uncovered))}</p>"
        if e.uncovered
        else ""
    )
    return _section(
        "evidence",
        "Evidence",
        f"<p>The {signed} checkpoint of size {e.checkpoint.size} and an inclusion proof for "
        f"each of the {len(e.proofs)} events this report cites.</p>"
        f'<pre class="checkpoint">{html_block(str(e.checkpoint))}</pre>'
        f"<h3>Check them offline</h3><ol>{steps}</ol>{uncovered}"
        f"<h3>Inclusion proofs</h3>{proofs}",
    )


def _section(anchor: str, title: str, content: str) -> str:
    return f'<section id="{anchor}"><h2>{html_text(title)}</h2>{content}</section>'


def _table(headers: Sequence[str], rows: Sequence[str]) -> str:
    if not rows:
        return "<p>None.</p>"
    head = "".join(f"<th>{html_text(h)}</th>" for h in headers)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _row(*values: object) -> str:
    return "<tr>" + "".join(f"<td>{html_text(v)}</td>" for v in values) + "</tr>"


def _more(items: Iterable[More]) -> str:
    lines = "".join(
        f'<li class="more">and {item.count} more {html_text(item.what)}: '
        f"<code>{html_text(item.command)}</code></li>"
        for item in items
    )
    return f"<ul>{lines}</ul>" if lines else ""


def _positions(values: Sequence[int]) -> str:
    return ", ".join(map(str, values)) or "-"
