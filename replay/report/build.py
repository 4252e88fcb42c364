"""Building an incident report's model from the log: the blast radius, the receipts it cites,
the quarantines and decisions on the suspect's writes, and the evidence. Only reads."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from eventlog import InvalidInputError, LogSnapshot, QuarantineApplied, RecallRecorded
from eventlog.checks import check_position
from eventlog.events import ContentErased
from eventlog.signing import authorization_of
from projections.internal import Queryable, inquiries, matching_positions
from replay.checkpoints import Checkpoint
from replay.forensics import BlastRadius, blast_radius, event_subject
from replay.keys import KeySource
from replay.report.evidence import gather_evidence
from replay.report.graph import TaskKey, exposed_tasks, lineage_graph, task_label
from replay.report.model import (
    ActionTaken,
    Count,
    GraphNode,
    IncidentReport,
    More,
    PromptReached,
    State,
    Summary,
    SuspectWrite,
    TimelineItem,
)
from replay.report.suspect import Suspect

if TYPE_CHECKING:
    from replay.ledger import Ledger

DEFAULT_TOP = 50
"""Rows each list of a report shows before it says how many more there are."""
MAX_TOP = 1000


def build_report(
    ledger: Ledger,
    *,
    source_adapter: str | None = None,
    producer_task_id: str | None = None,
    run_id: str | None = None,
    positions: Iterable[int] | None = None,
    depth: int | None = None,
    top: int = DEFAULT_TOP,
    checkpoint: Checkpoint | None = None,
    key: KeySource | None = None,
) -> IncidentReport:
    """The incident report on the suspect the selectors name (every one given must match):
    descendants followed `depth` levels (all, when None), each list cut to `top` rows, the
    cited events proven against `checkpoint`, else a checkpoint of the head now (signed with
    `key` if given)."""
    suspect = Suspect.of(
        source_adapter=source_adapter,
        producer_task_id=producer_task_id,
        run_id=run_id,
        positions=positions,
    )
    count = check_position("top", top, minimum=1)
    if count > MAX_TOP:
        raise InvalidInputError(f"top must be at most {MAX_TOP}, got {count}")
    radius = blast_radius(
        ledger,
        source_adapter=suspect.source_adapter,
        producer_task_id=suspect.producer_task_id,
        run_id=suspect.run_id,
        positions=suspect.positions or None,
        depth=depth,
    )
    written = [e.position for e in radius.events]
    derived = [d.position for level in radius.descendants for d in level]
    with ledger.at_head() as (snap, model):
        quarantined = inquiries.quarantined_among(model, written + derived)
        erased = set(inquiries.erased_among(model, written + derived))
        actions = _actions(snap, model, radius, set(written + derived))
        readers = _readers(snap, radius, count)
        prompts = _prompts(snap, radius, set(written + derived), count)
        exposing = sorted({x.receipt_position for x in radius.exposed})[:count]
        times = {p: snap.event_at(p).ts_ns for p in exposing + derived[:count]}
    states = _states(radius, quarantined, erased)
    graph = lineage_graph(radius, suspect, quarantined, erased, readers, count)
    writes = [_write(radius, index, states) for index in range(min(count, len(radius.events)))]
    timeline, timeline_more = _timeline(radius, writes, actions, graph.nodes, times, suspect, count)
    cited = [
        *(w.position for w in writes),
        *(t.position for t in timeline),
        *(p.receipt_position for p in prompts),
        *(n.position for n in graph.nodes if n.position is not None),
    ]
    listing = suspect.listing(max(len(radius.events), 1))
    subjects = Counter(e.subject for e in radius.events)
    every_prompt = _prompt_positions(radius)
    return IncidentReport(
        log_id=ledger.log_id,
        generated_ts_ns=time.time_ns(),
        top=count,
        summary=_summary(radius, suspect, states),
        kinds=_counts(Counter(e.kind for e in radius.events).most_common()),
        subjects=_counts(subjects.most_common(count)),
        writes=writes,
        writes_more=_more(len(radius.events) - len(writes), "suspect writes", listing),
        timeline=timeline,
        timeline_more=timeline_more,
        graph=graph,
        prompts=prompts,
        prompts_more=_more(len(every_prompt) - len(prompts), "prompts", listing),
        actions=actions[:count],
        evidence=gather_evidence(ledger, cited, checkpoint=checkpoint, key=key),
    )


def _states(radius: BlastRadius, quarantined: set[int], erased: set[int]) -> dict[int, State]:
    live = {f.position for f in radius.live_facts} | {e.id for e in radius.live_entries}
    held = {h.position for h in radius.held}
    found = {}
    for event in radius.events:
        p = event.position
        found[p] = (
            State.ERASED
            if p in erased
            else State.QUARANTINED
            if p in quarantined
            else State.LIVE
            if p in live
            else State.HELD
            if p in held
            else State.PAST
        )
    return found


def _write(radius: BlastRadius, index: int, states: dict[int, State]) -> SuspectWrite:
    event = radius.events[index]
    return SuspectWrite(
        position=event.position,
        ts_ns=event.ts_ns,
        kind=event.kind,
        subject=event.subject,
        producer_task_id=event.producer_task_id,
        source_adapter=event.source_adapter,
        run_id=event.run_id,
        state=states[event.position],
        signed_by=event.signed_by,
    )


def _summary(radius: BlastRadius, suspect: Suspect, states: dict[int, State]) -> Summary:
    by_state = Counter(states.values())
    events = radius.events
    exposed = {x.receipt_position for x in radius.exposed}
    shielded = {x.receipt_position for x in radius.shielded} - exposed
    derived = sum(len(level) for level in radius.descendants)
    tasks = len(exposed_tasks(radius.exposed))
    return Summary(
        suspect=suspect.describe(),
        head_position=radius.head_position,
        first_position=events[0].position if events else None,
        last_position=events[-1].position if events else None,
        first_ts_ns=min((e.ts_ns for e in events), default=None),
        last_ts_ns=max((e.ts_ns for e in events), default=None),
        events_written=len(events),
        states=[Count(name=state.value, count=by_state[state]) for state in State],
        prompts_reached=len(exposed),
        prompts_shielded=len(shielded),
        exposed_tasks=tasks,
        descendants=derived,
        suspect_reads=len(radius.receipts),
        next_steps=_next_steps(suspect, by_state[State.LIVE], tasks, derived),
    )


def _next_steps(suspect: Suspect, live: int, tasks: int, derived: int) -> list[str]:
    """What the operator should do next, most urgent first."""
    steps = []
    if live:
        steps.append(
            f"{live} suspect writes are still live: keep them from every reader with "
            f"`factledger quarantine {_quarantine_flags(suspect)} --reason TEXT --key FILE`"
        )
    if tasks:
        steps.append(
            f"review the work of the {tasks} exposed tasks (the graph): their prompts "
            "included suspect writes"
        )
    if derived:
        steps.append(
            f"{derived} writes derive from the suspect's; default prompts keep them out as "
            "tainted; quarantine by position those no reader should see "
            "(`factledger quarantine --position P --reason TEXT --key FILE`)"
        )
    steps.append(
        "keep this report with its checkpoint away from this host; check the proofs "
        "offline (Evidence)"
    )
    return steps


def _quarantine_flags(suspect: Suspect) -> str:
    """The suspect as `factledger quarantine` selects (it has no run selector)."""
    plain = Suspect(
        source_adapter=suspect.source_adapter,
        producer_task_id=suspect.producer_task_id,
        positions=suspect.positions,
    )
    return plain.flags() if plain != Suspect() else "--position P"


def _actions(
    snap: LogSnapshot, model: Queryable, radius: BlastRadius, cited: set[int]
) -> list[ActionTaken]:
    """Quarantines covering suspect or derived writes (`cited`), their releases, decisions
    on held suspect versions, and the erasures of their texts (in effect, or refused)."""
    head = radius.head_position
    found: dict[int, ActionTaken] = {}
    for row in inquiries.quarantines(model):
        record = snap.event_at(row.position) if row.position <= head else None
        if record is None or not isinstance(record.payload, QuarantineApplied):
            continue
        if cited.isdisjoint(matching_positions(model, row.position, record.payload)):
            continue
        text = f"{event_subject(record.payload)}: {row.reason}"
        found[row.position] = _action(snap, row.position, text, row.released_by is None)
        if row.released_by is not None and row.released_by <= head:
            found[row.released_by] = _action(snap, row.released_by, None, True)
    for held in radius.held:
        if held.decided_by is not None and held.decided_by <= head:
            found[held.decided_by] = _action(snap, held.decided_by, None, True)
    for erasure in set(inquiries.erased_among(model, sorted(cited)).values()):
        found[erasure] = _action(snap, erasure, None, True)
    for refused in inquiries.unauthorized(model):
        at = refused.position
        payload = snap.event_at(at).payload if at <= head else None
        if isinstance(payload, ContentErased) and not cited.isdisjoint(payload.positions):
            found[at] = _action(snap, at, None, False)
    return [found[p] for p in sorted(found)]


def _action(snap: LogSnapshot, position: int, text: str | None, in_effect: bool) -> ActionTaken:
    record = snap.event_at(position)
    signature = authorization_of(record.payload)
    reason = getattr(record.payload, "reason", None)
    described = text or event_subject(record.payload) or record.kind
    return ActionTaken(
        position=position,
        ts_ns=record.ts_ns,
        kind=record.kind,
        text=described if text or reason is None else f"{described}: {reason}",
        key_id=None if signature is None else signature.key_id,
        in_effect=in_effect,
    )


def _prompt_positions(radius: BlastRadius) -> list[int]:
    """Every receipt of a prompt that included a suspect or tainted write, in order."""
    reached = {x.receipt_position for x in radius.exposed}
    reached.update(r for level in radius.descendants for d in level for r in d.reached)
    return sorted(reached)


def _readers(snap: LogSnapshot, radius: BlastRadius, top: int) -> dict[int, TaskKey]:
    """The reader of each receipt the graph may show."""
    readers: dict[int, TaskKey] = {
        x.receipt_position: (x.task_id, x.run_id, x.adapter) for x in radius.exposed
    }
    for level in radius.descendants:
        shown = sorted({r for d in level[:top] for r in d.reached})[:top]
        for position in shown:
            payload = snap.event_at(position).payload
            if isinstance(payload, RecallRecorded):
                readers[position] = (payload.task_id, payload.run_id, payload.adapter)
    return readers


def _prompts(
    snap: LogSnapshot, radius: BlastRadius, tainting: set[int], top: int
) -> list[PromptReached]:
    """The first `top` prompts that included a suspect or tainted write, each as its
    receipt records it."""
    shown = []
    for position in _prompt_positions(radius)[:top]:
        record = snap.event_at(position)
        receipt = record.payload
        if not isinstance(receipt, RecallRecorded):
            continue
        shown.append(
            PromptReached(
                receipt_position=position,
                ts_ns=record.ts_ns,
                task_id=receipt.task_id,
                run_id=receipt.run_id,
                adapter=receipt.adapter,
                included=receipt.included,
                tainting=tuple(p for p in receipt.included if p in tainting),
                kept_out=[(e.position, e.reason) for e in receipt.excluded[:top]],
                kept_out_total=len(receipt.excluded),
            )
        )
    return shown


def _timeline(
    radius: BlastRadius,
    writes: Sequence[SuspectWrite],
    actions: Sequence[ActionTaken],
    nodes: Sequence[GraphNode],
    times: dict[int, int],
    suspect: Suspect,
    top: int,
) -> tuple[list[TimelineItem], list[More]]:
    """Suspect writes, exposing reads, derived writes and operator actions, by position."""
    shown_nodes = {n.id for n in nodes}
    tasks = {
        x.receipt_position: f"task-{index}"
        for index, items in enumerate(exposed_tasks(radius.exposed).values())
        for x in items
    }
    exposures: dict[int, list[int]] = {}
    for x in radius.exposed:
        exposures.setdefault(x.receipt_position, []).append(x.event_position)
    readers = {x.receipt_position: (x.task_id, x.run_id, x.adapter) for x in radius.exposed}
    derived = [d for level in radius.descendants for d in level]
    items = [
        TimelineItem(
            position=w.position,
            ts_ns=w.ts_ns,
            category="write",
            text=f"{w.kind}: {w.subject} ({w.state.value})",
            node="suspect",
        )
        for w in writes
    ]
    receipts = sorted(exposures)
    items += [
        TimelineItem(
            position=p,
            ts_ns=times[p],
            category="exposure",
            text=f"prompt for {task_label(readers[p])} included suspect positions "
            + ", ".join(map(str, exposures[p][:top])),
            node=tasks[p] if tasks[p] in shown_nodes else None,
        )
        for p in receipts[:top]
    ]
    items += [
        TimelineItem(
            position=d.position,
            ts_ns=times[d.position],
            category="derived",
            text=f"{d.kind} by {d.producer_task_id} ({d.source_adapter or '-'}) derived from "
            f"{d.linked_to}",
            node=f"w{d.position}" if f"w{d.position}" in shown_nodes else None,
        )
        for d in derived[:top]
    ]
    items += [
        TimelineItem(
            position=a.position,
            ts_ns=a.ts_ns,
            category="operator",
            text=f"{a.text} (signed by {a.key_id or 'no key'})",
            node=None,
        )
        for a in actions[:top]
    ]
    listing = suspect.listing(max(len(radius.events), len(receipts), len(derived), 1))
    cut = [
        (len(radius.events) - len(writes), "suspect writes"),
        (len(receipts) - top, "exposing reads"),
        (len(derived) - top, "derived writes"),
        (len(actions) - top, "operator actions"),
    ]
    more = [More(count=n, what=what, command=listing) for n, what in cut if n > 0]
    return sorted(items, key=lambda item: item.position), more


def _counts(pairs: Iterable[tuple[str, int]]) -> list[Count]:
    return [Count(name=name, count=count) for name, count in pairs]


def _more(count: int, what: str, command: str) -> More | None:
    return More(count=count, what=what, command=command) if count > 0 else None
