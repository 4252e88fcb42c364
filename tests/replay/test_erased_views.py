"""What every view shows of an erased version: the erasure (position, key, reason), never a
text; readers and prompts never see it; receipts and lineage stay."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest

from eventlog import CorruptLogError, RecallRecorded, open_log
from projections import CrossTaskKB, SQLiteMemoryStore, load_persistent_memory
from replay import Ledger, generate_key, read_operator_key
from replay.cli import main
from replay.report import Mark, State, build_report

SECRET = "SECRETXYZZY-42"
REASON = "leaked token"


class Erased(msgspec.Struct, frozen=True, kw_only=True):
    """The log the tests read, and what made it."""

    db: Path
    key_id: str
    erasure: int


def write_log(db: Path, key_path: Path) -> Erased:
    """[1] t1 publishes api/token = first value; [2] t1 publishes api/token = SECRET;
    [3] a memory entry holding SECRET; [4] reader-1's prompt includes 2 and 3; [5] an
    operator key; [6] the erasure of 2 and 3."""
    generate_key(key_path)
    key = read_operator_key(key_path)
    with SQLiteMemoryStore(db) as store:
        kb = CrossTaskKB(store, producer_task_id="t1")
        kb.publish("api", "token", "first value", scope="project")
        kb.publish("api", "token", SECRET, scope="project")
        store.add("learning", f"{SECRET} also in memory", ["api"], task_id="t1")
        assert SECRET in load_persistent_memory(store, ["api"], task_id="reader-1")
    with Ledger.open(db, read_only=False) as ledger:
        ledger.add_operator(key.public, key=key)
        done = ledger.erase([2, 3], reason=REASON, key=key)
    assert 6 == done.position
    return Erased(db=db, key_id=done.key_id, erasure=done.position)


@pytest.fixture
def erased(tmp_path: Path) -> Erased:
    return write_log(tmp_path / "memory.db", tmp_path / "operator.key")


@pytest.fixture
def cli(
    capsys: pytest.CaptureFixture[str], erased: Erased, monkeypatch: pytest.MonkeyPatch
) -> Callable[..., Any]:
    """Run a command on the log with --json; return its parsed output (it must succeed)."""
    for name in ("COLUMNS", "FORCE_COLOR", "NO_COLOR", "TTY_COMPATIBLE"):
        monkeypatch.delenv(name, raising=False)

    def run(*args: str) -> Any:
        code = main(["--json", *args, "--db", str(erased.db)])
        out = capsys.readouterr().out
        assert 0 == code
        assert SECRET not in out
        return json.loads(out)

    return run


def the_erasure(erased: Erased) -> dict[str, Any]:
    return {"erasure_position": erased.erasure, "key_id": erased.key_id, "reason": REASON}


def shown(found: Any) -> dict[str, Any]:
    """An `ErasedBy` as JSON, its time left out."""
    fields = dict(found)
    del fields["ts_ns"]
    return fields


def test_history_shows_the_version_as_erased_with_who_and_why(erased: Erased) -> None:
    """The erased version: status erased, no value, the erasure's position, key and reason;
    the version before is current again."""
    with Ledger.open(erased.db) as ledger:
        found = ledger.history(tag="api", key="token")
    first, second = found.versions
    assert (1, "current", "first value", None) == (
        first.position, first.status, first.value, first.erased,
    )  # fmt: skip
    assert (2, "erased", None) == (second.position, second.status, second.value)
    assert second.erased is not None
    assert the_erasure(erased) == shown(msgspec.to_builtins(second.erased))
    assert second.content_hash.startswith("blake3-keyed:")


def test_history_blame_and_diff_on_the_command_line_mark_it_erased(
    erased: Erased, cli: Callable[..., Any]
) -> None:
    """history: status and trust erased, value null; blame: the version before; diff across
    the erased version: the new value null, marked erased."""
    versions = cli("history", "--tag", "api")["versions"]
    assert [("current", "trusted"), ("erased", "erased")] == [
        (v["status"], v["trust"]) for v in versions
    ]
    assert None is versions[1]["value"]
    assert the_erasure(erased) == shown(versions[1]["erased"])
    facts = cli("blame", "--tag", "api")["facts"]
    assert [(1, "first value")] == [(f["position"], f["value"]) for f in facts]
    (change,) = cli("diff", "1", "2")["changed"]
    assert ("first value", None, 2, "erased") == (
        change["old_value"], change["new_value"], change["new_position"], change["trust"],
    )  # fmt: skip
    assert None is change["old_erased"]
    assert the_erasure(erased) == shown(change["new_erased"])


def test_a_diff_of_a_value_erased_later_marks_it_erased(erased: Erased) -> None:
    """The window ends before the erasure; the value is still shown as erased, not as ''."""
    with Ledger.open(erased.db) as ledger:
        (change,) = ledger.diff(1, 3).changed
    assert (None, 2) == (change.new_value, change.new_position)
    assert change.new_erased is not None and erased.erasure == change.new_erased.erasure_position


def test_as_of_before_the_erasure_shows_the_rows_as_erased(
    erased: Erased, cli: Callable[..., Any]
) -> None:
    """At position 4 the erased versions were current; as-of shows them erased (from the
    read model now), with no text and the erasure that removed it."""
    rows = cli("as-of", "--position", "4")["rows"]
    assert [(3, None, "erased"), (2, None, "erased")] == [
        (row["id"], row["content"], row["trust"]) for row in rows
    ]
    assert the_erasure(erased) == shown(rows[0]["erased"])
    rows = cli("as-of", "--position", "1")["rows"]
    assert [(1, "first value", "trusted")] == [
        (row["id"], row["content"], row["trust"]) for row in rows
    ]
    assert "erased" not in rows[0]
    (fact,) = cli("as-of", "--position", "4", "--tag", "api", "--scope", "project")["rows"]
    assert (2, None, "erased") == (fact["position"], fact["value"], fact["trust"])


def test_as_of_gives_every_row_the_erasure_column_when_one_is_erased(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A kept entry beside an erased one: both rows carry `erased`, null for the kept one."""
    generate_key(tmp_path / "k")
    key = read_operator_key(tmp_path / "k")
    db = tmp_path / "mixed.db"
    with SQLiteMemoryStore(db) as store:
        store.add("learning", "kept", ["api"])
        store.add("learning", SECRET, ["api"])
    with Ledger.open(db, read_only=False) as ledger:
        ledger.add_operator(key.public, key=key)
        ledger.erase([2], reason=REASON, key=key)
    assert 0 == main(["--json", "as-of", "--position", "2", "--db", str(db)])
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert [(2, None, "erased"), (1, "kept", "trusted")] == [
        (row["id"], row["content"], row["trust"]) for row in rows
    ]
    assert (4, None) == (rows[0]["erased"]["erasure_position"], rows[1]["erased"])


