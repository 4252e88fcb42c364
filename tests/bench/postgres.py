"""`python -m tests.bench.postgres [--dsn DSN] [--rounds N] [--singles N] [--batches N]`.

The PostgreSQL log against the eventsourcing library's PostgreSQL recorder
(`PostgresApplicationRecorder`, whose notification ids are also in commit order), on the
same server in the same run, in interleaved rounds (ABBA order): single appends (one event
per transaction) and 1,000-event batches. Both write the same stored bytes: the recorder's
`state` is the body our log stores for the same memory. The ratio is ours / theirs in
events per second (>= 1.0 means at least as fast); the target is 1.0 on both.

Needs a server (default: postgres on 127.0.0.1:5432, or `FACTLEDGER_TEST_DSN`) and the
benchmark-only dependency `pip install 'eventsourcing[postgres]'`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote, urlsplit

import psycopg

from eventlog import MAX_CONTENT_BYTES, NewEvent
from eventlog.drafts import prepare, seal
from eventlog.postgres import PostgresEventLog
from tests.bench.corpus import Corpus, memory_drafts
from tests.bench.quiet import silence_logs
from tests.bench.sampling import Paired, paired, rate

DEFAULT_DSN = "postgresql://postgres@127.0.0.1:5432/postgres"
BATCH = 1000
TARGET = 1.0
T = TypeVar("T")

try:
    from eventsourcing.persistence import StoredEvent
    from eventsourcing.postgres import PostgresApplicationRecorder, PostgresDatastore
except ImportError:  # pragma: no cover - the message is the point
    sys.exit(
        "this benchmark compares against eventsourcing's PostgreSQL recorder, a "
        "benchmark-only dependency: pip install 'eventsourcing[postgres]'"
    )


def bodies(events: list[NewEvent]) -> list[bytes]:
    """The bytes our log would store for these events (at positions 1, 2, ...)."""
    sealed, previous = [], bytes(32)
    for position, event in enumerate(events, 1):
        body, previous, _ = seal(
            prepare(event, clock_ns=time.time_ns, max_content_bytes=MAX_CONTENT_BYTES),
            position,
            previous,
        )
        sealed.append(body)
    return sealed


class Theirs:
    """eventsourcing's application recorder in a schema of its own."""

    def __init__(self, dsn: str, schema: str) -> None:
        parts = urlsplit(dsn)
        self.datastore = PostgresDatastore(
            dbname=parts.path.lstrip("/") or "postgres",
            host=parts.hostname or "127.0.0.1",
            port=parts.port or 5432,
            user=parts.username or "postgres",
            password=parts.password or "",
            schema=schema,
        )
        self.recorder = PostgresApplicationRecorder(self.datastore, events_table_name="events")
        self.recorder.create_table()

    def append(self, states: Sequence[bytes]) -> None:
        """One transaction of events (one aggregate, consecutive versions)."""
        originator = uuid.uuid4()
        self.recorder.insert_events(
            [
                StoredEvent(originator_id=originator, originator_version=v, topic="t", state=s)
                for v, s in enumerate(states)
            ]
        )


def each(function: Callable[[T], object], items: list[T]) -> Callable[[], None]:
    """Work that calls `function` on each item in turn."""

    def run() -> None:
        for item in items:
            function(item)

    return run


def measure(
    rounds: int,
    count: int,
    size: int,
    ours: Callable[[list[NewEvent]], object],
    theirs: Callable[[list[bytes]], None],
    corpus: Corpus,
) -> Paired:
    """`rounds` paired rounds of `count` transactions of `size` events each."""

    def our_round() -> float:
        return rate(count * size, each(ours, [memory_drafts(corpus, size) for _ in range(count)]))

    def their_round() -> float:
        work = [bodies(memory_drafts(corpus, size)) for _ in range(count)]
        return rate(count * size, each(theirs, work))

    return paired(rounds, their_round, our_round)


def report(name: str, result: Paired) -> dict[str, Any]:
    theirs, ours, ratio = result.summary()
    line = {
        "metric": name,
        "ours_events_per_s": round(ours, 1),
        "eventsourcing_events_per_s": round(theirs, 1),
        "ratio": round(ratio, 3),
        "target": f">= {TARGET}x",
        "met": ratio >= TARGET,
        **result.samples(),
    }
    print(
        f"{name:<22} ours {ours:>10,.0f} ev/s   eventsourcing {theirs:>10,.0f} ev/s   "
        f"ratio {ratio:5.2f}x   {'met' if ratio >= TARGET else 'MISSED'} (target >= {TARGET}x)"
    )
    return line


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.postgres")
    parser.add_argument("--dsn", default=os.environ.get("FACTLEDGER_TEST_DSN") or DEFAULT_DSN)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--singles", type=int, default=300, help="single appends per round")
    parser.add_argument("--batches", type=int, default=5, help="1,000-event batches per round")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    silence_logs()
    tag = uuid.uuid4().hex[:8]
    ours_schema, their_schema = f"bench_fl_{tag}", f"bench_es_{tag}"
    with psycopg.connect(args.dsn, autocommit=True) as admin:
        admin.execute(f'CREATE SCHEMA "{their_schema}"')
        server = admin.execute("SHOW server_version").fetchone()
    separator = "&" if urlsplit(args.dsn).query else "?"
    option = quote(f"-c factledger.schema={ours_schema}", safe="")
    log = PostgresEventLog(f"{args.dsn}{separator}options={option}")
    theirs = Theirs(args.dsn, their_schema)
    corpus = Corpus()
    try:
        print(f"PostgreSQL {server[0] if server else '?'} at {urlsplit(args.dsn).hostname}")
        results = [
            report(
                "append (1 per tx)",
                measure(
                    args.rounds, args.singles, 1, lambda e: log.append(e[0]), theirs.append, corpus
                ),
            ),
            report(
                f"append_many ({BATCH:,})",
                measure(args.rounds, args.batches, BATCH, log.append_many, theirs.append, corpus),
            ),
        ]
    finally:
        log.close()
        theirs.datastore.close()
        with psycopg.connect(args.dsn, autocommit=True) as admin:
            for name in (ours_schema, their_schema):
                admin.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
    if args.json:
        args.json.write_text(json.dumps({"results": results}, indent=2), encoding="utf-8")
    print(f"medians of {args.rounds} rounds of each, interleaved")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
