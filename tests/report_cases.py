"""Incidents the report's tests render: an ordinary one (`tests.bench.incident`), one
whose writer and whose operator wrote markup, script, URLs and bidi controls, and one whose
operator erased a suspect write and what was derived from it."""

from __future__ import annotations

from pathlib import Path

from projections import CrossTaskKB, MemoryTrustPolicy, SQLiteMemoryStore, recall_memory
from replay import Ledger, generate_key, init_log, read_operator_key
from tests.bench.incident import write_incident

HOSTILE_KEYS = (
    "<script>document.title='pwned';window.pwned=1</script>",
    '<img src=x onerror="window.pwned=2">',
    "javascript:window.pwned=3",
)
HOSTILE_TAG = "</style><style>body{display:none}</style>"
HOSTILE_REASON = "</pre><script>window.pwned=4</script> \u202egnp.exe <a href=javascript:x>x</a>"
"""A quarantine's reason: markup, and a right-to-left override that would flip the text."""


def write_hostile_incident(path: Path, key_path: Path) -> None:
    """A log with an operator key at `key_path`; an `evil` adapter publishes facts whose tag
    and keys are markup; a `codex` task's prompt includes them; the operator quarantines
    them with a hostile reason."""
    generate_key(key_path)
    key = read_operator_key(key_path)
    init_log(path, key=key)
    with SQLiteMemoryStore(path) as store:
        evil = CrossTaskKB(store, producer_task_id="intruder-7", source_adapter="evil")
        for name in HOSTILE_KEYS:
            evil.publish(HOSTILE_TAG, name, "POISON", scope="project")
        recall_memory(
            store,
            [HOSTILE_TAG],
            trust_policy=MemoryTrustPolicy(trusted_adapters=frozenset({"evil"})),
            task_id="victim-1",
            run_id="run-9",
            adapter="codex",
        )
    with Ledger.open(path, read_only=False) as ledger:
        ledger.quarantine(source_adapter="evil", reason=HOSTILE_REASON, key=key)


ERASED_REASON = "leaked token in the api schema"


def write_erased_incident(path: Path, key_path: Path) -> int:
    """The ordinary incident (`tests.bench.incident`, 10 suspect events) with an operator key
    at `key_path`, whose suspect fact version (position 2) an operator erased with what was
    derived from it; return the erasure's position."""
    write_incident(path, 10)
    generate_key(key_path)
    key = read_operator_key(key_path)
    with Ledger.open(path, read_only=False) as ledger:
        ledger.add_operator(key.public, key=key)
        done = ledger.erase([2], reason=ERASED_REASON, key=key, descendants="erase")
    return done.position