def test_as_of_table_shows_the_erasure_not_an_empty_text(
    erased: Erased, capsys: pytest.CaptureFixture[str]
) -> None:
    """The table's text column reads `-` and an erased column names the erasure."""
    assert 0 == main(["as-of", "--position", "4", "--db", str(erased.db)])
    out = capsys.readouterr().out
    header, *rows = out.splitlines()
    assert header.split("\t")[-2:] == ["trust", "erased"]
    erased_row = next(r.split("\t") for r in rows if r.startswith("3\t"))
    assert "-" == erased_row[header.split("\t").index("content")]
    assert f'"reason":"{REASON}"' in erased_row[-1]


def test_blast_radius_marks_erased_events_and_counts_them(erased: Erased) -> None:
    with Ledger.open(erased.db) as ledger:
        radius = ledger.blast_radius(producer_task_id="t1")
    assert 2 == radius.summary.erased
    marks = {e.position: e.erased for e in radius.events}
    assert None is marks[1]
    for position in (2, 3):
        found = marks[position]
        assert found is not None
        assert the_erasure(erased) == shown(msgspec.to_builtins(found))
    assert [2, 3] == sorted(x.event_position for x in radius.exposed)


def test_readers_and_prompts_never_see_it_and_subscribe_falls_back(erased: Erased) -> None:
    """subscribe gives the version before; list, query and get_relevant leave the entry
    out; a prompt keeps both out with the reason `erased`; the earlier receipt stays."""
    with SQLiteMemoryStore(erased.db) as store:
        kb = CrossTaskKB(store, run_id="run-1")
        assert [(1, "first value")] == [
            (f.position, f.value) for f in kb.subscribe("api", scope="project")
        ]
        for entries in (store.list(), store.query(tags=["api"]), store.get_relevant(["api"])):
            assert 3 not in [e.id for e in entries]
            assert all(SECRET not in e.content and e.content for e in entries)
        text = load_persistent_memory(store, ["api"], task_id="reader-2")
    assert SECRET not in text and "first value" in text
    log = open_log(erased.db, read_only=True)
    try:
        receipts = [r.payload for r in log.read() if isinstance(r.payload, RecallRecorded)]
    finally:
        log.close()
    before, after = receipts[0], receipts[-1]
    assert {2, 3} <= set(before.included)
    assert {(2, "erased"), (3, "erased")} <= {(e.position, e.reason) for e in after.excluded}


