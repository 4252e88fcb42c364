"""`Ledger`: one open log, knowing what it holds. Opened once, it serves every call on the
connection it opened; it refuses what it cannot hold (a DSN as the
cache), writes when opened read-only, and any use after it is closed; and each one-call
function gives what its method gives."""

from __future__ import annotations

import io
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

import replay
from eventlog import InvalidTypeError, LogMissingError
from projections import CrossTaskKB, SQLiteMemoryStore
from replay import (
    CacheChoiceError,
    Ledger,
    LedgerClosedError,
    ReadOnlyLedgerError,
    generate_key,
    read_operator_key,
)
from tests.postgres import PgLog
from tests.replay.test_history import script

Use = Callable[[Ledger], object]


@pytest.fixture
def log(db_path: Path) -> Path:
    """The scripted history (eight events: facts, an entry, a quarantine and its release)."""
    with SQLiteMemoryStore(db_path) as store:
        script(store)
    return db_path


INVESTIGATIONS: dict[str, Use] = {
    "verify": lambda ledger: ledger.verify(),
    "verify_deep": lambda ledger: ledger.verify(deep=True),
    "checkpoint": lambda ledger: ledger.checkpoint(),
    "prove_inclusion": lambda ledger: ledger.prove_inclusion(3, ledger.checkpoint()),
    "prove_consistency": lambda ledger: ledger.prove_consistency(
        ledger.checkpoint(), ledger.checkpoint()
    ),
    "history": lambda ledger: ledger.history(tag="api"),
    "blame": lambda ledger: ledger.blame(),
    "diff": lambda ledger: ledger.diff(0, 8),
    "lineage": lambda ledger: ledger.lineage(2),
    "blast_radius": lambda ledger: ledger.blast_radius(source_adapter="codex"),
    "operators": lambda ledger: ledger.operators(),
    "export": lambda ledger: ledger.export(io.StringIO()),
    "as_of": lambda ledger: ledger.as_of(position=2).close(),
    "rebuild": lambda ledger: ledger.rebuild(),
}


