"""Reads: subscribe at growing version counts, get_relevant and the receipted prompt path."""

from __future__ import annotations

import sqlite3
import statistics
import time
from collections.abc import Sequence
from functools import partial

from projections import (
    CrossTaskKB,
    Fact,
    MemoryTrustPolicy,
    SQLiteMemoryStore,
    load_persistent_memory,
)
from tests.bench import raw
from tests.bench.context import Context
from tests.bench.corpus import AREA_TAGS, chunks
from tests.bench.results import Result, Target
from tests.bench.sampling import latencies_ms, percentile, spread

SUBSCRIBE_TAG = "api-schema"
SUBSCRIBE_KEYS = 20
SUBSCRIBE_P50 = Target("ours<=", 1.0, "p50 <= 1 ms")
SUBSCRIBE_FLAT = Target("ratio<=", 1.5, "<= 1.5x")
RELEVANT_P50 = Target("ours<=", 5.0, "p50 <= 5 ms")
PROMPT_P50 = Target("ours<=", 10.0, "p50 <= 10 ms")
LIMIT = 10
POLICY = MemoryTrustPolicy(trusted_adapters=frozenset({"claude-code"}))
"""Operator rows and claude-code rows reach the prompt; codex and gemini-cli rows are refused."""

RECEIPT_DDL = (
    "CREATE TABLE IF NOT EXISTS receipt (id INTEGER PRIMARY KEY AUTOINCREMENT, task_id TEXT, "
    "included TEXT NOT NULL, rendered_hash TEXT NOT NULL, created_at REAL NOT NULL)"
)
RECEIPT_INSERT = (
    "INSERT INTO receipt (task_id, included, rendered_hash, created_at) VALUES (?, ?, ?, ?)"
)


def subscribe(ctx: Context) -> list[Result]:
    """subscribe on a tag of 20 keys at 1, 100 and 1,000 versions per key."""
    versions = ctx.scale.versions
    kbs = {v: _facts_store(ctx, v) for v in versions}
    samples: dict[int, list[float]] = {v: [] for v in versions}
    try:
        for kb in kbs.values():
            list(kb.subscribe(SUBSCRIBE_TAG, scope="project"))
        for _ in range(ctx.scale.read_calls):
            for v, kb in kbs.items():
                samples[v] += latencies_ms(1, partial(_subscribe, kb))
    finally:
        for kb in kbs.values():
            kb.store.close()
    p50 = {v: statistics.median(samples[v]) for v in versions}
    results = [
        Result(
            f"subscribe.p50.v{v}",
            p50[v],
            "ms",
            target=SUBSCRIBE_P50,
            note=f"{SUBSCRIBE_KEYS} keys x {v} versions; {ctx.scale.read_calls} calls",
            extra=spread(samples[v]),
        ).judge()
        for v in versions
    ]
    first, last = versions[0], versions[-1]
    results.append(
        Result(
            "subscribe.flatness",
            p50[last],
            "ms",
            baseline=p50[first],
            baseline_name=f"our subscribe p50 at {first} version per key",
            target=SUBSCRIBE_FLAT,
            note=f"p50 at {last} versions per key / p50 at {first}",
        ).judge()
    )
    return results


def _subscribe(kb: CrossTaskKB) -> list[Fact]:
    return list(kb.subscribe(SUBSCRIBE_TAG, scope="project"))


def _facts_store(ctx: Context, versions: int) -> CrossTaskKB:
    """A store holding 20 keys x `versions` versions under one tag, written in log order."""
    path = ctx.path(f"subscribe-v{versions}")
    builder = SQLiteMemoryStore(path, durability="fast")
    kb = CrossTaskKB(builder, run_id="bench-run", producer_task_id="bench-builder")
    facts = ctx.corpus.facts(SUBSCRIBE_KEYS * versions, [SUBSCRIBE_TAG], SUBSCRIBE_KEYS)
    for batch in chunks(facts, 1000):
        kb.publish_many(batch, scope="project")
    builder.close()
    store = SQLiteMemoryStore(path)
    return CrossTaskKB(store, run_id="bench-run", producer_task_id="bench-reader")


