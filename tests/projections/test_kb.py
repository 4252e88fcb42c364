"""CrossTaskKB: publish, subscribe, history, hooks and counters."""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest

from eventlog import InvalidInputError, InvalidTypeError
from projections import CrossTaskKB, Fact, PublishCounter, SQLiteMemoryStore, get_global_counter
from tests.conftest import Clock
from tests.salted import expected_content_hash

pytestmark = pytest.mark.read_models


def kb(store: SQLiteMemoryStore, **options: object) -> CrossTaskKB:
    return CrossTaskKB(store, counter=PublishCounter(), **options)  # type: ignore[arg-type]


def test_worked_example_researcher_to_backend(store: SQLiteMemoryStore) -> None:
    """A researcher publishes the users schema; a backend task in the run subscribes to it."""
    researcher = kb(store, run_id="run-42", producer_task_id="researcher-1")
    researcher.publish("api-schema", "users", "{name: str, email: str}", scope="project")
    backend = kb(store, run_id="run-42", producer_task_id="backend-1")
    [fact] = list(backend.subscribe("api-schema", scope="project"))
    assert ("users", "{name: str, email: str}", "researcher-1") == (
        fact.key,
        fact.value,
        fact.producer_task_id,
    )
    expected_hash = expected_content_hash(store.event_log, 1, "{name: str, email: str}")
    assert (expected_hash, "project", "run-42", 1) == (
        fact.content_hash,
        fact.scope,
        fact.run_id,
        fact.position,
    )


def test_last_write_wins_by_position_when_timestamps_tie(
    store: SQLiteMemoryStore, clock: Clock
) -> None:
    """With an identical pinned ts_ns, the later log position wins."""
    first = kb(store, producer_task_id="a", clock_ns=clock)
    second = kb(store, producer_task_id="b", clock_ns=clock)
    first.publish("cfg", "port", "8080", scope="project")
    second.publish("cfg", "port", "9090", scope="project")
    [fact] = list(first.subscribe("cfg", scope="project"))
    assert ("9090", "b", clock.now_ns) == (fact.value, fact.producer_task_id, fact.ts_ns)


def test_last_write_wins_by_position_even_when_its_clock_is_behind(
    store: SQLiteMemoryStore, clock: Clock
) -> None:
    """A later write with an earlier ts_ns (clock skew) still wins: order is log position."""
    ahead = Clock(clock.now_ns + 10**12)
    kb(store, producer_task_id="fast-clock", clock_ns=ahead).publish(
        "cfg", "k", "old", scope="project"
    )
    kb(store, producer_task_id="slow-clock", clock_ns=clock).publish(
        "cfg", "k", "new", scope="project"
    )
    assert ["new"] == [f.value for f in kb(store).subscribe("cfg", scope="project")]


def test_subscribe_is_one_fact_per_key_newest_first(store: SQLiteMemoryStore) -> None:
    """subscribe yields the current version of each key, most recently written first."""
    facade = kb(store, producer_task_id="t")
    for key, value in [("a", "1"), ("b", "1"), ("a", "2"), ("c", "1")]:
        facade.publish("tag", key, value, scope="project")
    assert [("c", "1"), ("a", "2"), ("b", "1")] == [
        (f.key, f.value) for f in facade.subscribe("tag", scope="project")
    ]


def test_tags_are_exact_in_subscribe(store: SQLiteMemoryStore) -> None:
    """Subscribing to 'api' does not see facts under 'api-schema'."""
    facade = kb(store)
    facade.publish("api-schema", "k", "v", scope="project")
    assert [] == list(facade.subscribe("api", scope="project"))


def test_run_scope_is_isolated_per_run(store: SQLiteMemoryStore) -> None:
    """Run-scoped facts are seen only within their run; project facts by every run."""
    run1 = kb(store, run_id="run-1")
    run2 = kb(store, run_id="run-2")
    run1.publish("t", "k", "run-1 value", scope="run")
    run2.publish("t", "k", "run-2 value", scope="run")
    run1.publish("t", "shared", "for all", scope="project")
    assert ["run-1 value"] == [f.value for f in run1.subscribe("t", scope="run")]
    assert ["run-2 value"] == [f.value for f in run2.subscribe("t", scope="run")]
    assert ["for all"] == [f.value for f in run2.subscribe("t", scope="project")]
    assert ["for all"] == [f.value for f in kb(store).subscribe("t", scope="project")]


def test_history_keeps_every_version_oldest_first(store: SQLiteMemoryStore) -> None:
    """history returns every version under the identity, overwritten ones included."""
    a = kb(store, run_id="r", producer_task_id="a")
    b = kb(store, run_id="r", producer_task_id="b")
    a.publish("t", "k", "v1", scope="run")
    b.publish("t", "k", "v2", scope="run")
    a.publish("t", "k", "v3", scope="run")
    kb(store, run_id="other").publish("t", "k", "elsewhere", scope="run")
    history = a.history("t", "k", scope="run")
    assert [("v1", "a"), ("v2", "b"), ("v3", "a")] == [
        (f.value, f.producer_task_id) for f in history
    ]
    assert [1, 2, 3] == [f.position for f in history]


