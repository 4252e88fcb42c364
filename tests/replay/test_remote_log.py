"""Audit and forensics against a log held elsewhere, read through a host's cache.

The log is a SQLite file standing in for a PostgreSQL one: the commands reach it through
`open_log` and the backend interface only, and never write it.
"""

from __future__ import annotations

import hashlib
import io
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from eventlog import open_log
from projections import CacheRefusedError, CrossTaskKB, SQLiteMemoryStore, open_view
from replay import (
    add_operator,
    approve,
    as_of,
    blame,
    blast_radius,
    diff,
    export_log,
    generate_key,
    history,
    import_legacy,
    list_operators,
    quarantine,
    read_operator_key,
    rebuild,
    reject,
    release,
    remove_operator,
    set_conflict_policy,
    verify,
)
from tests.postgres import PgLog
from tests.projections.test_legacy import ROWS, legacy_file
from tests.replay.test_history import script


@pytest.fixture
def remote(tmp_path: Path) -> Path:
    """A log written through one host's cache, its read model nowhere in the log's file."""
    log_path = tmp_path / "remote" / "log.db"
    with SQLiteMemoryStore(tmp_path / "writer" / "cache.db", log=log_path) as store:
        script(store)
    return log_path


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    """This host's cache, not yet made."""
    return tmp_path / "auditor" / "cache.db"


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_history_and_blame_read_the_cache_and_agree_with_a_fold(remote: Path, cache: Path) -> None:
    """Through a cache, history and blame report what folding the log in memory reports."""
    assert history(remote) == history(remote, cache=cache)
    assert blame(remote, scope="project") == blame(remote, scope="project", cache=cache)
    assert 8 == history(remote, cache=cache).at_position
    assert ["v1", "v2", "v3"] == [
        v.value for v in history(remote, tag="api", key="base_url", cache=cache).versions
    ]


def test_blast_radius_reads_the_cache_and_agrees_with_a_fold(remote: Path, cache: Path) -> None:
    """Forensics through a cache find what folding the log finds."""
    assert blast_radius(remote, source_adapter="codex") == blast_radius(
        remote, source_adapter="codex", cache=cache
    )


def test_time_travel_diff_export_and_verify_take_the_log_alone(remote: Path) -> None:
    """as_of, diff, export and verify need no read model: given the log, they work on it."""
    with as_of(remote, position=2) as view:
        assert ["v2"] == [f.value for f in CrossTaskKB(view).subscribe("api", scope="project")]
    assert ["base_url"] == [c.key for c in diff(remote, 1, 2).changed]
    out = io.StringIO()
    assert 8 == export_log(remote, out).events
    assert 9 == len(out.getvalue().splitlines())
    report = verify(remote)
    assert report.ok and 8 == report.head_position


def test_investigations_never_write_the_log(remote: Path, cache: Path) -> None:
    """Every read-only investigation leaves the log's file byte for byte as it was."""
    before = digest(remote)
    history(remote, cache=cache)
    blame(remote, cache=cache)
    blast_radius(remote, producer_task_id="task-b", cache=cache)
    as_of(remote, position=3).close()
    diff(remote, 0, 8)
    export_log(remote, io.StringIO())
    verify(remote)
    rebuild(remote, cache=cache)
    with open_view(cache, log=remote) as view:
        view.list()
    assert before == digest(remote)


def test_a_view_reads_a_cache_caught_up_to_the_log(remote: Path, cache: Path) -> None:
    """A read-only view over a cache catches it up before each read."""
    with open_view(cache, log=remote) as view:
        assert ["not a fact"] == [e.content for e in view.list(type="learning")]
        with SQLiteMemoryStore(cache.parent / "other.db", log=remote) as writer:
            writer.add("learning", "appended by another host")
        assert "appended by another host" == view.list(limit=1)[0].content


def test_rebuild_compares_a_fresh_cache_with_the_live_one_and_repairs_it(
    remote: Path, cache: Path
) -> None:
    """rebuild folds the log into a fresh cache beside the live one and compares them; a
    drifted cache is reported and, with swap, repaired in one cache transaction."""
    report = rebuild(remote, cache=cache)
    assert report.matches and 8 == report.compared_at
    raw = sqlite3.connect(cache)
    raw.execute("DELETE FROM fl_fact WHERE position = 2")
    raw.commit()
    raw.close()
    drifted = rebuild(remote, cache=cache)
    assert not drifted.matches
    assert ["fl_fact"] == [t.table for t in drifted.tables if not t.matches]
    repaired = rebuild(remote, cache=cache, swap=True)
    assert (True, 8) == (repaired.swapped, repaired.swapped_at)
    assert rebuild(remote, cache=cache).matches
    assert ["v1", "v2", "v3"] == [
        v.value for v in history(remote, tag="api", key="base_url", cache=cache).versions
    ]


