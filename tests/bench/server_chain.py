"""`python -m tests.bench.server_chain [--dsn DSN] [--rounds N] [--singles N] [--batches N]`.

The PostgreSQL append rate before and after the server computes the chain, on the same server
in the same run, in interleaved rounds (ABBA order): single appends (one event per
transaction) and 1,000-event batches.

- before: the write path of format v2 as first written, the client's: lock the head, compute
  each chain link here, INSERT the rows and their texts (two round trips; the trigger only
  checks positions and moves the head, as it did for a writer no adapter binds).
- after: `PostgresEventLog` today: the same drafts through `append_events`, which checks each
  row and computes its link with the server's SHA-256 (and the client compares them).

The ratio is after / before in events per second; 1.0 means no cost. Needs a server (default:
postgres on 127.0.0.1:5432, or `FACTLEDGER_TEST_DSN`) as a superuser, who alone may still
INSERT around the write path.
"""

from __future__ import annotations

import argparse
import json
import os
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import psycopg

from eventlog import MAX_CONTENT_BYTES, NewEvent
from eventlog.drafts import Sealed, prepare, seal
from eventlog.postgres import PostgresEventLog
from tests.bench.corpus import Corpus, memory_drafts
from tests.bench.quiet import silence_logs
from tests.bench.sampling import Paired, paired, rate

DEFAULT_DSN = "postgresql://postgres@127.0.0.1:5432/postgres"
BATCH = 1000


def schema_dsn(dsn: str, schema: str) -> str:
    separator = "&" if urlsplit(dsn).query else "?"
    return f"{dsn}{separator}options={quote(f'-c factledger.schema={schema}', safe='')}"


class ClientChained:
    """The client-computed write path, on a log of its own."""

    def __init__(self, dsn: str, schema: str) -> None:
        PostgresEventLog(schema_dsn(dsn, schema)).close()
        self.conn = psycopg.connect(dsn, autocommit=True)
        self.begin = (
            "BEGIN ISOLATION LEVEL READ COMMITTED;"
            f' SELECT position, chain_hash FROM "{schema}".head FOR UPDATE'
        )
        self.events = (
            f'INSERT INTO "{schema}".events (position, event_id, body, chain_hash)'
            " SELECT * FROM unnest(%b::bigint[], %b::text[], %b::bytea[], %b::bytea[])"
        )
        self.content = (
            f'INSERT INTO "{schema}".content (position, text, salt)'
            " SELECT * FROM unnest(%b::bigint[], %b::bytea[], %b::bytea[])"
        )

    def append(self, events: Sequence[NewEvent]) -> None:
        prepared = [
            prepare(e, clock_ns=time.time_ns, max_content_bytes=MAX_CONTENT_BYTES) for e in events
        ]
        cursor = psycopg.ClientCursor(self.conn)
        cursor.execute(self.begin)
        cursor.nextset()
        row = cursor.fetchone()
        assert row is not None
        position, previous = int(row[0]), bytes(row[1])
        rows: list[Sealed] = []
        for item in prepared:
            position += 1
            sealed = seal(item, position, previous)
            previous = sealed.chain_hash
            rows.append(sealed)
        with self.conn.pipeline():
            self.conn.execute(
                self.events,
                [
                    [s.record.position for s in rows],
                    [s.record.event_id for s in rows],
                    [s.body for s in rows],
                    [s.chain_hash for s in rows],
                ],
            )
            self.conn.execute(
                self.content,
                [[s.record.position for s in rows], [s.text for s in rows], [s.salt for s in rows]],
            )
            self.conn.execute("COMMIT")


def measure(
    rounds: int,
    count: int,
    size: int,
    before: Callable[[list[NewEvent]], object],
    after: Callable[[list[NewEvent]], object],
    corpus: Corpus,
) -> Paired:
    """`rounds` paired rounds of `count` transactions of `size` events each."""

    def run(append: Callable[[list[NewEvent]], object]) -> Callable[[], float]:
        def one_round() -> float:
            work = [memory_drafts(corpus, size) for _ in range(count)]
            return rate(count * size, lambda: [append(batch) for batch in work])

        return one_round

    return paired(rounds, run(before), run(after))


def report(name: str, result: Paired) -> dict[str, Any]:
    before, after, ratio = result.summary()
    print(
        f"{name:<22} before (client chain) {before:>9,.0f} ev/s   "
        f"after (server chain) {after:>9,.0f} ev/s   ratio {ratio:5.2f}x"
    )
    return {
        "metric": name,
        "before_events_per_s": round(before, 1),
        "after_events_per_s": round(after, 1),
        "ratio": round(ratio, 3),
        **result.samples(),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.server_chain")
    parser.add_argument("--dsn", default=os.environ.get("FACTLEDGER_TEST_DSN") or DEFAULT_DSN)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--singles", type=int, default=300, help="single appends per round")
    parser.add_argument("--batches", type=int, default=5, help="1,000-event batches per round")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    silence_logs()
    tag = uuid.uuid4().hex[:8]
    before_schema, after_schema = f"bench_client_{tag}", f"bench_server_{tag}"
    before = ClientChained(args.dsn, before_schema)
    after = PostgresEventLog(schema_dsn(args.dsn, after_schema))
    corpus = Corpus()
    try:
        results = [
            report(
                "append (1 per tx)",
                measure(args.rounds, args.singles, 1, before.append, after.append_many, corpus),
            ),
            report(
                f"append_many ({BATCH:,})",
                measure(args.rounds, args.batches, BATCH, before.append, after.append_many, corpus),
            ),
        ]
    finally:
        after.close()
        before.conn.close()
        with psycopg.connect(args.dsn, autocommit=True) as admin:
            for name in (before_schema, after_schema):
                admin.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
    if args.json:
        args.json.write_text(json.dumps({"results": results}, indent=2), encoding="utf-8")
    print(f"medians of {args.rounds} rounds of each, interleaved")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
