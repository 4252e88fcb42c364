"""A conflict policy per tag: the owners' versions become current, any other adapter's are
denied or held, whoever wrote first."""

from __future__ import annotations

import threading
from pathlib import Path

import msgspec
import pytest

from eventlog import (
    ConflictPolicySet,
    InvalidInputError,
    InvalidTypeError,
    NewEvent,
    open_log,
)
from projections import (
    CrossTaskKB,
    SQLiteMemoryStore,
)
from projections.internal import (
    inquiries,
)
from replay import (
    Ledger,
    NotAuthorizedError,
    add_operator,
    generate_key,
    history,
    init_postgres,
    policy_owners,
    read_operator_key,
    set_conflict_policy,
)
from replay.cli import main
from replay.keys import OperatorKey
from tests.postgres import PgLog

OWNER = ("claude-code",)


def kb(store: SQLiteMemoryStore, adapter: str | None, task: str = "t") -> CrossTaskKB:
    return CrossTaskKB(store, producer_task_id=task, source_adapter=adapter)


def publish(db_path: Path, adapter: str | None, value: str) -> int:
    with SQLiteMemoryStore(db_path) as store:
        return kb(store, adapter).publish("schema", "users", value, scope="project").position


def start(db_path: Path) -> None:
    """Create the log with an entry that is no fact."""
    with SQLiteMemoryStore(db_path) as store:
        store.add("learning", "creates the log")


def current(db_path: Path) -> list[tuple[str, str | None]]:
    with SQLiteMemoryStore(db_path) as store:
        return [
            (f.value, f.source_adapter) for f in kb(store, "x").subscribe("schema", scope="project")
        ]


def held(db_path: Path) -> list[tuple[int, str, str | None]]:
    return [(h.position, h.status, h.source_adapter) for h in history(db_path, tag="schema").held]


def head(db_path: Path) -> int:
    log = open_log(db_path, read_only=True)
    try:
        return log.head().position
    finally:
        log.close()


def policy_event(db_path: Path, position: int) -> ConflictPolicySet:
    log = open_log(db_path, read_only=True)
    try:
        record = log.event_at(position)
    finally:
        log.close()
    assert isinstance(record.payload, ConflictPolicySet)
    return record.payload


@pytest.fixture
def trusted(db_path: Path) -> Path:
    """A fact under `schema` written by claude-code (position 1)."""
    publish(db_path, "claude-code", "v1")
    return db_path


@pytest.fixture
def operator(trusted: Path, tmp_path: Path) -> OperatorKey:
    """An operator key registered in `trusted`'s log."""
    generate_key(tmp_path / "op.key")
    key = read_operator_key(tmp_path / "op.key")
    add_operator(trusted, key.public, key=key)
    return key


@pytest.mark.parametrize(("mode", "status"), [("deny", "denied"), ("hold", "pending")])
def test_an_untrusted_first_writer_never_owns_the_key(
    db_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str, status: str, ledger: Ledger
) -> None:
    """The reproduction: under a policy set where claude-code is trusted, codex publishes a
    key first. Its version is denied or held, and claude-code's later one is current."""
    start(db_path)
    monkeypatch.setenv("FACTLEDGER_TRUST_ADAPTERS", "claude-code")
    ledger.set_conflict_policy("schema", mode)
    poison = publish(db_path, "codex", "POISON")
    assert [] == current(db_path)
    publish(db_path, "claude-code", "v1")
    assert [("v1", "claude-code")] == current(db_path)
    assert [(poison, status, "codex")] == held(db_path)
    assert [None] == [h.contested for h in ledger.history(tag="schema").held]
    assert ledger.rebuild().matches