def overwrites(caplog: pytest.LogCaptureFixture) -> list[dict[str, object]]:
    """The fields of every `fact_overwritten` record, with the level's name as `level`."""
    return [
        {**vars(r), "level": r.levelname} for r in caplog.records if r.msg == "fact_overwritten"
    ]


def test_overwrite_by_another_producer_warns_with_positions_and_producers_not_values(
    store: SQLiteMemoryStore, caplog: pytest.LogCaptureFixture
) -> None:
    """Another producer overwriting an identity is a warning naming both positions, producers
    and adapters, never the values."""
    caplog.set_level(logging.INFO, logger="factledger")
    kb(store, producer_task_id="a").publish("t", "k", "secret-one", scope="project")
    kb(store, producer_task_id="b").publish("t", "k", "secret-two", scope="project")
    [warning] = overwrites(caplog)
    assert {
        "scope": "project",
        "tag": "t",
        "key": "k",
        "previous_position": 1,
        "previous_producer": "a",
        "previous_adapter": None,
        "position": 2,
        "producer": "b",
        "adapter": None,
        "level": "WARNING",
    }.items() <= warning.items()
    assert "secret-" not in repr([vars(r) for r in caplog.records])
    assert "secret-" not in caplog.text


def test_overwrite_under_another_adapter_warns(
    store: SQLiteMemoryStore, caplog: pytest.LogCaptureFixture
) -> None:
    """The same producer writing under a different adapter is a warning too."""
    caplog.set_level(logging.INFO, logger="factledger")
    facade = kb(store, producer_task_id="a")
    facade.publish("t", "k", "v1", scope="project", source_adapter="claude-code")
    facade.publish("t", "k", "v2", scope="project", source_adapter="codex")
    assert [("WARNING", "claude-code", "codex")] == [
        (o["level"], o["previous_adapter"], o["adapter"]) for o in overwrites(caplog)
    ]


def test_producer_updating_its_own_fact_logs_at_info(
    store: SQLiteMemoryStore, caplog: pytest.LogCaptureFixture
) -> None:
    """The same producer under the same adapter updating its fact is routine: info, not a
    warning."""
    caplog.set_level(logging.INFO, logger="factledger")
    facade = kb(store, producer_task_id="a", source_adapter="codex")
    facade.publish("t", "k", "v1", scope="project")
    facade.publish("t", "k", "v2", scope="project")
    assert [("INFO", 1, 2)] == [
        (o["level"], o["previous_position"], o["position"]) for o in overwrites(caplog)
    ]


def test_first_publish_does_not_log_an_overwrite(
    store: SQLiteMemoryStore, caplog: pytest.LogCaptureFixture
) -> None:
    """A new identity is not an overwrite."""
    caplog.set_level(logging.INFO, logger="factledger")
    kb(store).publish("t", "k", "v", scope="project")
    assert [] == overwrites(caplog)


def test_subscribe_allow_list_semantics(store: SQLiteMemoryStore) -> None:
    """None reads all; a list reads the newest version by those adapters; [] reads nothing."""
    facade = kb(store)
    facade.publish("t", "k", "from claude", scope="project", source_adapter="claude-code")
    facade.publish("t", "k", "from codex", scope="project", source_adapter="codex")
    facade.publish("t", "untagged", "operator", scope="project")
    assert ["operator", "from codex"] == [f.value for f in facade.subscribe("t", scope="project")]
    assert ["from claude"] == [
        f.value
        for f in facade.subscribe("t", scope="project", read_only_from_adapters=["claude-code"])
    ]
    assert [] == list(facade.subscribe("t", scope="project", read_only_from_adapters=[]))


def test_adapter_precedence_call_then_facade_then_store(
    make_store: Callable[..., SQLiteMemoryStore],
) -> None:
    """The call's adapter wins, then the facade's, then the store handle's."""
    store = make_store(source_adapter="store-adapter")
    facade = kb(store, source_adapter="facade-adapter")
    assert (
        "call-adapter"
        == facade.publish(
            "t", "a", "v", scope="project", source_adapter="call-adapter"
        ).source_adapter
    )
    assert "facade-adapter" == facade.publish("t", "b", "v", scope="project").source_adapter
    assert "store-adapter" == kb(store).publish("t", "c", "v", scope="project").source_adapter


def test_hook_receives_the_documented_payload(store: SQLiteMemoryStore) -> None:
    """Every publish calls the hook once with the fact's attribution, not its value."""
    calls: list[tuple[str, dict[str, object]]] = []
    facade = kb(
        store, producer_task_id="p", hook_dispatch=lambda name, data: calls.append((name, data))
    )
    fact = facade.publish("t", "k", "v", scope="project", source_adapter="codex")
    assert [
        (
            "kb.fact_published",
            {
                "tag": "t",
                "key": "k",
                "scope": "project",
                "producer_task_id": "p",
                "ts_ns": fact.ts_ns,
                "content_hash": fact.content_hash,
                "position": 1,
                "source_adapter": "codex",
            },
        )
    ] == calls


