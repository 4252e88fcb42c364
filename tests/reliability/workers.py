"""Child processes the reliability tests start, kill and listen to.

Run as `python -m tests.reliability.workers KIND ARGS...`. A worker reports on stdout, one
flushed line per event, and only after the call it reports on has returned:

    ack add NAME BATCH POS,POS,...       add_many returned these entry ids
    ack publish NAME BATCH POS,POS,...   publish_many returned facts at these positions
    ack fact SCOPE KEY POS VALUE         publish returned a fact at POS
    error TYPE MESSAGE                   a call raised (the worker carries on)
    ready                                opened, waiting for 'go' on stdin
    done PUBLISHED SUBSCRIBED YIELDED    the counter's snapshot, and the facts subscribe gave
"""

from __future__ import annotations

import sys

from projections import CrossTaskKB, PublishCounter, SQLiteMemoryStore

CRASH_BATCH = 3
"""Rows per add_many and facts per publish_many in the crash writer: small, so a kill often
lands inside a batch's transaction."""
CRASH_KEYS = 7
CRASH_TAG = "crash"
CRASH_RUN = "crash-run"
SHARED_TAG = "shared"
SHARED_RUN = "shared-run"


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def crash_writer(db_path: str, name: str) -> None:
    """Add and publish in small batches forever, acknowledging each batch once it returns."""
    store = SQLiteMemoryStore(db_path, durability="fast")
    kb = CrossTaskKB(store, run_id=CRASH_RUN, producer_task_id=name)
    batch = 0
    while True:
        rows = [
            {
                "type": "learning",
                "content": f"{name}:{batch}:{i}",
                "tags": [CRASH_TAG, f"b{batch % 5}"],
                "task_id": name,
            }
            for i in range(CRASH_BATCH)
        ]
        ids = store.add_many(rows)
        _say(f"ack add {name} {batch} {','.join(map(str, ids))}")
        items = [
            (CRASH_TAG, f"k{(batch + i) % CRASH_KEYS}", f"{name}:{batch}:{i}")
            for i in range(CRASH_BATCH)
        ]
        facts = kb.publish_many(items, scope="project" if batch % 2 else "run")
        _say(f"ack publish {name} {batch} {','.join(str(f.position) for f in facts)}")
        batch += 1


def publisher(db_path: str, name: str, count: int, keys: int, offset: int) -> None:
    """Wait for 'go' on stdin, then publish `count` facts on overlapping keys, alternating
    scopes, and subscribe now and then; report every acknowledgement and every exception."""
    counter = PublishCounter()
    try:
        store = SQLiteMemoryStore(db_path, durability="fast")
        kb = CrossTaskKB(store, run_id=SHARED_RUN, producer_task_id=name, counter=counter)
    except Exception as exc:
        _say(f"error {type(exc).__name__} {exc}")
        return
    _say("ready")
    sys.stdin.readline()
    yielded = 0
    for i in range(count):
        scope = "project" if i % 2 == 0 else "run"
        key = f"k{(i + offset) % keys}"
        try:
            fact = kb.publish(SHARED_TAG, key, f"{name}:{i}", scope=scope)
            _say(f"ack fact {scope} {key} {fact.position} {fact.value}")
            if i % 50 == 49:
                yielded += len(list(kb.subscribe(SHARED_TAG, scope=scope)))
        except Exception as exc:
            _say(f"error {type(exc).__name__} {exc}")
    store.close()
    published, subscribed = counter.snapshot()
    _say(f"done {published} {subscribed} {yielded}")


def main(argv: list[str]) -> None:
    kind, *args = argv
    if kind == "crash":
        crash_writer(args[0], args[1])
    elif kind == "publish":
        publisher(args[0], args[1], int(args[2]), int(args[3]), int(args[4]))
    else:
        raise SystemExit(f"unknown worker {kind!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