@pytest.mark.anyio
async def test_an_agent_recall_over_mcp_keeps_it_out(erased: Erased) -> None:
    from mcp.client import Client

    from projections import AgentIdentity
    from replay.mcp import build_server

    agent = AgentIdentity(task_id="task-b", run_id="run-1", adapter="claude-code")
    async with Client(build_server(erased.db, agent), mode="legacy") as client:
        result = await client.call_tool("recall", {"tags": ["api"]})
        facts = await client.call_tool("subscribe", {"tag": "api", "scope": "project"})
        versions = await client.call_tool("history", {"tag": "api", "key": "token"})
    recalled = result.structured_content
    assert recalled is not None and SECRET not in json.dumps(recalled)
    assert {2, 3} <= {e["position"] for e in recalled["excluded"] if e["reason"] == "erased"}
    assert SECRET not in json.dumps(facts.structured_content)
    assert SECRET not in json.dumps(versions.structured_content)
    assert [1] == [v["position"] for v in versions.structured_content["facts"]]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def test_an_agents_history_keeps_the_erased_version_out(
    erased: Erased, cli: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FACTLEDGER_ADAPTER", "codex")
    versions = cli("history", "--tag", "api")["versions"]
    assert 2 not in [v["position"] for v in versions]


def test_a_read_model_naming_a_non_erasure_as_one_is_refused(erased: Erased) -> None:
    """An edited read model that claims position 4 (a receipt) erased a text is refused
    with the position, never shown as an erasure."""
    with sqlite3.connect(erased.db) as conn:
        conn.execute("UPDATE fl_erasure SET erasure_position = 4 WHERE position = 2")
    with Ledger.open(erased.db) as ledger, pytest.raises(CorruptLogError, match="position 4"):
        ledger.history(tag="api")


def test_the_report_counts_marks_and_lists_the_erasure(erased: Erased) -> None:
    """Summary count, the writes' state, the operator action with its key id, the timeline,
    and no text of the erased writes in either rendering."""
    with Ledger.open(erased.db) as ledger:
        report = build_report(ledger, positions=[1, 2, 3])
        html = ledger.report(positions=[1, 2, 3])
        markdown = ledger.report(positions=[1, 2, 3], format="md")
    counts = {c.name: c.count for c in report.summary.states}
    assert 2 == counts[State.ERASED.value]
    assert {2: State.ERASED, 3: State.ERASED, 1: State.LIVE} == {
        w.position: w.state for w in report.writes
    }
    (action,) = [a for a in report.actions if a.kind == "content_erased"]
    assert (erased.erasure, erased.key_id, True) == (action.position, action.key_id, True)
    assert REASON in action.text
    assert erased.erasure in [t.position for t in report.timeline if t.category == "operator"]
    for rendered in (html, markdown):
        assert SECRET not in rendered and erased.key_id in rendered
    assert Mark.ERASED.value not in [m for n in report.graph.nodes for m in n.marks]


def exported(erased: Erased, folder: Path) -> list[dict[str, Any]]:
    """An export of the log, its lines parsed (the header first); no byte of the secret."""
    path = folder / "log.jsonl"
    with Ledger.open(erased.db) as ledger, path.open("w", encoding="utf-8") as out:
        ledger.export(out)
    data = path.read_bytes()
    assert SECRET.encode() not in data
    return [json.loads(line) for line in data.decode().splitlines()]


def write_lines(path: Path, lines: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def test_an_export_gives_an_erased_text_as_erased_and_the_offline_verifier_takes_it(
    erased: Erased, tmp_path: Path
) -> None:
    """Erased lines carry `text_state` erased and no text or salt; the documented verifier
    accepts them given the operator's key, and refuses them given none, or another key."""
    from tests.test_docs import docs_export_functions

    lines = exported(erased, tmp_path)
    assert {2: "erased", 3: "erased"} == {
        n: line["text_state"] for n, line in enumerate(lines) if "text_state" in line
    }
    assert not {"text", "salt"} & (set(lines[2]) | set(lines[3]))
    verify_export = docs_export_functions()["verify_export"]
    pub = (tmp_path / "operator.key.pub").read_text(encoding="utf-8")
    path = write_lines(tmp_path / "again.jsonl", lines)
    assert 6 == len(verify_export(path, [pub]))
    with pytest.raises(AssertionError, match="erased by no erasure"):
        verify_export(path)
    generate_key(tmp_path / "other.key")
    other = (tmp_path / "other.key.pub").read_text(encoding="utf-8")
    with pytest.raises(AssertionError, match="erased by no erasure"):
        verify_export(path, [other])


def test_the_offline_verifier_refuses_an_erased_mark_no_erasure_names(
    erased: Erased, tmp_path: Path
) -> None:
    """Position 1's text dropped and marked erased fails; so does an erased mark beside a
    text, and a text that is missing with no mark at all."""
    from tests.test_docs import docs_export_functions

    verify_export = docs_export_functions()["verify_export"]
    pub = (tmp_path / "operator.key.pub").read_text(encoding="utf-8")
    lines = exported(erased, tmp_path)
    dropped = {k: v for k, v in lines[1].items() if k not in ("text", "salt")}
    forged = write_lines(
        tmp_path / "forged.jsonl", [lines[0], {**dropped, "text_state": "erased"}, *lines[2:]]
    )
    with pytest.raises(AssertionError, match=r"\[1\]"):
        verify_export(forged, [pub])
    beside = write_lines(
        tmp_path / "beside.jsonl", [lines[0], {**lines[1], "text_state": "erased"}, *lines[2:]]
    )
    with pytest.raises(AssertionError, match="position 1"):
        verify_export(beside, [pub])
    unmarked = {k: v for k, v in lines[2].items() if k != "text_state"}
    missing = write_lines(tmp_path / "missing.jsonl", [*lines[:2], unmarked, *lines[3:]])
    with pytest.raises(AssertionError, match="position 2: no salt"):
        verify_export(missing, [pub])


def test_an_unsigned_erasure_marks_nothing_erased_and_the_report_says_it_took_no_effect(
    tmp_path: Path,
) -> None:
    """An erasure appended around the API, unsigned, in a log with an operator key: the
    text stays, no view shows the version erased, the report lists it as not in effect."""
    from eventlog import NewEvent
    from eventlog.events import ContentErased

    erased = write_log(tmp_path / "memory.db", tmp_path / "operator.key")
    with SQLiteMemoryStore(erased.db) as store:
        kept = CrossTaskKB(store, producer_task_id="t2").publish(
            "api", "other", "still here", scope="project"
        )
        [forged] = store._append(
            [NewEvent(payload=ContentErased(positions=(kept.position,), reason="forged"))]
        )
    with Ledger.open(erased.db) as ledger:
        versions = ledger.history(tag="api", key="other").versions
        report = build_report(ledger, positions=[kept.position])
    assert [("current", "still here", None)] == [(v.status, v.value, v.erased) for v in versions]
    assert 0 == {c.name: c.count for c in report.summary.states}["erased"]
    (action,) = report.actions
    assert (forged.position, False, None) == (action.position, action.in_effect, action.key_id)


def test_a_hosts_cache_shows_the_same_erasure(erased: Erased, tmp_path: Path) -> None:
    """Read through a host's cache of the log, history, diff and blast radius show the
    erased version as they do from the file."""
    cache = tmp_path / "host.cache"
    with Ledger.open(erased.db, cache=cache) as ledger:
        _, version = ledger.history(tag="api", key="token").versions
        (change,) = ledger.diff(1, 2).changed
        radius = ledger.blast_radius(positions=[2, 3])
    assert version.erased is not None and change.new_erased is not None
    assert the_erasure(erased) == shown(msgspec.to_builtins(version.erased))
    assert (None, None) == (version.value, change.new_value)
    assert 2 == radius.summary.erased
    assert SECRET.encode() not in cache.read_bytes()
