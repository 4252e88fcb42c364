"""Bernstein compatibility: the replaced store's API, on top of the core classes.

An orchestrator that used the replaced store switches without rewriting its calls:
`SQLiteMemoryStore` is `MemoryStore` with the replaced store's helpers (`add_episodic`,
`add_semantic`, `add_procedural`, `query_for_task`), and `CrossTaskKB` is `KnowledgeBase`
with its process-wide `PublishCounter` and its `hook_dispatch` callback. The replaced
orchestrator's `BERNSTEIN_*` variables are read after the `FACTLEDGER_*` ones, in the one
table of settings (`projections._environment`, which the trust policy sits above, so it
cannot import this module). Nothing in the core depends on this module.
"""

from __future__ import annotations

import builtins
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence

from eventlog import InvalidTypeError
from eventlog.logs import get_logger
from projections._entries import Fact, MemoryEntry
from projections._kb import KnowledgeBase
from projections._store import MemoryStore
from projections._view import MemoryView

log = get_logger("factledger.kb")

HookDispatch = Callable[[str, dict[str, object]], None]
FACT_PUBLISHED_HOOK = "kb.fact_published"


class PublishCounter:
    """Thread-safe counts of facts published and facts yielded to subscribers."""

    __slots__ = ("_lock", "publish", "subscribe")

    def __init__(self) -> None:
        self.publish = 0
        self.subscribe = 0
        self._lock = threading.Lock()

    def incr_publish(self, count: int = 1) -> None:
        """Count published facts."""
        with self._lock:
            self.publish += count

    def incr_subscribe(self, count: int = 1) -> None:
        """Count facts yielded to subscribers."""
        with self._lock:
            self.subscribe += count

    def snapshot(self) -> tuple[int, int]:
        """(publish, subscribe), read together."""
        with self._lock:
            return self.publish, self.subscribe


_GLOBAL_COUNTER = PublishCounter()


def get_global_counter() -> PublishCounter:
    """The process-global counter every facade uses unless given its own."""
    return _GLOBAL_COUNTER


class SQLiteMemoryStore(MemoryStore):
    """Persistent agent memory on an append-only, hash-chained log (`MemoryStore`), with the
    replaced store's typed helpers."""

    def add_episodic(
        self,
        content: str,
        task_id: str,
        agent: str = "",
        model: str = "",
        tags: builtins.list[str] | None = None,
    ) -> int:
        """Record what happened (importance 0.8)."""
        return self.add("episodic", content, tags, 0.8, task_id, agent, model)

    def add_semantic(
        self, content: str, tags: builtins.list[str] | None = None, importance: float = 1.0
    ) -> int:
        """Record a fact about the codebase."""
        return self.add("semantic", content, tags, importance)

    def add_procedural(self, content: str, tags: builtins.list[str] | None = None) -> int:
        """Record how to do something (importance 0.9)."""
        return self.add("procedural", content, tags, 0.9)

    def query_for_task(
        self, role: str, context_files: builtins.list[str], limit: int = 10
    ) -> builtins.list[MemoryEntry]:
        """Relevant entries for a role and the first two path segments of its files."""
        if not isinstance(role, str):
            raise InvalidTypeError(f"role must be str, not {type(role).__name__}")
        if isinstance(context_files, (str, bytes)) or not isinstance(context_files, Iterable):
            raise InvalidTypeError(
                f"context_files must be a list of paths, not {type(context_files).__name__}"
            )
        files = builtins.list(context_files)
        for index, path in enumerate(files):
            if not isinstance(path, str):
                raise InvalidTypeError(
                    f"context_files[{index}] must be str, not {type(path).__name__}"
                )
        wanted = [role]
        for path in files:
            parts = path.replace("\\", "/").split("/")
            wanted.extend(part for part in parts[:2] if part and part != ".")
        usable = [t for t in dict.fromkeys(wanted) if t.strip() and "," not in t]
        return self.get_relevant(usable, limit=limit)

    def __enter__(self) -> SQLiteMemoryStore:
        return self


class CrossTaskKB(KnowledgeBase):
    """Publish/subscribe over the store (`KnowledgeBase`), counted by a `PublishCounter` (the
    process-wide one unless given another) and announced to `hook_dispatch` after each
    publish (a failing hook is logged, never fails the publish)."""

    def __init__(
        self,
        store: MemoryView,
        *,
        run_id: str = "",
        producer_task_id: str = "",
        source_adapter: str | None = None,
        hook_dispatch: HookDispatch | None = None,
        counter: PublishCounter | None = None,
        clock_ns: Callable[[], int] | None = None,
    ) -> None:
        super().__init__(
            store,
            run_id=run_id,
            producer_task_id=producer_task_id,
            source_adapter=source_adapter,
            clock_ns=clock_ns,
        )
        if hook_dispatch is not None and not callable(hook_dispatch):
            raise InvalidTypeError(
                f"hook_dispatch must be callable, not {type(hook_dispatch).__name__}"
            )
        if counter is not None and not isinstance(counter, PublishCounter):
            raise InvalidTypeError(
                f"counter must be a PublishCounter, not {type(counter).__name__}"
            )
        self._hook_dispatch = hook_dispatch
        self._counter = counter if counter is not None else _GLOBAL_COUNTER

    @property
    def counter(self) -> PublishCounter:
        """The publish/subscribe counter."""
        return self._counter

    def publish_many(
        self,
        items: Sequence[tuple[str, str, str]],
        *,
        scope: str,
        source_adapter: str | None = None,
        derived_from: Sequence[int] | None = None,
    ) -> list[Fact]:
        """`KnowledgeBase.publish_many`, counted, each fact then announced to the hook."""
        facts = super().publish_many(
            items, scope=scope, source_adapter=source_adapter, derived_from=derived_from
        )
        self._counter.incr_publish(len(facts))
        for fact in facts:
            self._fire_hook(fact)
        return facts

    def subscribe(
        self,
        tag: str,
        *,
        scope: str,
        read_only_from_adapters: list[str] | None = None,
    ) -> Iterator[Fact]:
        """`KnowledgeBase.subscribe`, each fact counted as it is yielded."""
        facts = super().subscribe(tag, scope=scope, read_only_from_adapters=read_only_from_adapters)
        return self._counted(facts)

    def _counted(self, facts: Iterator[Fact]) -> Iterator[Fact]:
        for fact in facts:
            self._counter.incr_subscribe()
            yield fact

    def _fire_hook(self, fact: Fact) -> None:
        if self._hook_dispatch is None:
            return
        payload: dict[str, object] = {
            "tag": fact.tag,
            "key": fact.key,
            "scope": fact.scope,
            "producer_task_id": fact.producer_task_id,
            "ts_ns": fact.ts_ns,
            "content_hash": fact.content_hash,
            "position": fact.position,
            "source_adapter": fact.source_adapter,
        }
        try:
            self._hook_dispatch(FACT_PUBLISHED_HOOK, payload)
        except Exception as exc:
            log.warning(
                "fact_hook_failed",
                hook_event=FACT_PUBLISHED_HOOK,
                position=fact.position,
                error_type=type(exc).__name__,
            )