def test_a_cache_the_log_contradicts_is_refused_by_every_command(
    remote: Path, cache: Path, tmp_path: Path
) -> None:
    """A cache of another log is refused by history, blast_radius and rebuild, and kept."""
    history(remote, cache=cache)
    other = tmp_path / "other" / "log.db"
    open_log(other).close()
    before = digest(cache)
    for command in (
        lambda: history(other, cache=cache),
        lambda: blast_radius(other, source_adapter="codex", cache=cache),
        lambda: rebuild(other, cache=cache),
    ):
        with pytest.raises(CacheRefusedError):
            command()
    assert before == digest(cache)


def caught_up(log: str | Path, cache: Path | None) -> None:
    """A host's cache, when there is one, holds every projector's checkpoint at the log's
    head right after an operator action: the next read on that host folds nothing."""
    if cache is None:
        return
    assert cache.exists(), "the action did not go through the host's cache"
    with closing(open_log(log, read_only=True)) as event_log:
        head = event_log.head().position
    with closing(sqlite3.connect(cache)) as raw:
        found = {p for (p,) in raw.execute("SELECT position FROM fl_projector_checkpoint")}
    assert {head} == found


def operator_script(log: str | Path, cache: Path | None, tmp_path: Path) -> list[object]:
    """Every operator action, through `cache` when given, between writes by another host;
    what each returned and what readers see after them."""
    writer = tmp_path / "writer" / "cache.db"

    def kb(adapter: str) -> tuple[SQLiteMemoryStore, CrossTaskKB]:
        store = SQLiteMemoryStore(log) if cache is None else SQLiteMemoryStore(writer, log=log)
        return store, CrossTaskKB(store, producer_task_id="t", source_adapter=adapter)

    def publish(adapter: str, value: str) -> int:
        store, facts = kb(adapter)
        with store:
            return facts.publish("schema", "users", value, scope="project").position

    def current() -> list[tuple[str, str | None]]:
        store, facts = kb("reader")
        with store:
            found = facts.subscribe("schema", scope="project")
            return [(f.value, f.source_adapter) for f in found]

    results: list[object] = [publish("claude-code", "v1")]
    results.append(set_conflict_policy(log, "schema", "hold", scope="project", cache=cache))
    caught_up(log, cache)
    first, second = publish("codex", "v2"), publish("gemini-cli", "v3")
    results.append(approve(log, first, cache=cache))
    caught_up(log, cache)
    results += [current(), reject(log, second, reason="not reviewed", cache=cache)]
    caught_up(log, cache)
    results.append(current())
    held = quarantine(log, source_adapter="codex", reason="suspect", cache=cache)
    caught_up(log, cache)
    results += [held, current(), release(log, held, reason="cleared", cache=cache)]
    caught_up(log, cache)
    results.append(current())
    source = tmp_path / "legacy" / "memory.db"
    if not source.exists():
        legacy_file(source, ROWS)
    results.append(import_legacy(log, source, cache=cache))
    caught_up(log, cache)
    keys = []
    for name in ("first", "second"):
        if not (tmp_path / f"{name}.key").exists():
            generate_key(tmp_path / f"{name}.key")
        keys.append(read_operator_key(tmp_path / f"{name}.key"))
    for signer, added in ((keys[0], keys[0]), (keys[0], keys[1])):
        results.append(add_operator(log, added.public, key=signer, cache=cache))
        caught_up(log, cache)
    results.append(remove_operator(log, keys[0].key_id, key=keys[1], reason="rotated", cache=cache))
    caught_up(log, cache)
    operators = list_operators(log).operators
    results.append([(o.key_id, o.added_position, o.removed_position) for o in operators])
    found = history(log, tag="schema")
    results.append([(h.position, h.status, h.decided_by) for h in found.held])
    store, _ = kb("reader")
    with store:
        results.append(sorted(e.content for e in store.list()))
    return results


def test_operator_actions_through_a_cache_leave_it_at_the_head(pg: PgLog, tmp_path: Path) -> None:
    """Policy, approve, reject, quarantine, release, import and operator changes on a log in
    PostgreSQL, given this host's cache, read and write through it: the cache is at the
    log's head after each, and every result is what the same actions give on a log file
    with no cache."""
    cache = tmp_path / "operator" / "cache.db"
    through_cache = operator_script(pg.dsn, cache, tmp_path)
    in_one_file = operator_script(tmp_path / "local" / "log.db", None, tmp_path)
    assert in_one_file == through_cache
    assert verify(pg.dsn).ok


def test_an_operator_action_without_a_cache_makes_none(pg: PgLog, tmp_path: Path) -> None:
    """Without `cache` an operator action on a log in PostgreSQL folds in memory, as
    before: no cache file is made."""
    with SQLiteMemoryStore(tmp_path / "writer.db", log=pg.dsn) as store:
        CrossTaskKB(store, producer_task_id="t", source_adapter="codex").publish(
            "schema", "users", "v1", scope="project"
        )
    assert 2 == quarantine(pg.dsn, source_adapter="codex", reason="suspect")
    assert ["writer.db"] == sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".db")