def test_deny_records_a_non_owners_version_that_never_becomes_current(
    trusted: Path, ledger: Ledger
) -> None:
    """Under deny, a non-owner's version is recorded (history, blast-radius) and subscribers
    keep the owner's; the owner still overwrites."""
    ledger.set_conflict_policy("schema", "deny", owners=OWNER)
    evil = publish(trusted, "codex", "evil")
    assert [("v1", "claude-code")] == current(trusted)
    with SQLiteMemoryStore(trusted) as store:
        v2 = kb(store, "claude-code").publish("schema", "users", "v2", scope="project")
    found = ledger.history(tag="schema")
    radius = ledger.blast_radius(source_adapter="codex")
    assert [("v2", "claude-code")] == current(trusted)
    assert [(evil, "denied", 1)] == [(h.position, h.status, h.contested) for h in found.held]
    assert [1, v2.position] == [v.position for v in found.versions]
    assert [evil] == [h.position for h in radius.held]
    with pytest.raises(InvalidInputError):
        ledger.approve(evil)


def test_hold_waits_for_an_operator(trusted: Path, ledger: Ledger) -> None:
    """Under hold, a non-owner's version is pending; approve makes it current, reject never
    does."""
    ledger.set_conflict_policy("schema", "hold", owners=OWNER, scope="project")
    first, second = publish(trusted, "codex", "v2"), publish(trusted, "gemini-cli", "v3")
    assert [("v1", "claude-code")] == current(trusted)
    ledger.approve(first)
    assert [("v2", "codex")] == current(trusted)
    ledger.reject(second, reason="not reviewed")
    assert [("v2", "codex")] == current(trusted)
    assert [(first, "approved", "codex"), (second, "rejected", "gemini-cli")] == held(trusted)


def test_diff_credits_the_approval_that_made_a_version_current(
    trusted: Path, ledger: Ledger
) -> None:
    """A held version made current by an approval is credited to the approval, not to its
    own publish nor to a later publish the policy held in turn."""
    ledger.set_conflict_policy("schema", "hold", scope="project")
    with SQLiteMemoryStore(trusted) as store:
        start = store.event_log.head().position
        held = kb(store, "codex").publish("schema", "users", "v2", scope="project")
    approved = ledger.approve(held.position)
    with SQLiteMemoryStore(trusted) as store:
        kb(store, "gemini-cli").publish("schema", "users", "v3", scope="project")
        end = store.event_log.head().position
    [change] = ledger.diff(start, end, tag="schema").changed
    assert ("v1", "v2", approved, "fact_approved", "codex") == (
        change.old_value,
        change.new_value,
        change.by_position,
        change.by_kind,
        change.new_source_adapter,
    )


def test_an_approval_never_overrides_a_later_version(trusted: Path, ledger: Ledger) -> None:
    """A pending version approved after an owner wrote again stays in history only."""
    ledger.set_conflict_policy("schema", "hold", owners=OWNER)
    pending = publish(trusted, "codex", "v2")
    publish(trusted, "claude-code", "v3")
    ledger.approve(pending)
    assert [("v3", "claude-code")] == current(trusted)


def test_every_owner_writes_and_last_write_wins_among_them(trusted: Path, ledger: Ledger) -> None:
    """Several owners overwrite each other by position; a non-owner between them is held."""
    ledger.set_conflict_policy("schema", "deny", owners=["gemini-cli", "claude-code"])
    publish(trusted, "gemini-cli", "v2")
    evil = publish(trusted, "codex", "evil")
    publish(trusted, "claude-code", "v3")
    assert [("v3", "claude-code")] == current(trusted)
    assert [(evil, "denied", "codex")] == held(trusted)


def test_an_operators_write_under_no_adapter_counts_as_an_owners(
    trusted: Path, ledger: Ledger
) -> None:
    """A version written under no adapter (an operator's, trusted by default prompts) becomes
    current under a policy that names no owner at all, and a trusted adapter's does not."""
    ledger.set_conflict_policy("schema", "deny", owners=[])
    late = publish(trusted, "claude-code", "v2")
    publish(trusted, None, "from the operator")
    assert [("from the operator", None)] == current(trusted)
    assert [(late, "denied", "claude-code")] == held(trusted)


