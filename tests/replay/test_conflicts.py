"""A conflict policy per tag: deny or hold an overwrite under another adapter."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from eventlog import ConflictPolicySet, InvalidInputError, NewEvent
from projections import CrossTaskKB, SQLiteMemoryStore
from replay import (
    NotAuthorizedError,
    add_operator,
    approve,
    as_of,
    blast_radius,
    diff,
    generate_key,
    history,
    read_operator_key,
    rebuild,
    reject,
    set_conflict_policy,
)
from replay.cli import main


def kb(store: SQLiteMemoryStore, adapter: str, task: str = "t") -> CrossTaskKB:
    return CrossTaskKB(store, producer_task_id=task, source_adapter=adapter)


def current(db_path: Path) -> list[tuple[str, str | None]]:
    with SQLiteMemoryStore(db_path) as store:
        return [
            (f.value, f.source_adapter) for f in kb(store, "x").subscribe("schema", scope="project")
        ]


@pytest.fixture
def trusted(db_path: Path) -> Path:
    """A fact under `schema` written by claude-code (position 1)."""
    with SQLiteMemoryStore(db_path) as store:
        kb(store, "claude-code").publish("schema", "users", "v1", scope="project")
    return db_path


def test_deny_records_a_foreign_overwrite_that_never_becomes_current(trusted: Path) -> None:
    """Under deny, another adapter's overwrite is recorded (history, blast-radius) and
    subscribers keep the previous version; the same adapter still overwrites."""
    set_conflict_policy(trusted, "schema", "deny")
    with SQLiteMemoryStore(trusted) as store:
        evil = kb(store, "codex").publish("schema", "users", "evil", scope="project")
    assert [("v1", "claude-code")] == current(trusted)
    with SQLiteMemoryStore(trusted) as store:
        v2 = kb(store, "claude-code").publish("schema", "users", "v2", scope="project")
    found = history(trusted, tag="schema")
    radius = blast_radius(trusted, source_adapter="codex")
    assert [("v2", "claude-code")] == current(trusted)
    assert [(evil.position, "denied", 1)] == [
        (h.position, h.status, h.contested) for h in found.held
    ]
    assert [1, v2.position] == [v.position for v in found.versions]
    assert [evil.position] == [h.position for h in radius.held]
    with pytest.raises(InvalidInputError):
        approve(trusted, evil.position)


def test_hold_waits_for_an_operator(trusted: Path) -> None:
    """Under hold, the overwrite is pending; approve makes it current, reject never does."""
    set_conflict_policy(trusted, "schema", "hold", scope="project")
    with SQLiteMemoryStore(trusted) as store:
        first = kb(store, "codex").publish("schema", "users", "v2", scope="project")
        second = kb(store, "gemini-cli").publish("schema", "users", "v3", scope="project")
    assert [("v1", "claude-code")] == current(trusted)
    approve(trusted, first.position)
    assert [("v2", "codex")] == current(trusted)
    reject(trusted, second.position, reason="not reviewed")
    assert [("v2", "codex")] == current(trusted)
    statuses = [(h.position, h.status) for h in history(trusted, tag="schema").held]
    assert [(first.position, "approved"), (second.position, "rejected")] == statuses


def test_diff_credits_the_approval_that_made_a_version_current(trusted: Path) -> None:
    """A held version made current by an approval is credited to the approval, not to its
    own publish nor to a later publish the policy held in turn."""
    set_conflict_policy(trusted, "schema", "hold", scope="project")
    with SQLiteMemoryStore(trusted) as store:
        start = store.event_log.head().position
        held = kb(store, "codex").publish("schema", "users", "v2", scope="project")
    approved = approve(trusted, held.position)
    with SQLiteMemoryStore(trusted) as store:
        kb(store, "gemini-cli").publish("schema", "users", "v3", scope="project")
        end = store.event_log.head().position
    [change] = diff(trusted, start, end, tag="schema").changed
    assert ("v1", "v2", approved, "fact_approved", "codex") == (
        change.old_value,
        change.new_value,
        change.by_position,
        change.by_kind,
        change.new_source_adapter,
    )


def test_an_approval_never_overrides_a_later_version(trusted: Path) -> None:
    """A pending version approved after its adapter's rival wrote again stays in history only."""
    set_conflict_policy(trusted, "schema", "hold")
    with SQLiteMemoryStore(trusted) as store:
        pending = kb(store, "codex").publish("schema", "users", "v2", scope="project")
        kb(store, "claude-code").publish("schema", "users", "v3", scope="project")
    approve(trusted, pending.position)
    assert [("v3", "claude-code")] == current(trusted)


