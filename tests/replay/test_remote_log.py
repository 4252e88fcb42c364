"""Audit, forensics and operator actions on a log in PostgreSQL, through one `Ledger` that
reads and writes this host's cache of it: the log is only read by investigations, a cache
that contradicts the log is refused and kept, and every operator action leaves the cache at
the log's head."""

from __future__ import annotations

import hashlib
import io
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from eventlog import open_log
from projections import CacheRefusedError, CrossTaskKB, SQLiteMemoryStore, open_view
from replay import Ledger, generate_key, quarantine, read_operator_key, verify, verify_inclusion
from tests.postgres import PgLog
from tests.projections.test_legacy import ROWS, legacy_file
from tests.replay.test_history import script


@pytest.fixture
def remote(pg: PgLog, tmp_path: Path) -> str:
    """A log in PostgreSQL written through one host's cache."""
    with SQLiteMemoryStore(tmp_path / "writer" / "cache.db", log=pg.dsn) as store:
        script(store)
    return pg.dsn


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    """This host's cache, not yet made."""
    return tmp_path / "auditor" / "cache.db"


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def exported(log: str) -> str:
    with Ledger.open(log) as ledger:
        out = io.StringIO()
        ledger.export(out)
    return out.getvalue()


def test_investigations_never_write_the_log(remote: str, cache: Path) -> None:
    """Every investigation through a read-only `Ledger` with a cache leaves the log as it
    was, row for row; the cache it reads is made on the first read, not on opening."""
    before = exported(remote)
    with Ledger.open(remote, cache=cache) as ledger:
        assert not cache.exists()
        ledger.history()
        ledger.blame()
        ledger.blast_radius(producer_task_id="task-b")
        ledger.lineage(2)
        ledger.operators()
        ledger.as_of(position=3).close()
        ledger.diff(0, 8)
        ledger.export(io.StringIO())
        ledger.verify()
        ledger.prove_inclusion(2, ledger.checkpoint())
        ledger.rebuild()
    with open_view(cache, log=remote) as view:
        view.list()
    assert before == exported(remote)


def test_a_view_reads_a_cache_caught_up_to_the_log(remote: str, cache: Path) -> None:
    """A read-only view over a cache catches it up before each read."""
    with open_view(cache, log=remote) as view:
        assert ["not a fact"] == [e.content for e in view.list(type="learning")]
        with SQLiteMemoryStore(cache.parent / "other.db", log=remote) as writer:
            writer.add("learning", "appended by another host")
        assert "appended by another host" == view.list(limit=1)[0].content


def test_a_ledger_kept_open_reads_what_other_hosts_append(remote: str, cache: Path) -> None:
    """One `Ledger` kept open catches its cache up before each read: a version another host
    publishes after the first history shows in the next."""
    with Ledger.open(remote, cache=cache) as ledger:
        assert 8 == ledger.history().at_position
        with SQLiteMemoryStore(cache.parent / "other.db", log=remote) as writer:
            CrossTaskKB(writer, producer_task_id="t").publish(
                "api", "base_url", "v4", scope="project"
            )
        found = ledger.history(tag="api", key="base_url")
        assert (9, ["v1", "v2", "v3", "v4"]) == (
            found.at_position,
            [v.value for v in found.versions],
        )
        assert 9 == ledger.checkpoint().size


def test_rebuild_compares_a_fresh_cache_with_the_live_one_and_repairs_it(
    remote: str, cache: Path
) -> None:
    """rebuild folds the log into a fresh cache beside the live one and compares them; a
    drifted cache is reported and, with swap (a ledger opened for writing), repaired in one
    cache transaction."""
    with Ledger.open(remote, cache=cache) as ledger:
        report = ledger.rebuild()
        assert report.matches and 8 == report.compared_at
    with closing(sqlite3.connect(cache)) as raw:
        raw.execute("DELETE FROM fl_fact WHERE position = 2")
        raw.commit()
    with Ledger.open(remote, cache=cache, read_only=False) as ledger:
        drifted = ledger.rebuild()
        assert not drifted.matches
        assert ["fl_fact"] == [t.table for t in drifted.tables if not t.matches]
        repaired = ledger.rebuild(swap=True)
        assert (True, 8) == (repaired.swapped, repaired.swapped_at)
        assert ledger.rebuild().matches
        assert ["v1", "v2", "v3"] == [
            v.value for v in ledger.history(tag="api", key="base_url").versions
        ]


