"""What an incident report holds, before it is rendered: plain data, every list already cut to
the report's top-N with the count left out and the command that lists the rest.

Strings in it are as the log holds them; the renderers escape them (`replay.report.escaping`).
"""

from __future__ import annotations

from enum import StrEnum

import msgspec

from replay.checkpoints import Checkpoint
from replay.proofs import InclusionProof


class State(StrEnum):
    """What became of one suspect write, as readers meet it now; every count and mark
    follows this enum."""

    LIVE = "live"
    """Readers see it: a current fact version, or a visible memory entry."""
    QUARANTINED = "quarantined"
    """A quarantine in effect keeps it from every reader."""
    ERASED = "erased"
    """An operator's erasure removed its text for good (its event and proofs stay)."""
    HELD = "held"
    """A conflict policy kept it from becoming current."""
    PAST = "past"
    """Replaced, removed, or not content at all (an operator action, a removal)."""


class Mark(StrEnum):
    """What a node of the lineage graph is, shown as text and shape beside its colour."""

    SUSPECT = "suspect"
    EXPOSED = "exposed"
    """A task whose prompt included a suspect write."""
    TAINTED = "tainted"
    """A write derived, directly or not, from a suspect write."""
    PROMPT = "prompt"
    """A prompt (a read's receipt) that included a tainted write."""
    QUARANTINED = "quarantined"
    ERASED = "erased"
    """A write whose text an operator erased."""


class More(msgspec.Struct, frozen=True, kw_only=True):
    """Rows a list left out, and the command that lists them all."""

    count: int
    what: str
    command: str


class Count(msgspec.Struct, frozen=True, kw_only=True):
    """How many of something (an event kind, a subject, a state)."""

    name: str
    count: int


class Summary(msgspec.Struct, frozen=True, kw_only=True):
    """The answers first: who, when, how much, how far, and what to do next."""

    suspect: str
    """The selectors, as the command line takes them (`--adapter evil --task t1`)."""
    head_position: int
    first_position: int | None
    last_position: int | None
    first_ts_ns: int | None
    last_ts_ns: int | None
    events_written: int
    states: list[Count]
    """Suspect writes by `State`, every state listed (zero included)."""
    prompts_reached: int
    """Prompts (reads' receipts) that included a suspect write."""
    prompts_shielded: int
    """Prompts that kept every suspect write they met out."""
    exposed_tasks: int
    descendants: int
    """Writes derived from suspect writes, at every level followed."""
    suspect_reads: int
    """Reads the suspect made itself (its own receipts)."""
    next_steps: list[str]


class SuspectWrite(msgspec.Struct, frozen=True, kw_only=True):
    """One suspect write on the timeline."""

    position: int
    ts_ns: int
    kind: str
    subject: str
    producer_task_id: str
    source_adapter: str | None
    run_id: str | None
    state: State
    signed_by: str | None


class TimelineItem(msgspec.Struct, frozen=True, kw_only=True):
    """One moment of the incident, by position: a suspect write, a read that exposed a task,
    a write derived from one, or an operator action."""

    position: int
    ts_ns: int
    category: str
    """`write`, `exposure`, `derived` or `operator`."""
    text: str
    node: str | None
    """The id of the graph node it belongs to, if shown."""


class GraphNode(msgspec.Struct, frozen=True, kw_only=True):
    """A node of the lineage graph: the suspect, an exposed task, a tainted write, a prompt,
    or the count of those a column left out."""

    id: str
    column: int
    label: str
    detail: str
    marks: tuple[Mark, ...]
    position: int | None = None


class GraphEdge(msgspec.Struct, frozen=True, kw_only=True):
    """A step of the lineage: from the node nearer the suspect to the one it reached."""

    source: str
    target: str


class Graph(msgspec.Struct, frozen=True, kw_only=True):
    """Columns, left to right: suspect, exposed tasks, then per level followed the tainted
    writes and the prompts they reached."""

    columns: list[str]
    nodes: list[GraphNode]
    edges: list[GraphEdge]
    more: list[More]


class PromptReached(msgspec.Struct, frozen=True, kw_only=True):
    """A prompt that included a suspect or tainted write: its reader and what went in."""

    receipt_position: int
    ts_ns: int
    task_id: str | None
    run_id: str | None
    adapter: str | None
    included: tuple[int, ...]
    """Every position the prompt showed."""
    tainting: tuple[int, ...]
    """Those among them the suspect wrote or that derive from it."""
    kept_out: list[tuple[int, str]]
    """(position, reason) for what it kept out, the first ones."""
    kept_out_total: int


class ActionTaken(msgspec.Struct, frozen=True, kw_only=True):
    """An operator action on the suspect's writes: a quarantine, its release, a decision,
    an erasure."""

    position: int
    ts_ns: int
    kind: str
    text: str
    key_id: str | None
    """The operator key whose signature it carries (None: unsigned, in a log without one)."""
    in_effect: bool


class Evidence(msgspec.Struct, frozen=True, kw_only=True):
    """The checkpoint the report cites, an inclusion proof for each event it cites, and how
    to check them offline."""

    checkpoint: Checkpoint
    signed: bool
    proofs: list[InclusionProof]
    uncovered: tuple[int, ...]
    """Cited positions past the checkpoint (take a newer one to prove them)."""
    commands: list[str]


class IncidentReport(msgspec.Struct, frozen=True, kw_only=True):
    """An incident report: summary, timeline, graph, prompts, actions, evidence."""

    log_id: str
    generated_ts_ns: int
    top: int
    summary: Summary
    kinds: list[Count]
    subjects: list[Count]
    writes: list[SuspectWrite]
    writes_more: More | None
    timeline: list[TimelineItem]
    timeline_more: list[More]
    graph: Graph
    prompts: list[PromptReached]
    prompts_more: More | None
    actions: list[ActionTaken]
    evidence: Evidence
