"""The core classes and the replaced store's compatibility surface on top of them: a view
defines reads only, the store adds the writes, and `projections._compat` adds the replaced
store's helpers, counter and hook."""

from __future__ import annotations

import pytest

from eventlog import InvalidInputError
from projections import CrossTaskKB, MemoryView, PublishCounter, SQLiteMemoryStore
from projections._compat import get_global_counter
from projections._kb import KnowledgeBase
from projections._store import MemoryStore
from projections._view import STORE_WRITES

READS_A_STORE_ADDS = {"query_for_task", "read_model", "receipts", "secrets", "sync"}
"""What `SQLiteMemoryStore` adds to a view that is a read (a view refuses none of these
as a write: it has no log to sync or to read receipts from, nor writes to screen for
secrets, and `query_for_task` is the replaced store's)."""
COMPAT = {"add_episodic", "add_semantic", "add_procedural", "query_for_task"}


def public(cls: type) -> set[str]:
    return {name for name in dir(cls) if not name.startswith("_")}


def defined(cls: type) -> set[str]:
    """The names a class or its bases define, short of `object`."""
    return {name for base in cls.__mro__[:-1] for name in vars(base)}


def test_a_view_defines_reads_only() -> None:
    """`MemoryView` defines none of the store's writes; the store defines every one."""
    assert set() == STORE_WRITES & defined(MemoryView)
    assert STORE_WRITES <= defined(SQLiteMemoryStore)


def test_a_view_refuses_exactly_the_writes_a_store_adds() -> None:
    """Every public name the store adds to a view is a write the view refuses, or a read
    listed here; a new write on the store cannot be forgotten by the view."""
    added = public(SQLiteMemoryStore) - public(MemoryView)
    assert added - READS_A_STORE_ADDS == STORE_WRITES


def test_the_core_classes_hold_no_compatibility_surface() -> None:
    """The replaced store's helpers, counter and hook are `projections._compat`'s alone."""
    assert set() == COMPAT & defined(MemoryStore)
    assert {"counter", "_fire_hook"}.isdisjoint(defined(KnowledgeBase))
    assert issubclass(SQLiteMemoryStore, MemoryStore)
    assert issubclass(CrossTaskKB, KnowledgeBase)


def test_the_core_knowledge_base_counts_nothing(store: SQLiteMemoryStore) -> None:
    """Publishing and subscribing through `KnowledgeBase` moves no counter; the same calls
    through `CrossTaskKB` count as they did."""
    before = get_global_counter().snapshot()
    core = KnowledgeBase(store)
    core.publish("api", "url", "v1", scope="project")
    assert ["v1"] == [f.value for f in core.subscribe("api", scope="project")]
    assert before == get_global_counter().snapshot()
    counter = PublishCounter()
    facade = CrossTaskKB(store, counter=counter)
    facade.publish("api", "url", "v2", scope="project")
    assert ["v2"] == [f.value for f in facade.subscribe("api", scope="project")]
    assert (1, 1) == counter.snapshot()


@pytest.mark.parametrize("text", ["", " ", "\t\r\n", "\u3000", "\u2028\x85"])
def test_blank_text_is_refused_by_the_core_classes(store: SQLiteMemoryStore, text: str) -> None:
    """The content rule is the library's: `MemoryStore.add` and `KnowledgeBase.publish`
    refuse text that is empty or only whitespace, and nothing is written."""
    head = store.event_log.head()
    with pytest.raises(InvalidInputError, match="content is empty or only whitespace"):
        MemoryStore.add(store, "learning", text)
    with pytest.raises(InvalidInputError, match="value is empty or only whitespace"):
        KnowledgeBase(store).publish("api", "url", text, scope="project")
    assert head == store.event_log.head()