def test_a_cache_of_another_log_is_refused_by_every_command(
    remote: str, cache: Path, tmp_path: Path
) -> None:
    """A cache claimed by another log is refused by history, blast_radius, rebuild and the
    operator actions, and kept as it was."""
    SQLiteMemoryStore(cache, log=tmp_path / "other" / "log.db").close()
    before = digest(cache)
    with Ledger.open(remote, cache=cache, read_only=False) as ledger:
        for command in (
            ledger.history,
            lambda: ledger.blast_radius(source_adapter="codex"),
            ledger.rebuild,
            lambda: ledger.quarantine(source_adapter="codex", reason="suspect"),
        ):
            with pytest.raises(CacheRefusedError, match="folds log"):
                command()
    assert before == digest(cache)
    with closing(open_log(remote, read_only=True)) as log:
        assert 8 == log.head().position


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
    """Every operator action through one `Ledger` (with `cache` when given), kept open
    between writes by another host; what each returned and what readers see after them."""
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
    with Ledger.open(log, cache=cache, read_only=False) as ledger:
        results.append(ledger.set_conflict_policy("schema", "hold", scope="project"))
        caught_up(log, cache)
        first, second = publish("codex", "v2"), publish("gemini-cli", "v3")
        results.append(ledger.approve(first))
        caught_up(log, cache)
        results += [current(), ledger.reject(second, reason="not reviewed")]
        caught_up(log, cache)
        results.append(current())
        held = ledger.quarantine(source_adapter="codex", reason="suspect")
        caught_up(log, cache)
        results += [held, current(), ledger.release(held, reason="cleared")]
        caught_up(log, cache)
        results.append(current())
        source = tmp_path / "legacy" / "memory.db"
        if not source.exists():
            legacy_file(source, ROWS)
        results.append(ledger.import_legacy(source))
        caught_up(log, cache)
        keys = []
        for name in ("first", "second"):
            if not (tmp_path / f"{name}.key").exists():
                generate_key(tmp_path / f"{name}.key")
            keys.append(read_operator_key(tmp_path / f"{name}.key"))
        for signer, added in ((keys[0], keys[0]), (keys[0], keys[1])):
            results.append(ledger.add_operator(added.public, key=signer))
            caught_up(log, cache)
        results.append(ledger.remove_operator(keys[0].key_id, key=keys[1], reason="rotated"))
        caught_up(log, cache)
        operators = ledger.operators().operators
        results.append([(o.key_id, o.added_position, o.removed_position) for o in operators])
        found = ledger.history(tag="schema")
        results.append([(h.position, h.status, h.decided_by) for h in found.held])
    store, _ = kb("reader")
    with store:
        results.append(sorted(e.content for e in store.list()))
    return results


def test_operator_actions_through_a_cache_leave_it_at_the_head(pg: PgLog, tmp_path: Path) -> None:
    """Policy, approve, reject, quarantine, release, import and operator changes through one
    `Ledger` of a log in PostgreSQL with this host's cache read and write through it: the
    cache is at the log's head after each, and every result is what the same actions give
    through a `Ledger` of a log file."""
    cache = tmp_path / "operator" / "cache.db"
    through_cache = operator_script(pg.dsn, cache, tmp_path)
    in_one_file = operator_script(tmp_path / "local" / "log.db", None, tmp_path)
    assert in_one_file == through_cache
    assert verify(pg.dsn).ok


def test_an_operator_action_without_a_cache_makes_none(pg: PgLog, tmp_path: Path) -> None:
    """Without a cache an operator action on a log in PostgreSQL (here through the one-call
    `quarantine`) folds in memory: no cache file is made."""
    with SQLiteMemoryStore(tmp_path / "writer.db", log=pg.dsn) as store:
        CrossTaskKB(store, producer_task_id="t", source_adapter="codex").publish(
            "schema", "users", "v1", scope="project"
        )
    assert 2 == quarantine(pg.dsn, source_adapter="codex", reason="suspect")
    assert ["writer.db"] == sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".db")


def test_a_proof_through_a_cache_keeps_the_merkle_index_there(remote: str, cache: Path) -> None:
    """A proof through a ledger with this host's cache keeps the log's Merkle index in the
    cache file; a fresh ledger proves from it, and one edited there still gives proofs that
    verify."""
    with SQLiteMemoryStore(cache.with_name("writer.db"), log=remote) as store:
        store.add_many([{"type": "learning", "content": f"entry {i}"} for i in range(40)])
    with Ledger.open(remote) as ledger:
        taken = ledger.checkpoint()
    with Ledger.open(remote, cache=cache) as ledger:
        proof = ledger.prove_inclusion(2, taken)
    assert verify_inclusion(proof, proof.leaf_hash, taken)
    with closing(sqlite3.connect(cache)) as conn:
        (size,) = conn.execute("SELECT size FROM fl_merkle_state").fetchone()
        conn.execute("UPDATE fl_merkle_nodes SET hash = randomblob(32)")
        conn.commit()
    assert (True, taken.size - taken.size % 16) == (size >= 32, size)
    with Ledger.open(remote, cache=cache) as ledger:
        for position in range(1, taken.size + 1):
            proof = ledger.prove_inclusion(position, taken)
            assert verify_inclusion(proof, proof.leaf_hash, taken)