def test_a_non_owners_version_from_before_the_policy_stays_until_an_owner_writes(
    db_path: Path, ledger: Ledger
) -> None:
    """A policy applies to versions written after it: codex's version, current when the
    policy is set, stays current (as-of agrees), codex's next is denied, and the owner's next
    replaces it."""
    publish(db_path, "codex", "before")
    policy = ledger.set_conflict_policy("schema", "deny", owners=OWNER)
    assert [("before", "codex")] == current(db_path)
    again = publish(db_path, "codex", "again")
    assert [("before", "codex")] == current(db_path)
    publish(db_path, "claude-code", "after")
    assert [("after", "claude-code")] == current(db_path)
    assert [(again, "denied", "codex")] == held(db_path)
    with ledger.as_of(position=policy + 1) as view:
        then = [f.value for f in CrossTaskKB(view).subscribe("schema", scope="project")]
    assert ["before"] == then


def test_allow_lets_every_version_become_current_again(trusted: Path, ledger: Ledger) -> None:
    """Setting allow after deny restores last write wins; allow records no owners."""
    ledger.set_conflict_policy("schema", "deny", owners=OWNER)
    allowed = ledger.set_conflict_policy("schema", "allow")
    publish(trusted, "codex", "v2")
    assert [("v2", "codex")] == current(trusted)
    assert msgspec.UNSET is policy_event(trusted, allowed).owners


def test_the_default_owners_are_the_adapters_trusted_where_the_policy_is_set(
    trusted: Path, monkeypatch: pytest.MonkeyPatch, ledger: Ledger
) -> None:
    """The caller's trust policy names the owners, and the event records them: trusting
    another adapter afterwards changes nothing the policy decides."""
    monkeypatch.setenv("FACTLEDGER_TRUST_ADAPTERS", "gemini-cli, claude-code")
    position = ledger.set_conflict_policy("schema", "deny")
    assert ("claude-code", "gemini-cli") == policy_event(trusted, position).owners
    monkeypatch.setenv("FACTLEDGER_TRUST_ADAPTERS", "codex")
    evil = publish(trusted, "codex", "evil")
    assert [(evil, "denied", "codex")] == held(trusted)
    monkeypatch.delenv("FACTLEDGER_TRUST_ADAPTERS")
    position = ledger.set_conflict_policy("schema", "hold")
    assert () == policy_event(trusted, position).owners


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda db: set_conflict_policy(db, "schema", "allow", owners=OWNER), InvalidInputError,
         "owners apply to deny and hold"),
        (lambda db: set_conflict_policy(db, "schema", "deny", owners="codex"), InvalidTypeError,
         "list of adapter names"),
        (lambda db: set_conflict_policy(db, "schema", "deny", owners=["\u0441odex"]),
         InvalidInputError, "may hold only ASCII"),
        (lambda db: set_conflict_policy(db, "schema", "deny", owners=["codex "]),
         InvalidInputError, "may hold only ASCII"),
        (lambda db: set_conflict_policy(db, "schema", "deny", owners=[f"a{n}" for n in range(65)]),
         InvalidInputError, "the limit is 64"),
        (lambda db: set_conflict_policy(db, "schema", "Deny"), InvalidInputError,
         "on_conflict must be one of"),
    ],
    ids=["owners-under-allow", "a-string", "lookalike", "whitespace", "too-many", "mode"],
)  # fmt: skip
def test_bad_owners_are_refused_and_nothing_is_written(
    trusted: Path, call: object, error: type[Exception], match: str
) -> None:
    """Owners under allow, a single string, a lookalike name, too many: a clear error, the
    log head unchanged."""
    before = head(trusted)
    with pytest.raises(error, match=match):
        call(trusted)  # type: ignore[operator]
    assert before == head(trusted)


def test_with_the_trust_policy_off_the_owners_must_be_named(
    trusted: Path, monkeypatch: pytest.MonkeyPatch, ledger: Ledger
) -> None:
    """Trust switched off trusts every adapter, which names no owner: refused until owners
    are given."""
    monkeypatch.setenv("FACTLEDGER_TRUST_POLICY", "off")
    before = head(trusted)
    with pytest.raises(InvalidInputError, match="trust policy is switched off"):
        ledger.set_conflict_policy("schema", "deny")
    assert before == head(trusted)
    assert ("codex",) == policy_owners("deny", ["codex", "codex"])
    position = ledger.set_conflict_policy("schema", "deny", owners=["codex"])
    assert ("codex",) == policy_event(trusted, position).owners


