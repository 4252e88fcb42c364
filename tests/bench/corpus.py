"""Deterministic, realistic test data: memory notes, Zipf-distributed tags, published facts.

Tags follow what an orchestrator writes (see `SQLiteMemoryStore.query_for_task`): a role and
the first path segments of the files a task touched. A few tags (roles, top-level folders)
sit on a large share of entries and a long tail is rare, so tag popularity is drawn from a
Zipf law (s = 1) over `TAG_VOCABULARY` tags; each entry carries 1 to 3 distinct tags, and
queries draw their tags from the same law, because tasks ask about busy areas as often as
they write about them.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TypeVar

from eventlog import MemoryAdded, NewEvent

AREA_TAGS = (
    "backend", "tests", "frontend", "api", "docs", "src", "qa", "security",
    "infra", "database", "auth", "ui", "ci", "cli", "build", "schema",
)  # fmt: skip
TAG_VOCABULARY = 1000
ZIPF_S = 1.0
TAGS_PER_ENTRY = (1, 3)
TYPES = ("learning", "decision", "convention", "episodic", "semantic", "procedural")
ADAPTERS = ((None, 0.60), ("claude-code", 0.25), ("codex", 0.10), ("gemini-cli", 0.05))
"""Who wrote an entry: untagged operator writes, then adapters, with these shares."""
SOURCE_TEXT = (
    "the handler retries requests when the upstream service times out and logs the "
    "attempt count use pytest fixtures for database setup never mock the clock in "
    "integration tests schema migration must run before the api server starts cache "
    "keys include the tenant id rate limiter config lives in settings toml avoid "
    "global state in workers prefer small pure functions the build uses uv and ruff"
)
WORDS = tuple(SOURCE_TEXT.split())
TEXTS = 512
T = TypeVar("T")


def tag_names() -> list[str]:
    """The tag vocabulary, most popular first."""
    rest = (f"module-{n:03d}" for n in itertools.count())
    return [*AREA_TAGS, *itertools.islice(rest, TAG_VOCABULARY - len(AREA_TAGS))]


@dataclass(frozen=True)
class Memory:
    """One memory entry to write."""

    type: str
    content: str
    tags: tuple[str, ...]
    importance: float
    task_id: str | None
    source_adapter: str | None

    def row(self) -> dict[str, object]:
        """The keywords `SQLiteMemoryStore.add` and `add_many` take."""
        return {
            "type": self.type,
            "content": self.content,
            "tags": list(self.tags),
            "importance": self.importance,
            "task_id": self.task_id,
            "source_adapter": self.source_adapter,
        }


class Corpus:
    """Reproducible memories, facts and tag queries from one seed."""

    def __init__(self, seed: int = 7) -> None:
        self._rng = random.Random(seed)
        self.tags = tag_names()
        self._tag_weights = list(
            itertools.accumulate(1 / (rank**ZIPF_S) for rank in range(1, len(self.tags) + 1))
        )
        self._texts = [self._sentence(80, 400) for _ in range(TEXTS)]
        self._adapters = [a for a, _ in ADAPTERS]
        self._adapter_weights = list(itertools.accumulate(w for _, w in ADAPTERS))
        self._serial = itertools.count()

    def _sentence(self, shortest: int, longest: int) -> str:
        size = self._rng.randint(shortest, longest)
        words: list[str] = []
        while sum(len(w) + 1 for w in words) < size:
            words.append(self._rng.choice(WORDS))
        return " ".join(words)[:size].strip()

    def draw_tags(self, count: int) -> tuple[str, ...]:
        """`count` distinct tags drawn by popularity."""
        chosen: dict[str, None] = {}
        while len(chosen) < count:
            tag = self._rng.choices(self.tags, cum_weights=self._tag_weights)[0]
            chosen[tag] = None
        return tuple(chosen)

    def memory(self) -> Memory:
        """One realistic memory entry (80 to 400 characters, 1 to 3 tags)."""
        serial = next(self._serial)
        return Memory(
            type=TYPES[serial % len(TYPES)],
            content=f"{self._rng.choice(self._texts)} (note {serial})",
            tags=self.draw_tags(self._rng.randint(*TAGS_PER_ENTRY)),
            importance=round(self._rng.uniform(0.1, 1.0), 2),
            task_id=f"task-{serial % 5000}",
            source_adapter=self._rng.choices(self._adapters, cum_weights=self._adapter_weights)[0],
        )

    def memories(self, count: int) -> list[Memory]:
        """`count` memory entries."""
        return [self.memory() for _ in range(count)]

    def fact_value(self) -> str:
        """A published fact's value: a short JSON-ish schema note."""
        return '{"note": "' + self._rng.choice(self._texts)[:200] + '"}'

    def facts(self, count: int, tags: Sequence[str], keys: int) -> list[tuple[str, str, str]]:
        """`count` (tag, key, value) facts over `tags`, cycling through `keys` keys per tag."""
        items = []
        for n in range(count):
            tag = tags[n % len(tags)]
            key = f"key-{(n // len(tags)) % keys:04d}"
            items.append((tag, key, self.fact_value()))
        return items

    def queries(self, count: int, tags_each: int = 3) -> list[tuple[str, ...]]:
        """`count` tag queries of `tags_each` distinct tags, drawn by popularity."""
        return [self.draw_tags(tags_each) for _ in range(count)]


def chunks(items: Sequence[T], size: int) -> Iterator[Sequence[T]]:
    """Consecutive slices of at most `size` items."""
    for start in range(0, len(items), size):
        yield items[start : start + size]


def memory_drafts(corpus: Corpus, count: int) -> list[NewEvent]:
    """Realistic memory events (80 to 400 characters of content each)."""
    return [
        NewEvent(
            payload=MemoryAdded(type=m.type, content=m.content, tags=m.tags, task_id=m.task_id),
            producer_task_id="bench-task",
            source_adapter=m.source_adapter,
        )
        for m in corpus.memories(count)
    ]
