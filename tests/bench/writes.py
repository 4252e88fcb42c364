"""Writes: add and publish one per transaction, add_many and publish_many 1,000 per transaction.

Each figure is paired with plain sqlite3 writing the legacy `memory` row into a fresh file
beside ours, with the pragmas read back from our own connection, in alternating rounds.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

from projections import CrossTaskKB, SQLiteMemoryStore
from tests.bench import raw
from tests.bench.context import Context
from tests.bench.corpus import Memory
from tests.bench.results import Result, Target
from tests.bench.sampling import paired, rate

WARMUP = 20
PUBLISH_TAGS = ("api-schema", "conventions", "build", "ownership", "ports")
PUBLISH_KEYS = 100
"""Single publishes cycle through 5 tags x 100 keys, so most of them overwrite a fact."""

DURABLE_SINGLE = Target("ratio>=", 0.8, ">= 0.8x raw")
FAST_SINGLE = Target("ratio>=", 0.5, ">= 0.5x raw")
BATCH_RATIO = Target("ratio>=", 0.4, ">= 0.4x executemany")
BATCH_RATE = Target("ours>=", 100_000, ">= 100,000 ev/s")


def as_facts(memories: Sequence[Memory]) -> list[tuple[str, str, str]]:
    """(tag, key, value) facts carrying the memories' contents."""
    names = itertools.cycle(itertools.product(range(PUBLISH_KEYS), PUBLISH_TAGS))
    return [
        (tag, f"key-{key:03d}", m.content) for m, (key, tag) in zip(memories, names, strict=False)
    ]


def as_fact_rows(memories: Sequence[Memory]) -> list[Memory]:
    """The legacy rows the replaced store wrote for those facts: `cross_task`, one tag."""
    return [
        Memory("cross_task", content, (tag,), 1.0, "bench-task", None)
        for tag, _, content in as_facts(memories)
    ]


def _store(ctx: Context, name: str, durability: str) -> tuple[SQLiteMemoryStore, CrossTaskKB]:
    store = SQLiteMemoryStore(ctx.path(name), durability=durability)  # type: ignore[arg-type]
    return store, CrossTaskKB(store, run_id="bench-run", producer_task_id="bench-task")


def _writer(
    verb: str, store: SQLiteMemoryStore, kb: CrossTaskKB
) -> Callable[[Sequence[Memory]], None]:
    """Our single-transaction write for `verb`, over a list of memories."""

    def add(memories: Sequence[Memory]) -> None:
        for m in memories:
            store.add(
                m.type,
                m.content,
                list(m.tags),
                m.importance,
                m.task_id,
                source_adapter=m.source_adapter,
            )

    def publish(memories: Sequence[Memory]) -> None:
        for tag, key, value in as_facts(memories):
            kb.publish(tag, key, value, scope="project")

    return add if verb == "add" else publish


def single(ctx: Context) -> list[Result]:
    """add and publish, one per transaction, in the durable and the fast mode."""
    return [
        _single(ctx, verb, durability)
        for durability in ("full", "fast")
        for verb in ("add", "publish")
    ]


def _single(ctx: Context, verb: str, durability: str) -> Result:
    count = ctx.scale.single_durable if durability == "full" else ctx.scale.single_fast
    mode = "durable" if durability == "full" else "fast"
    store, kb = _store(ctx, f"{verb}-{durability}", durability)
    pragmas = raw.pragmas_of(store.event_log)
    conn = raw.legacy_table(ctx.path(f"raw-{verb}-{durability}"), pragmas)
    try:
        memories = ctx.corpus.memories(count)
        legacy = as_fact_rows(memories) if verb == "publish" else memories
        write = _writer(verb, store, kb)
        raw.insert_each(conn, legacy[:WARMUP])
        write(memories[:WARMUP])
        runs = paired(
            ctx.scale.rounds,
            lambda: rate(count, lambda: raw.insert_each(conn, legacy)),
            lambda: rate(count, lambda: write(memories)),
        )
    finally:
        store.close()
        conn.close()
    base, mine, ratio = runs.summary()
    return Result(
        f"{verb}.{mode}",
        mine,
        "ev/s",
        baseline=base,
        baseline_name=f"plain sqlite3 single-row insert per transaction ({mode})",
        target=DURABLE_SINGLE if durability == "full" else FAST_SINGLE,
        ratio=ratio,
        note=f"{count} transactions x {ctx.scale.rounds} rounds; "
        f"{1e6 / mine:.0f} us vs {1e6 / base:.0f} us per transaction",
        extra={**runs.samples(), "pragmas": pragmas},
    ).judge()


def batched(ctx: Context) -> list[Result]:
    """add_many and publish_many, 1,000 per transaction, against executemany (durable)."""
    return [result for verb in ("add_many", "publish_many") for result in _batched(ctx, verb)]


def _batched(ctx: Context, verb: str) -> list[Result]:
    size, batches = ctx.scale.batch_size, ctx.scale.batches
    store, kb = _store(ctx, verb, "full")
    pragmas = raw.pragmas_of(store.event_log)
    conn = raw.legacy_table(ctx.path(f"raw-{verb}"), pragmas)
    try:
        groups = [ctx.corpus.memories(size) for _ in range(batches)]
        if verb == "add_many":
            legacy = groups
            rows = [[m.row() for m in group] for group in groups]

            def ours() -> None:
                for batch in rows:
                    store.add_many(batch)
        else:
            legacy = [as_fact_rows(group) for group in groups]
            facts = [as_facts(group) for group in groups]

            def ours() -> None:
                for batch in facts:
                    kb.publish_many(batch, scope="project")

        def baseline() -> None:
            for batch in legacy:
                raw.insert_batch(conn, batch)

        baseline()
        ours()
        runs = paired(
            ctx.scale.rounds,
            lambda: rate(size * batches, baseline),
            lambda: rate(size * batches, ours),
        )
    finally:
        store.close()
        conn.close()
    base, mine, ratio = runs.summary()
    note = f"{batches} transactions of {size} x {ctx.scale.rounds} rounds, durable mode"
    return [
        Result(
            f"{verb}.vs_executemany",
            mine,
            "ev/s",
            baseline=base,
            baseline_name=f"plain sqlite3 executemany, {size} rows per transaction",
            target=BATCH_RATIO,
            ratio=ratio,
            note=note,
            extra={**runs.samples(), "pragmas": pragmas},
        ).judge(),
        Result(f"{verb}.events_per_s", mine, "ev/s", target=BATCH_RATE, note=note).judge(),
    ]
