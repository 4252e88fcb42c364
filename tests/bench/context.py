"""What every metric group gets: the scale, a scratch folder on the disk under test, data."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from projections import CrossTaskKB, SQLiteMemoryStore
from tests.bench.corpus import Corpus
from tests.bench.scale import Scale

BUILD_BATCH = 1000
FACT_BATCH_EVERY = 10
"""In built logs, every tenth batch of 1,000 events is published facts; the rest are memories."""
FACT_TAGS = tuple(f"schema-{n:02d}" for n in range(50))
FACT_KEYS = 200


@dataclass
class Context:
    """Shared state of one benchmark run."""

    scale: Scale
    folder: Path
    corpus: Corpus = field(default_factory=Corpus)
    logs: dict[int, Path] = field(default_factory=dict)
    builds: dict[str, dict[str, Any]] = field(default_factory=dict)

    def path(self, name: str) -> Path:
        """A database path in the scratch folder."""
        return self.folder / f"{name}.db"

    def log_of(self, events: int) -> Path:
        """A log of `events` events (memories and facts), built once per run."""
        if events not in self.logs:
            path = self.path(f"log-{events}")
            self.builds[f"log-{events}"] = build_log(path, self.corpus, events)
            self.logs[events] = path
        return self.logs[events]


def build_log(path: Path, corpus: Corpus, events: int) -> dict[str, Any]:
    """Fill a new store with `events` events through the public API, in the fast mode.

    Batches of 1,000: `add_many` of memories, and every tenth batch `publish_many` of facts
    over 50 tags x 200 keys (so facts are overwritten about every 10,000 facts). Returns how
    it was built and how long it took.
    """
    start = time.perf_counter()
    store = SQLiteMemoryStore(path, durability="fast")
    kb = CrossTaskKB(store, run_id="bench-run", producer_task_id="bench-builder")
    try:
        for index in range(math.ceil(events / BUILD_BATCH)):
            size = min(BUILD_BATCH, events - index * BUILD_BATCH)
            if index % FACT_BATCH_EVERY == FACT_BATCH_EVERY - 1:
                kb.publish_many(corpus.facts(size, FACT_TAGS, FACT_KEYS), scope="project")
            else:
                store.add_many([memory.row() for memory in corpus.memories(size)])
        head = store.event_log.head().position
    finally:
        store.close()
    seconds = time.perf_counter() - start
    return {
        "events": head,
        "method": "SQLiteMemoryStore(durability='fast'): add_many of 1,000 memories per "
        "transaction, every tenth transaction publish_many of 1,000 facts",
        "seconds": round(seconds, 2),
        "bytes": path.stat().st_size,
    }
