"""Incident reports: what they say, that they cite proofs that verify, that large suspects
stay small, and that nothing from the log acts in them."""

from __future__ import annotations

import html
import re
from pathlib import Path

import msgspec
import pytest

from eventlog import InvalidInputError
from replay import Checkpoint, InclusionProof, Ledger, verify_inclusion
from replay.report import State, build_report
from tests.bench.incident import write_incident
from tests.report_cases import HOSTILE_KEYS, HOSTILE_REASON, HOSTILE_TAG, write_hostile_incident

PROOF = re.compile(r'<pre class="proof">(.*?)</pre>', re.S)
CHECKPOINT = re.compile(r'<pre class="checkpoint">(.*?)</pre>', re.S)


@pytest.fixture
def incident(tmp_path: Path) -> Path:
    """Ten suspect writes, two exposed tasks, two derived notes, one prompt they reached."""
    path = tmp_path / "memory.db"
    write_incident(path, 10)
    return path


@pytest.fixture
def hostile(tmp_path: Path) -> Path:
    path = tmp_path / "hostile.db"
    write_hostile_incident(path, tmp_path / "operator.key")
    return path


def test_the_summary_answers_first(incident: Path) -> None:
    """Events written, states, prompts reached and shielded, exposed tasks, descendants."""
    with Ledger.open(incident) as ledger:
        built = build_report(ledger, source_adapter="evil")
    s = built.summary
    assert (2, 11, 10) == (s.first_position, s.last_position, s.events_written)
    assert {"live": 10, "quarantined": 0, "erased": 0, "held": 0, "past": 0} == {
        c.name: c.count for c in s.states
    }
    assert (2, 1, 2, 2) == (s.prompts_reached, s.prompts_shielded, s.exposed_tasks, s.descendants)
    assert "factledger quarantine --adapter evil" in s.next_steps[0]
    assert [w.position for w in built.writes] == list(range(2, 12))
    assert [12, 14, 17] == [p.receipt_position for p in built.prompts]
    assert [(12, (10, 6, 2)), (17, (15, 13))] == [
        (p.receipt_position, p.tainting) for p in built.prompts if p.receipt_position != 14
    ]


def test_the_graph_marks_each_level(incident: Path) -> None:
    """Suspect, one node per exposed task, the tainted writes, the prompt they reached."""
    with Ledger.open(incident) as ledger:
        graph = build_report(ledger, source_adapter="evil").graph
    marks = {n.id: [m.value for m in n.marks] for n in graph.nodes}
    assert {
        "suspect": ["suspect"],
        "task-0": ["exposed"],
        "task-1": ["exposed"],
        "w13": ["tainted"],
        "w15": ["tainted"],
        "p17": ["prompt"],
    } == marks
    assert {("suspect", "task-0"), ("suspect", "task-1"), ("task-0", "w13"), ("task-1", "w15")} <= {
        (e.source, e.target) for e in graph.edges
    }
    assert ("w13", "p17") in {(e.source, e.target) for e in graph.edges}
    with Ledger.open(incident) as ledger:
        shallow = build_report(ledger, source_adapter="evil", depth=1).graph
    assert 4 == len(shallow.columns)


def test_a_quarantined_descendant_is_marked_and_its_release_listed(incident: Path) -> None:
    """A quarantine of a derived write marks its node; the quarantine and its release are
    operator actions, the released one no longer in effect."""
    with Ledger.open(incident, read_only=False) as ledger:
        held = ledger.quarantine(positions=[13], reason="derived from the poison")
        built = build_report(ledger, source_adapter="evil")
        ledger.release(held, reason="reviewed")
        released = build_report(ledger, source_adapter="evil")
    [node] = [n for n in built.graph.nodes if n.id == "w13"]
    assert ("tainted", "quarantined") == tuple(m.value for m in node.marks)
    assert [(held, True)] == [(a.position, a.in_effect) for a in built.actions]
    assert [(held, False), (held + 1, True)] == [
        (a.position, a.in_effect) for a in released.actions
    ]
    assert ["quarantine_applied", "quarantine_released"] == [a.kind for a in released.actions]


def test_every_embedded_proof_verifies_against_the_embedded_checkpoint(incident: Path) -> None:
    """Parsed back out of the HTML file, each proof verifies with `verify_inclusion` for the
    event the log stores at its position, and the report cites every position it shows."""
    with Ledger.open(incident) as ledger:
        page = ledger.report(source_adapter="evil")
        [text] = CHECKPOINT.findall(page)
        checkpoint = Checkpoint.parse(html.unescape(text))
        proofs = [
            msgspec.json.decode(html.unescape(p), type=InclusionProof) for p in PROOF.findall(page)
        ]
        rows = {row.position: row for row in ledger.event_log.scan()}
    assert [*range(2, 16), 17] == [p.position for p in proofs]
    assert all(verify_inclusion(p, rows[p.position], checkpoint) for p in proofs)
    assert not verify_inclusion(proofs[0], rows[proofs[1].position].body, checkpoint)


def test_the_markdown_says_the_same(incident: Path) -> None:
    """`format="md"` carries the summary, the graph as a list and the same proofs."""
    with Ledger.open(incident) as ledger:
        checkpoint = ledger.checkpoint()
        page = ledger.report(source_adapter="evil", checkpoint=checkpoint)
        ticket = ledger.report(source_adapter="evil", checkpoint=checkpoint, format="md")
    assert ticket.startswith("# Incident report: --adapter evil\n")
    assert "| events written | 10 |" in ticket
    assert "    - fact\\_published at 13: by backend-1 \\(codex\\) (◆ tainted)" in ticket
    in_ticket = ticket.split("```json\n")[1].split("```")[0].splitlines()
    assert [html.unescape(p) for p in PROOF.findall(page)] == in_ticket