def test_a_policy_written_before_owners_existed_keeps_the_first_writer_as_owner(
    db_path: Path,
) -> None:
    """A stored policy without `owners` means what it meant: the adapter of the version
    current when another is written owns the key, so the first writer does."""
    publish(db_path, "codex", "first")
    log = open_log(db_path)
    log.append(NewEvent(payload=ConflictPolicySet(tag="schema", on_conflict="deny")))
    log.close()
    late = publish(db_path, "claude-code", "late")
    assert [("first", "codex")] == current(db_path)
    assert [(late, "denied", "claude-code")] == held(db_path)


@pytest.mark.parametrize("mode", ["deny", "hold"])
def test_concurrent_writers_leave_the_owner_current(
    db_path: Path, mode: str, ledger: Ledger
) -> None:
    """Two adapters racing on one key: whichever commits first, every version of the owner
    is current in turn and every version of the other is held back; the fold agrees with a
    rebuild."""
    start(db_path)
    ledger.set_conflict_policy("schema", mode, owners=OWNER)

    def write(adapter: str) -> None:
        with SQLiteMemoryStore(db_path) as store:
            for n in range(8):
                kb(store, adapter).publish("schema", "users", f"{adapter}-{n}", scope="project")

    threads = [threading.Thread(target=write, args=(a,)) for a in ("codex", "claude-code")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    found = ledger.history(tag="schema")
    assert ["claude-code"] * 8 == [v.source_adapter for v in found.versions]
    assert [("claude-code-7", "claude-code")] == current(db_path)
    assert {"denied" if mode == "deny" else "pending"} == {h.status for h in found.held}
    assert {"codex"} == {h.source_adapter for h in found.held} and 8 == len(found.held)
    assert ledger.rebuild().matches


def test_policy_is_signed_once_the_log_has_an_operator(
    trusted: Path, operator: OperatorKey, ledger: Ledger
) -> None:
    """With an operator, an unsigned policy is refused up front, and one appended around the
    API takes no effect, forged owners and all; a signed one does."""
    with pytest.raises(NotAuthorizedError):
        ledger.set_conflict_policy("schema", "deny", owners=OWNER)
    forged = ConflictPolicySet(tag="schema", on_conflict="deny", owners=("codex",))
    with SQLiteMemoryStore(trusted) as store, store.write_transaction() as tx:
        tx.append([NewEvent(payload=forged)])
    publish(trusted, "gemini-cli", "v2")
    assert [("v2", "gemini-cli")] == current(trusted)
    ledger.set_conflict_policy("schema", "deny", owners=OWNER, key=operator)
    publish(trusted, "codex", "v3")
    assert [("v2", "gemini-cli")] == current(trusted)


def test_owners_rewritten_under_an_operators_signature_take_no_effect(
    trusted: Path, operator: OperatorKey, ledger: Ledger
) -> None:
    """A signed policy copied with its owners changed (the signature kept) is refused when
    folded as a bad signature: the adapter that forged it still owns nothing."""
    signed = ledger.set_conflict_policy("schema", "deny", owners=OWNER, key=operator)
    original = policy_event(trusted, signed)
    forged = msgspec.structs.replace(original, owners=("codex",))
    with SQLiteMemoryStore(trusted) as store, store.write_transaction() as tx:
        [record] = tx.append([NewEvent(payload=forged, producer_task_id="intruder")])
        refused = inquiries.unauthorized(tx, [record.position])
    evil = publish(trusted, "codex", "evil")
    assert [("v1", "claude-code")] == current(trusted)
    assert [(evil, "denied", "codex")] == held(trusted)
    assert ["bad_signature"] == [row.reason for row in refused]


def test_the_commands_set_approve_and_reject(
    trusted: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`factledger policy set`, `approve` and `reject` drive the same library calls, and an
    operator's `history` lists the held versions to decide on."""
    db = str(trusted)
    assert 0 == main(["policy", "set", "schema", "--on-conflict", "hold", "--db", db])
    first, second = publish(trusted, "codex", "v2"), publish(trusted, "gemini-cli", "v3")
    capsys.readouterr()
    assert 0 == main(["history", "--tag", "schema", "--json", "--db", db])
    shown = msgspec.json.decode(capsys.readouterr().out)["held"]
    assert [(first, "pending"), (second, "pending")] == [
        (h["position"], h["status"]) for h in shown
    ]
    assert 0 == main(["approve", str(first), "--db", db])
    assert 0 == main(["reject", str(second), "--db", db])
    assert 1 == main(["approve", str(second), "--db", db])
    assert [("v2", "codex")] == current(trusted)


def test_policy_set_names_its_owners(
    trusted: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--owner` names each owner; without it the trusted adapters are, and the output says
    which; `--owner` under allow is one line on stderr, exit 1, nothing written."""
    db = str(trusted)
    argv = ["policy", "set", "schema", "--on-conflict", "deny", "--db", db]
    assert 0 == main([*argv, "--owner", "gemini-cli", "--owner", "claude-code", "--json"])
    assert ["claude-code", "gemini-cli"] == msgspec.json.decode(capsys.readouterr().out)["owners"]
    monkeypatch.setenv("FACTLEDGER_TRUST_ADAPTERS", "claude-code")
    assert 0 == main(argv)
    assert "owners: claude-code" in capsys.readouterr().out
    before = head(trusted)
    allow = ["policy", "set", "schema", "--on-conflict", "allow", "--owner", "codex", "--db", db]
    assert 1 == main(allow)
    err = capsys.readouterr().err
    assert "owners apply to deny and hold" in err and 1 == len(err.strip().splitlines())
    assert before == head(trusted)
    evil = publish(trusted, "codex", "evil")
    assert [(evil, "denied", "codex")] == held(trusted)


def test_an_untrusted_first_writer_on_postgresql_owns_nothing(pg: PgLog, tmp_path: Path) -> None:
    """On a log in PostgreSQL, an agent login bound to codex publishes first through its
    host's cache; the operator's policy (set through another host's cache) makes
    claude-code's later version current on every host, and codex's is held."""
    from eventlog.postgres_admin import add_agent

    key = tmp_path / "op.key"
    generate_key(key)
    init_postgres(pg.dsn, role_prefix=pg.roles, key=key)
    add_agent(pg.dsn, f"{pg.roles}_codex", "codex", role_prefix=pg.roles)
    operator_cache, agent_cache = tmp_path / "operator.db", tmp_path / "agent.db"
    with Ledger.open(pg.dsn, cache=operator_cache, read_only=False) as ledger:
        ledger.set_conflict_policy("schema", "hold", owners=OWNER, key=key)
    agent_log = pg.as_role(f"{pg.roles}_codex")
    with SQLiteMemoryStore(agent_cache, log=agent_log, source_adapter="codex") as store:
        poison = kb(store, None).publish("schema", "users", "POISON", scope="project").position
    with SQLiteMemoryStore(operator_cache, log=pg.dsn) as store:
        kb(store, "claude-code").publish("schema", "users", "v1", scope="project")
    for cache, log in ((operator_cache, pg.dsn), (tmp_path / "third.db", pg.dsn)):
        with SQLiteMemoryStore(cache, log=log) as store:
            found = kb(store, "x").subscribe("schema", scope="project")
            assert [("v1", "claude-code")] == [(f.value, f.source_adapter) for f in found]
    with Ledger.open(pg.dsn, cache=operator_cache) as ledger:
        held_now = ledger.history(tag="schema").held
    assert [(poison, "pending", "codex")] == [
        (h.position, h.status, h.source_adapter) for h in held_now
    ]