def relevant(ctx: Context) -> list[Result]:
    """get_relevant (3 tags) and load_persistent_memory with its receipt over N entries."""
    count = ctx.scale.relevant_entries
    memories = ctx.corpus.memories(count)
    path = ctx.path("relevant")
    builder = SQLiteMemoryStore(path, durability="fast")
    for rows in chunks([m.row() for m in memories], 1000):
        builder.add_many(rows)
    builder.close()
    store = SQLiteMemoryStore(path)
    pragmas = raw.pragmas_of(store.event_log)
    conn = raw.legacy_table(ctx.path("raw-relevant"), pragmas)
    for batch in chunks(memories, 1000):
        raw.insert_batch(conn, batch)
    conn.execute(RECEIPT_DDL)
    queries = ctx.corpus.queries(ctx.scale.relevant_calls)
    try:
        same = _same_results(store, conn, queries[:20])
        results = [_relevant(store, conn, queries, count, same)]
        results.append(_prompt(store, conn, queries, count))
    finally:
        store.close()
        conn.close()
    return results


def _same_results(
    store: SQLiteMemoryStore, conn: sqlite3.Connection, queries: Sequence[Sequence[str]]
) -> bool:
    """Whether ours and the legacy query return the same entries (the work is comparable)."""
    for tags in queries:
        ours = [e.content for e in store.get_relevant(list(tags), limit=LIMIT)]
        legacy = [row[2] for row in raw.relevant(conn, tags, LIMIT)]
        if ours != legacy:
            return False
    return True


def _relevant(
    store: SQLiteMemoryStore,
    conn: sqlite3.Connection,
    queries: Sequence[Sequence[str]],
    count: int,
    same: bool,
) -> Result:
    ours: list[float] = []
    legacy: list[float] = []
    for tags in queries:
        ours += latencies_ms(1, partial(store.get_relevant, list(tags), limit=LIMIT))
        legacy += latencies_ms(1, partial(raw.relevant, conn, tags, LIMIT))
    areas = set(AREA_TAGS)
    popular = [o for o, tags in zip(ours, queries, strict=True) if areas & set(tags)]
    tail = [o for o, tags in zip(ours, queries, strict=True) if not areas & set(tags)]
    return Result(
        "get_relevant.p50",
        statistics.median(ours),
        "ms",
        baseline=statistics.median(legacy),
        baseline_name="legacy ranked query: scan matching comma-joined tags with LIKE",
        target=RELEVANT_P50,
        note=f"{count} entries, {len(queries)} queries of 3 Zipf-drawn tags, limit {LIMIT}; "
        f"same top {LIMIT} as the legacy query: {same}",
        extra={
            "ours": spread(ours),
            "legacy": spread(legacy),
            "p50_queries_with_an_area_tag": _p50(popular),
            "p50_queries_of_tail_tags_only": _p50(tail),
            "share_with_an_area_tag": round(len(popular) / len(queries), 3),
            "same_results": same,
        },
    ).judge()


def _prompt(
    store: SQLiteMemoryStore,
    conn: sqlite3.Connection,
    queries: Sequence[Sequence[str]],
    count: int,
) -> Result:
    ours: list[float] = []
    legacy: list[float] = []
    for tags in queries:
        ours += latencies_ms(1, partial(_prompt_for, store, tags))
        legacy += latencies_ms(1, partial(_legacy_prompt, conn, tags))
    return Result(
        "load_persistent_memory.p50",
        statistics.median(ours),
        "ms",
        baseline=statistics.median(legacy),
        baseline_name="legacy ranked query plus one durable receipt row (plain sqlite3)",
        target=PROMPT_P50,
        note=f"{count} entries, durable mode, one receipt event appended per call",
        extra={"ours": spread(ours), "legacy": spread(legacy)},
    ).judge()


def _prompt_for(store: SQLiteMemoryStore, tags: Sequence[str]) -> str:
    return load_persistent_memory(
        store,
        list(tags),
        trust_policy=POLICY,
        limit=LIMIT,
        task_id="bench-task",
        run_id="bench-run",
        adapter="claude-code",
    )


def _legacy_prompt(conn: sqlite3.Connection, tags: Sequence[str]) -> None:
    rows = raw.relevant(conn, tags, LIMIT)
    conn.execute("BEGIN IMMEDIATE")
    conn.execute(
        RECEIPT_INSERT,
        ("bench-task", ",".join(str(r[0]) for r in rows), "blake3:" + "0" * 64, time.time()),
    )
    conn.execute("COMMIT")


def _p50(values: list[float]) -> float | None:
    return round(percentile(values, 50), 4) if values else None