def test_a_signed_checkpoint_taken_earlier_proves_what_it_covers(
    incident: Path, tmp_path: Path
) -> None:
    """Proofs go against the checkpoint given; later events are listed as not proven."""
    from replay import generate_key, read_operator_key

    generate_key(tmp_path / "op.key")
    key = read_operator_key(tmp_path / "op.key")
    with Ledger.open(incident) as ledger:
        earlier = ledger.checkpoint(key=key)
        write_more = earlier.size
        built = build_report(ledger, source_adapter="evil", checkpoint=earlier)
        signed_now = build_report(ledger, source_adapter="evil", key=key)
    assert built.evidence.signed and signed_now.evidence.signed
    assert write_more == built.evidence.checkpoint.size
    assert () == built.evidence.uncovered
    with Ledger.open(incident) as ledger:
        small = Checkpoint.parse(str(ledger.checkpoint()))
    assert not build_report(
        Ledger.open(incident), source_adapter="evil", checkpoint=small
    ).evidence.signed


def test_a_checkpoint_older_than_the_events_leaves_them_unproven(tmp_path: Path) -> None:
    """Positions past the checkpoint are named, not proven."""
    path = tmp_path / "memory.db"
    write_incident(path, 3)
    with Ledger.open(path) as ledger:
        old = ledger.checkpoint()
    write_incident_more = tmp_path / "memory.db"
    from projections import SQLiteMemoryStore

    with SQLiteMemoryStore(write_incident_more) as store:
        store.add("learning", "more poison", ["api"], source_adapter="evil")
    with Ledger.open(path) as ledger:
        built = build_report(ledger, source_adapter="evil", checkpoint=old)
    assert (old.size + 1,) == built.evidence.uncovered
    assert "unsigned" in built.evidence.commands[0]


def test_large_suspects_are_cut_to_top_with_the_command_for_the_rest(tmp_path: Path) -> None:
    """Each list keeps `top` rows and says how many more and how to list them; the file
    does not grow with the suspect."""
    sizes = {}
    for events in (30, 300):
        path = tmp_path / f"{events}.db"
        write_incident(path, events)
        with Ledger.open(path) as ledger:
            page = ledger.report(source_adapter="evil", top=5)
            built = build_report(ledger, source_adapter="evil", top=5)
        sizes[events] = len(page.encode())
        assert 5 == len(built.writes) == len([t for t in built.timeline if t.category == "write"])
        assert events - 5 == built.writes_more.count if built.writes_more else None
        command = f"factledger blast-radius --adapter evil --limit {events} --json"
        assert f"and {events - 5} more suspect writes: <code>{command}</code>" in page
        assert events == built.summary.events_written
    assert sizes[300] < sizes[30] * 1.25  # proofs grow with log2 of the log, nothing else


def test_nothing_from_the_log_is_markup_in_either_format(hostile: Path) -> None:
    """Tags, keys and reasons written to the log appear escaped, bidi controls as escapes;
    the page holds no script, no image, no link out."""
    with Ledger.open(hostile) as ledger:
        page = ledger.report(source_adapter="evil")
        ticket = ledger.report(source_adapter="evil", format="md")
        built = build_report(ledger, source_adapter="evil")
    for shown in (page, ticket):
        assert "<script" not in shown and "<img" not in shown and "<a href=j" not in shown
        assert "\u202e" not in shown
        assert "</style><style>" not in shown.split("</head>")[-1]
    assert html.escape(HOSTILE_KEYS[1]) in page and "\\u{202E}gnp.exe" in page
    assert "\\\\u\\{202E\\}gnp.exe" in ticket
    assert page.count("</style>") == 1
    assert re.findall(r'href="([^"]*)"', page) == [
        f"#node-{n}" for n in re.findall(r'href="#node-([^"]*)"', page)
    ]
    assert "Content-Security-Policy" in page and "default-src 'none'" in page
    [action] = built.actions
    assert HOSTILE_REASON in action.text and action.key_id is not None and action.in_effect
    assert {State.QUARANTINED: 3} == {
        State(c.name): c.count for c in built.summary.states if c.count
    }
    assert HOSTILE_TAG in built.writes[0].subject


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "needs a suspect"),
        ({"source_adapter": "evil", "top": 0}, "top"),
        ({"source_adapter": "evil", "top": 100_000}, "top must be at most"),
        ({"source_adapter": "evil", "format": "pdf"}, "format must be one of"),
        ({"source_adapter": "evil\u202e"}, "source_adapter"),
    ],
)
def test_bad_input_is_refused(incident: Path, options: dict[str, object], message: str) -> None:
    """A report without a suspect, a bad top, format or selector is refused by name."""
    with Ledger.open(incident) as ledger, pytest.raises(InvalidInputError, match=message):
        ledger.report(**options)  # type: ignore[arg-type]


def test_a_report_writes_nothing_to_the_log(incident: Path) -> None:
    """Reports are investigations: the log's head does not move."""
    with Ledger.open(incident) as ledger:
        before = ledger.event_log.head()
        ledger.report(source_adapter="evil")
        assert before == ledger.event_log.head()