def test_failing_hook_never_fails_the_publish(
    store: SQLiteMemoryStore, caplog: pytest.LogCaptureFixture
) -> None:
    """A hook that raises is logged; the fact stays published."""

    def broken(name: str, data: dict[str, object]) -> None:
        raise RuntimeError("plugin exploded")

    facade = kb(store, hook_dispatch=broken)
    fact = facade.publish("t", "k", "v", scope="project")
    assert [fact] == list(facade.subscribe("t", scope="project"))
    assert [(logging.WARNING, "RuntimeError")] == [
        (r.levelno, r.error_type) for r in caplog.records if r.msg == "fact_hook_failed"
    ]


def test_counters_count_publishes_and_facts_yielded(store: SQLiteMemoryStore) -> None:
    """publish counts each fact; subscribe counts facts as they are yielded."""
    facade = kb(store)
    facade.publish("t", "a", "1", scope="project")
    facade.publish("t", "b", "1", scope="project")
    stream = facade.subscribe("t", scope="project")
    assert (2, 0) == facade.counter.snapshot()
    next(stream)
    assert (2, 1) == facade.counter.snapshot()
    list(stream)
    assert (2, 2) == facade.counter.snapshot()


def test_default_counter_is_process_global(store: SQLiteMemoryStore) -> None:
    """Facades without a counter share the process-global one."""
    facade = CrossTaskKB(store)
    before = get_global_counter().snapshot()
    facade.publish("t", "k", "v", scope="project")
    assert facade.counter is get_global_counter()
    assert before[0] + 1 == get_global_counter().snapshot()[0]


def test_counter_is_thread_safe() -> None:
    """Concurrent increments from many threads are all counted."""
    import threading

    counter = PublishCounter()
    threads = [
        threading.Thread(target=lambda: [counter.incr_publish() for _ in range(1000)])
        for _ in range(8)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert (8000, 0) == counter.snapshot()


def test_facts_appear_as_cross_task_memory_rows(store: SQLiteMemoryStore) -> None:
    """A fact is a cross_task entry tagged with its tag; only the current version shows."""
    facade = kb(store, producer_task_id="p")
    facade.publish("api-schema", "users", "v1", scope="project")
    facade.publish("api-schema", "users", "v2", scope="project")
    [entry] = store.list(type="cross_task")
    assert ("v2", ["api-schema"], "p", 2) == (entry.content, entry.tags, entry.task_id, entry.id)
    assert [2] == [e.id for e in store.get_relevant(["api-schema"])]


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda f: f.publish("", "k", "v", scope="project"), InvalidInputError, "tag"),
        (lambda f: f.publish("   ", "k", "v", scope="project"), InvalidInputError, "tag"),
        (lambda f: f.publish("a,b", "k", "v", scope="project"), InvalidInputError, "','"),
        (lambda f: f.publish("t", "", "v", scope="project"), InvalidInputError, "key"),
        (lambda f: f.publish("t", " ", "v", scope="project"), InvalidInputError, "key"),
        (lambda f: f.publish("t", "k", "v", scope="global"), InvalidInputError, "scope"),
        (
            lambda f: f.publish("t", "k", b"v", scope="project"),
            InvalidTypeError,
            "value must be str",
        ),
        (
            lambda f: f.publish("t", "k", None, scope="project"),
            InvalidTypeError,
            "value must be str",
        ),
        (
            lambda f: f.publish("t", "k", "x" * (1024 * 1024 + 1), scope="project"),
            InvalidInputError,
            "limit",
        ),
        (lambda f: f.publish("t", "k", "\udfff", scope="project"), InvalidInputError, "surrogate"),
        (lambda f: f.publish("t", "k", "v", scope="run"), InvalidInputError, "run_id"),
        (lambda f: list(f.subscribe("t", scope="run")), InvalidInputError, "run_id"),
        (lambda f: f.subscribe("t", scope="everywhere"), InvalidInputError, "scope"),
        (
            lambda f: f.subscribe("t", scope="project", read_only_from_adapters="codex"),
            InvalidTypeError,
            "adapter",
        ),
        (lambda f: f.history("t", "", scope="project"), InvalidInputError, "key"),
    ],
)
def test_bad_input_is_refused_and_nothing_is_written(
    store: SQLiteMemoryStore,
    call: Callable[[CrossTaskKB], object],
    error: type[Exception],
    message: str,
) -> None:
    """Each bad argument raises ValueError/TypeError subclasses; the log head is unchanged."""
    facade = kb(store)
    facade.publish("t", "k", "existing", scope="project")
    head = store.event_log.head()
    with pytest.raises(error, match=message):
        call(facade)
    assert head == store.event_log.head()


def test_fact_is_frozen_and_keeps_the_legacy_field_order() -> None:
    """Fact takes the replaced system's seven fields positionally, and is immutable."""
    fact = Fact("t", "k", "v", "project", "p", 1, "blake3:00")
    assert (0, None, None) == (fact.position, fact.run_id, fact.source_adapter)
    with pytest.raises(AttributeError):
        fact.value = "w"  # type: ignore[misc]