@pytest.mark.parametrize("mode", ["deny", "hold"])
def test_concurrent_writers_leave_one_adapter_current(db_path: Path, mode: str) -> None:
    """Two adapters racing on one key: the first to commit owns it, every write of the other
    is held back, and the fold agrees with a rebuild."""
    with SQLiteMemoryStore(db_path) as store:
        store.add("learning", "creates the log")
    set_conflict_policy(db_path, "schema", mode)

    def write(adapter: str) -> None:
        with SQLiteMemoryStore(db_path) as store:
            for n in range(8):
                kb(store, adapter).publish("schema", "users", f"{adapter}-{n}", scope="project")

    threads = [threading.Thread(target=write, args=(a,)) for a in ("claude-code", "codex")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    found = history(db_path, tag="schema")
    owners = {v.source_adapter for v in found.versions}
    assert 1 == len(owners)
    assert {"denied" if mode == "deny" else "pending"} == {h.status for h in found.held}
    assert owners.isdisjoint({h.source_adapter for h in found.held})
    assert 16 == len(found.versions) + len(found.held)
    assert rebuild(db_path).matches


def test_policy_is_signed_once_the_log_has_an_operator(trusted: Path, tmp_path: Path) -> None:
    """With an operator, an unsigned policy is refused up front, and one appended around the
    API takes no effect; a signed one does."""
    generate_key(tmp_path / "op.key")
    key = read_operator_key(tmp_path / "op.key")
    add_operator(trusted, key.public, key=key)
    with pytest.raises(NotAuthorizedError):
        set_conflict_policy(trusted, "schema", "deny")
    with SQLiteMemoryStore(trusted) as store, store.write_transaction() as tx:
        tx.append([NewEvent(payload=ConflictPolicySet(tag="schema", on_conflict="deny"))])
    with SQLiteMemoryStore(trusted) as store:
        kb(store, "codex").publish("schema", "users", "v2", scope="project")
    assert [("v2", "codex")] == current(trusted)
    set_conflict_policy(trusted, "schema", "deny", key=key)
    with SQLiteMemoryStore(trusted) as store:
        kb(store, "claude-code").publish("schema", "users", "v3", scope="project")
    assert [("v2", "codex")] == current(trusted)


def test_as_of_honours_the_policy_in_force(trusted: Path) -> None:
    """Time travel folds the policy where it stands in the log."""
    with SQLiteMemoryStore(trusted) as store:
        kb(store, "codex").publish("schema", "users", "before", scope="project")
    policy = set_conflict_policy(trusted, "schema", "deny")
    with SQLiteMemoryStore(trusted) as store:
        kb(store, "claude-code").publish("schema", "users", "after", scope="project")
    with as_of(trusted, position=policy + 1) as view:
        then = [f.value for f in CrossTaskKB(view).subscribe("schema", scope="project")]
    assert ["before"] == then


def test_the_commands_set_approve_and_reject(trusted: Path) -> None:
    """`factledger policy set`, `approve` and `reject` drive the same library calls."""
    db = str(trusted)
    assert 0 == main(["policy", "set", "schema", "--on-conflict", "hold", "--db", db])
    with SQLiteMemoryStore(trusted) as store:
        first = kb(store, "codex").publish("schema", "users", "v2", scope="project")
        second = kb(store, "gemini-cli").publish("schema", "users", "v3", scope="project")
    assert 0 == main(["approve", str(first.position), "--db", db])
    assert 0 == main(["reject", str(second.position), "--db", db])
    assert 1 == main(["approve", str(second.position), "--db", db])
    assert [("v2", "codex")] == current(trusted)