def connections_to(path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every SQLite connection opened to the file at `path` from now on (by path or URI)."""
    real = sqlite3.connect
    made: list[str] = []
    target = str(path.resolve())

    def counting(database: Any, *args: Any, **kwargs: Any) -> sqlite3.Connection:
        if target in str(database):
            made.append(str(database))
        connection: sqlite3.Connection = real(database, *args, **kwargs)
        return connection

    monkeypatch.setattr(sqlite3, "connect", counting)
    return made


def test_a_ledger_opened_once_serves_every_call_on_one_connection(
    log: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every investigation, twice over, through one `Ledger` connects to the log's file once
    (when it opens); the one-call functions connect once per call."""
    made = connections_to(log, monkeypatch)
    with Ledger.open(log) as ledger:
        for _ in range(2):
            for investigate in INVESTIGATIONS.values():
                investigate(ledger)
    assert 1 == len(made)
    made.clear()
    replay.history(log, tag="api")
    replay.blame(log)
    replay.checkpoint(log)
    assert 3 == len(made)


def test_operator_actions_through_one_ledger_connect_once(
    log: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ledger opened for writing makes every operator action, and reads between them, on
    the one connection it opened."""
    made = connections_to(log, monkeypatch)
    with Ledger.open(log, read_only=False) as ledger:
        held = ledger.quarantine(source_adapter="codex", reason="suspect")
        ledger.release(held, reason="cleared")
        ledger.set_conflict_policy("api", "hold", owners=["claude-code"])
        ledger.history(tag="api")
        ledger.blast_radius(source_adapter="codex")
    assert 1 == len(made)


@pytest.fixture
def pg_log(pg: PgLog, tmp_path: Path) -> str:
    with SQLiteMemoryStore(tmp_path / "writer.db", log=pg.dsn) as store:
        script(store)
    return pg.dsn


def test_on_postgresql_one_ledger_keeps_one_connection(
    pg_log: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through a `Ledger` of a log in PostgreSQL with this host's cache, every investigation
    runs on the one server connection it opened, and the cache file is opened once."""
    import psycopg

    real = psycopg.connect
    made: list[str] = []

    def counting(*args: Any, **kwargs: Any) -> Any:
        made.append("psycopg")
        return real(*args, **kwargs)

    monkeypatch.setattr(psycopg, "connect", counting)
    cache = tmp_path / "host" / "cache.db"
    opened = connections_to(cache, monkeypatch)
    with Ledger.open(pg_log, cache=cache) as ledger:
        for investigate in INVESTIGATIONS.values():
            if investigate is not INVESTIGATIONS["verify_deep"]:
                investigate(ledger)
    assert (1, 1) == (len(made), len(opened))


def test_a_ledger_says_what_it_holds(log: Path, pg_log: str, tmp_path: Path) -> None:
    """A file ledger has no cache; a PostgreSQL one has the cache it was given, or none;
    both read only unless opened with read_only=False."""
    with Ledger.open(log) as ledger:
        assert (str(log), None, True) == (ledger.target, ledger.cache, ledger.read_only)
    cache = tmp_path / "cache.db"
    with Ledger.open(pg_log, cache=cache, read_only=False) as ledger:
        assert (str(cache), False) == (ledger.cache, ledger.read_only)
    with Ledger.open(pg_log) as ledger:
        assert None is ledger.cache
        assert 8 == ledger.history().at_position


# -- what a ledger refuses -------------------------------------------------------------------


def test_a_file_log_with_a_cache_is_read_as_a_log_held_elsewhere(log: Path, tmp_path: Path) -> None:
    """A log file given with a cache is read through that cache, as a store over it does (a
    stand-in for a remote log): the cache is made and caught up, and answers as the file."""
    cache = tmp_path / "cache.db"
    with Ledger.open(log) as direct:
        expected = direct.history(tag="api")
    with Ledger.open(log, cache=cache) as through:
        assert expected.versions == through.history(tag="api").versions
    assert cache.exists()


def test_a_dsn_as_the_cache_is_refused(pg_log: str, tmp_path: Path) -> None:
    """A cache is a SQLite file on this host: a DSN given as one is a `CacheChoiceError`,
    whatever the log is, and the message does not repeat the DSN (it may hold a password)."""
    secret = "postgresql://user:hunter2@db.internal/factledger"
    place = tmp_path / "empty"
    place.mkdir()
    for target in (pg_log, place / "memory.db"):
        with pytest.raises(CacheChoiceError, match="not a postgresql:// DSN") as refused:
            Ledger.open(target, cache=secret, read_only=False)
        assert "hunter2" not in str(refused.value)
    assert [] == list(place.iterdir())


def test_bad_arguments_to_open_are_refused(tmp_path: Path) -> None:
    """Not a path, a path with NUL, a read_only that is not a bool: each a clear error."""
    with pytest.raises(InvalidTypeError, match="path must be str"):
        Ledger.open(42)  # type: ignore[arg-type]
    with pytest.raises(InvalidTypeError, match="read_only must be a bool"):
        Ledger.open(tmp_path / "memory.db", read_only="no")  # type: ignore[arg-type]
    with pytest.raises(InvalidTypeError, match="path must be str"):
        Ledger.open(tmp_path / "memory.db", cache=b"cache.db")  # type: ignore[arg-type]
    with pytest.raises(LogMissingError):
        Ledger.open(tmp_path / "memory.db")
    assert [] == list(tmp_path.iterdir())


def test_a_read_only_ledger_refuses_a_write_transaction(log: Path) -> None:
    """The plumbing the operator actions share refuses too, and names the action."""
    with Ledger.open(log) as ledger, pytest.raises(ReadOnlyLedgerError, match=r"^backfill:"):
        ledger.write_transaction("backfill")


def test_an_operator_action_on_a_read_only_ledger_of_postgresql_writes_nothing(
    pg_log: str, tmp_path: Path
) -> None:
    """On PostgreSQL too: refused before anything reaches the server or the cache."""
    cache = tmp_path / "cache.db"
    with Ledger.open(pg_log, cache=cache) as ledger:
        with pytest.raises(ReadOnlyLedgerError, match="quarantine"):
            ledger.quarantine(source_adapter="codex", reason="suspect")
        assert not cache.exists()
        assert 8 == ledger.checkpoint().size


EVERY_USE: dict[str, Use] = {
    **INVESTIGATIONS,
    "quarantine": lambda ledger: ledger.quarantine(source_adapter="codex", reason="r"),
    "release": lambda ledger: ledger.release(6, reason="r"),
    "set_conflict_policy": lambda ledger: ledger.set_conflict_policy("api", "allow"),
    "approve": lambda ledger: ledger.approve(2),
    "reject": lambda ledger: ledger.reject(2),
    "add_operator": lambda ledger: ledger.add_operator("k.pub", key="k"),
    "remove_operator": lambda ledger: ledger.remove_operator("00000000", key="k", reason="r"),
    "import_legacy": lambda ledger: ledger.import_legacy("legacy.db"),
    "event_log": lambda ledger: ledger.event_log,
    "log_id": lambda ledger: ledger.log_id,
    "read_model": lambda ledger: ledger.read_model,
    "at_head": lambda ledger: ledger.at_head().__enter__(),
    "write_transaction": lambda ledger: ledger.write_transaction("x"),
    "enter": lambda ledger: ledger.__enter__(),
}


@pytest.mark.parametrize("use", EVERY_USE.values(), ids=EVERY_USE.keys())
def test_a_closed_ledger_refuses_every_use(log: Path, use: Use) -> None:
    """After `close()` (here, the end of its `with` block) every method and property raises
    `LedgerClosedError`, opened for writing or not; closing again does nothing."""
    with Ledger.open(log, read_only=False) as ledger:
        pass
    with pytest.raises(LedgerClosedError, match="closed"):
        use(ledger)
    ledger.close()


# -- the one-call functions ------------------------------------------------------------------

READ_WRAPPERS: dict[str, tuple[Callable[..., object], Use, Callable[[Any], object]]] = {
    "verify": (replay.verify, lambda ledger: ledger.verify(), lambda r: r),
    "checkpoint": (replay.checkpoint, lambda ledger: ledger.checkpoint(), lambda r: r),
    "history": (
        lambda p: replay.history(p, tag="api"),
        lambda ledger: ledger.history(tag="api"),
        lambda r: r,
    ),
    "blame": (replay.blame, lambda ledger: ledger.blame(), lambda r: r),
    "diff": (lambda p: replay.diff(p, 0, 8), lambda ledger: ledger.diff(0, 8), lambda r: r),
    "lineage": (lambda p: replay.lineage(p, 2), lambda ledger: ledger.lineage(2), lambda r: r),
    "blast_radius": (
        lambda p: replay.blast_radius(p, source_adapter="codex"),
        lambda ledger: ledger.blast_radius(source_adapter="codex"),
        lambda r: r,
    ),
    "list_operators": (replay.list_operators, lambda ledger: ledger.operators(), lambda r: r),
    "rebuild": (replay.rebuild, lambda ledger: ledger.rebuild(), lambda r: (r.matches, r.tables)),
    "export_log": (
        lambda p: exported(lambda out: replay.export_log(p, out)),
        lambda ledger: exported(ledger.export),
        lambda r: r,
    ),
    "as_of": (
        lambda p: replay.as_of(p, position=2),
        lambda ledger: ledger.as_of(position=2),
        lambda view: [
            (f.key, f.value) for f in CrossTaskKB(view).subscribe("api", scope="project")
        ],
    ),
}


def exported(export: Callable[[io.StringIO], object]) -> str:
    out = io.StringIO()
    export(out)
    return out.getvalue()


@pytest.mark.parametrize("wrapper, method, shown", READ_WRAPPERS.values(), ids=READ_WRAPPERS)
def test_each_one_call_investigation_gives_what_its_method_gives(
    log: Path, wrapper: Callable[..., object], method: Use, shown: Callable[[Any], object]
) -> None:
    """`replay.history(path, ...)` and the rest equal the method on a kept ledger."""
    with Ledger.open(log) as ledger:
        expected = shown(method(ledger))
    assert expected == shown(wrapper(log))


def test_each_one_call_proof_gives_what_its_method_gives(log: Path) -> None:
    """`prove_inclusion` and `prove_consistency` of a path equal the kept ledger's proofs."""
    with Ledger.open(log) as ledger:
        old, new = ledger.checkpoint(), ledger.checkpoint()
        inclusion = ledger.prove_inclusion(3, new)
        consistency = ledger.prove_consistency(old, new)
    assert inclusion == replay.prove_inclusion(log, 3, new)
    assert consistency == replay.prove_consistency(log, old, new)


@pytest.fixture
def keys(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    for name in ("first", "second"):
        generate_key(tmp_path / f"{name}.key")
    yield tmp_path / "first.key", tmp_path / "second.key"


def test_each_one_call_operator_action_writes_what_its_method_writes(
    tmp_path: Path, keys: tuple[Path, Path]
) -> None:
    """The one-call operator actions open a ledger for writing: run on one log, and the
    same methods through one kept ledger on another, they return the same positions and
    leave the same state."""
    first, second = keys

    def held(db: Path) -> int:
        with SQLiteMemoryStore(db) as store:
            CrossTaskKB(store, producer_task_id="t", source_adapter="claude-code").publish(
                "api", "base_url", "v1", scope="project"
            )
            return (
                CrossTaskKB(store, producer_task_id="t", source_adapter="codex")
                .publish("api", "base_url", "v2", scope="project")
                .position
            )

    retired = read_operator_key(first).key_id

    def one_call(db: Path) -> list[int]:
        done = [replay.set_conflict_policy(db, "api", "hold", owners=["x"])]
        pending = held(db)
        done += [replay.approve(db, pending), replay.reject(db, held(db), reason="no")]
        applied = replay.quarantine(db, source_adapter="codex", reason="r")
        done += [applied, replay.release(db, applied, reason="r")]
        done.append(replay.add_operator(db, f"{first}.pub", key=first))
        done.append(replay.add_operator(db, f"{second}.pub", key=first))
        done.append(replay.remove_operator(db, retired, key=second, reason="r"))
        return done

    def kept(db: Path) -> list[int]:
        with Ledger.open(db, read_only=False) as ledger:
            done = [ledger.set_conflict_policy("api", "hold", owners=["x"])]
            pending = held(db)
            done += [ledger.approve(pending), ledger.reject(held(db), reason="no")]
            applied = ledger.quarantine(source_adapter="codex", reason="r")
            done += [applied, ledger.release(applied, reason="r")]
            done.append(ledger.add_operator(f"{first}.pub", key=first))
            done.append(ledger.add_operator(f"{second}.pub", key=first))
            done.append(ledger.remove_operator(retired, key=second, reason="r"))
            return done

    def state(db: Path) -> tuple[object, object, list[tuple[str, int | None]]]:
        with Ledger.open(db) as ledger:
            found = ledger.history()
            return (
                [(v.position, v.value, v.status) for v in found.versions],
                [(h.position, h.status) for h in found.held],
                [(o.key_id, o.removed_position) for o in ledger.operators().operators],
            )

    a, b = tmp_path / "a.db", tmp_path / "b.db"
    assert kept(b) == one_call(a)
    assert state(b) == state(a)
    assert [(retired, 12)] == [o for o in state(a)[2] if o[1] is not None]


def test_a_one_call_rebuild_swaps_only_when_asked(log: Path) -> None:
    """`replay.rebuild(path)` compares on a read-only ledger; with swap=True it opens one
    for writing and repairs the drift; a swap that is not a bool is refused, nothing made."""
    with closing(sqlite3.connect(log)) as raw:
        raw.execute("DELETE FROM fl_fact WHERE position = 2")
        raw.commit()
    assert not replay.rebuild(log).matches
    assert replay.rebuild(log, swap=True).swapped
    assert replay.rebuild(log).matches
    with pytest.raises(InvalidTypeError, match="swap must be a bool"):
        replay.rebuild(log, swap=1)  # type: ignore[arg-type]
