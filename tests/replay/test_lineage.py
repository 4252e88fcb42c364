"""Lineage: derivation recorded from recall receipts and declared sources, walked level by
level by `replay.lineage` and `factledger lineage`."""

from __future__ import annotations

from pathlib import Path

import pytest

from eventlog import InvalidInputError
from projections import SQLiteMemoryStore
from replay import Ledger
from replay.cli import main
from tests.replay.spread import three_hops


def test_lineage_lists_ancestors_and_descendants_by_level(db_path: Path, ledger: Ledger) -> None:
    """lineage() walks up and down the graph, level by level, bounded by depth."""
    poison, summary = three_hops(db_path)
    with SQLiteMemoryStore(db_path) as store:
        third = store.add("learning", "from the summary", [], derived_from=[summary])
    graph = ledger.lineage(poison)
    bounded = ledger.lineage(poison, depth=1)
    up = ledger.lineage(third, direction="up")
    assert [[summary], [third]] == [[n.position for n in level] for level in graph.descendants]
    assert [[summary]] == [[n.position for n in level] for level in bounded.descendants]
    assert [[summary], [1, poison]] == [[n.position for n in level] for level in up.ancestors]
    assert [] == up.descendants
    assert graph.descendants[0][0].via is not None
    assert up.ancestors[0][0].via is None


def test_a_source_past_the_head_is_refused(db_path: Path) -> None:
    """derived_from may only name positions already written; the log is unchanged."""
    with SQLiteMemoryStore(db_path) as store:
        store.add("learning", "one", [])
        with pytest.raises(InvalidInputError):
            store.add("learning", "two", [], derived_from=[5])
        with pytest.raises(InvalidInputError):
            store.add_many([{"type": "learning", "content": "x", "derived_from": [0]}])
        assert 1 == store.event_log.head().position


def test_the_lineage_command_walks_one_way(tmp_path: Path) -> None:
    """`factledger lineage POSITION --up --depth 1` prints the nearest ancestors as JSON."""
    db = tmp_path / "cli.db"
    _, summary = three_hops(db)
    code = main(["lineage", str(summary), "--up", "--depth", "1", "--json", "--db", str(db)])
    assert 0 == code
