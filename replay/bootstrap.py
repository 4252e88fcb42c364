"""Making a log with its first operator in one step (README, "Operators and signing").

A log without an operator key is open: the first `operator add` makes its sole operator, and
whoever reaches a new log first (an injected agent with a shell, an agent's PostgreSQL login)
could win that race for good. So `init_log` (a file) and `init_postgres` (a PostgreSQL schema
and its roles) register the first operator key, self-signed, in the transaction that creates
the log: nobody ever sees the log without it. A file that holds the replaced store's `memory`
table gets its rows imported in that same transaction, signed by the key, so their claims
stay honoured.

Run on a log that exists, either changes nothing in it (`init_postgres` re-grants its
roles' privileges) and, given a key, checks the key is one of the log's operators.
"""

from __future__ import annotations

import os
from contextlib import closing
from pathlib import Path

import msgspec

from eventlog import (
    InvalidInputError,
    LogExistsError,
    LogMissingError,
    NewEvent,
    SQLiteEventLog,
    open_log,
)
from eventlog.checks import check_path, is_dsn
from projections import (
    SQLiteMemoryStore,
)
from projections.internal import (
    LegacyFile,
    chosen_mode,
    holds_legacy_table,
)
from replay.keys import KeySource, OperatorKey, operator_key
from replay.ledger import Ledger
from replay.operators import OPERATOR, Actor, first_operator, sign
from replay.transfer import ImportReport, import_report, legacy_rows, not_imported


class LogMade(msgspec.Struct, frozen=True, kw_only=True):
    """What `init_log` or `init_postgres` found or made."""

    log_id: str
    created: bool
    """False when the log existed already (nothing in it was changed)."""
    operator_key_id: str | None
    """The operator key given, registered at position 1 of a new log, or found registered
    in an existing one; None when no key was given."""
    operators: int
    """How many operator keys the log has (0: it is open, see `Ledger.operators`)."""
    imported: ImportReport | None = None
    """For a new log in a file holding the replaced store's `memory` table: its import."""
    roles: dict[str, str] | None = None
    """For a PostgreSQL log: its owner, writer and reader roles."""


def init_log(
    db_path: str | os.PathLike[str],
    *,
    key: KeySource | None = None,
    actor: Actor = OPERATOR,
) -> LogMade:
    """Create the log file `db_path` and its read model, its first event registering the
    operator key `key` (signed by itself, `actor` acting). Without `key` the log starts open.

    A legacy `memory` table in the file is imported: with `key`, signed by it (the claims
    honoured) in the same transaction, so a bad row leaves no log at all; without one,
    unsigned, as the store imports it on open. On a file that holds a log, nothing is
    written; given `key`, it must be one of that log's operator keys."""
    path = check_path(db_path)
    signer = None if key is None else operator_key(key)
    if holds_log(path):
        return _existing(path, signer)
    rows = _legacy(path, actor) if signer is not None else []
    fresh = not_imported(set(), rows)

    def first(log_id: str) -> list[NewEvent]:
        if signer is None:
            return []
        imports = [sign(log_id, e.payload, actor=actor, key=signer) for e in fresh]
        return [first_operator(log_id, signer, actor=actor), *imports]

    try:
        made = SQLiteEventLog(path, first_events=first)
    except LogExistsError:
        return _existing(path, signer)
    with closing(made):
        log_id = made.log_id
    SQLiteMemoryStore(
        path,
        source_adapter=actor.source_adapter,
        producer_task_id=actor.producer_task_id,
        run_id=actor.run_id,
    ).close()
    return LogMade(
        log_id=log_id,
        created=True,
        operator_key_id=None if signer is None else signer.key_id,
        operators=0 if signer is None else 1,
        imported=(
            None
            if not rows
            else import_report(path, rows, list(range(2, len(fresh) + 2)), signed=True)
        ),
    )


def init_postgres(
    dsn: str,
    *,
    role_prefix: str = "factledger",
    key: KeySource | None = None,
    actor: Actor = OPERATOR,
) -> LogMade:
    """Create the PostgreSQL log `dsn` names (if absent) and its roles (`init_schema`), its
    first event registering the operator key `key` (self-signed, `actor` acting) in the
    transaction that creates the schema. Without an operator key, agent logins can write
    nothing until one is registered. Safe to run again: on a log that exists, the roles'
    privileges are granted again and nothing is written; given `key`, it must be one of
    that log's operator keys."""
    from eventlog.postgres_admin import init_schema

    signer = None if key is None else operator_key(key)
    made: list[str] = []

    def first(log_id: str) -> list[NewEvent]:
        made.append(log_id)
        return _first(log_id, signer, actor)

    try:
        roles = init_schema(dsn, role_prefix=role_prefix, first_events=first)
    except LogExistsError:
        roles = init_schema(dsn, role_prefix=role_prefix)
    names = roles._asdict()
    if not made:
        return msgspec.structs.replace(_existing(dsn, signer), roles=names)
    return LogMade(
        log_id=made[0],
        created=True,
        operator_key_id=None if signer is None else signer.key_id,
        operators=0 if signer is None else 1,
        roles=names,
    )


def holds_log(path: str | os.PathLike[str]) -> bool:
    """Whether the file at `path` holds a factledger log (opened read-only to see); a file
    holding a log's remains is refused (`LogMissingError`)."""
    try:
        open_log(path, read_only=True).close()
    except LogMissingError as exc:
        if exc.remnants:
            raise
        return False
    return True


def _legacy(path: str, actor: Actor) -> list[NewEvent]:
    """The import of the replaced store's `memory` table in the file at `path`, if any."""
    if not Path(path).exists():
        return []
    with closing(LegacyFile(path)) as legacy:
        if not holds_legacy_table(legacy):
            return []
    return legacy_rows(path, actor, secrets=chosen_mode(None))


def _first(log_id: str, signer: OperatorKey | None, actor: Actor) -> list[NewEvent]:
    return [] if signer is None else [first_operator(log_id, signer, actor=actor)]


def _existing(target: str, signer: OperatorKey | None) -> LogMade:
    """An existing log, left as it is; `signer` must be one of its operator keys."""
    with Ledger.open(target) as ledger:
        found = ledger.operators()
        log_id = ledger.log_id
    active = [o for o in found.operators if o.removed_position is None]
    if signer is not None and signer.key_id not in {o.key_id for o in active}:
        registered = ", ".join(f"{o.key_id} ({o.name})" for o in active) or "none"
        raise InvalidInputError(
            f"{_named(target)} already holds a factledger log, and key {signer.key_id} "
            f"({signer.name}) is not one of its operator keys (it has: {registered}); "
            "nothing was written: register keys in an existing log with `factledger operator "
            "add`"
        )
    return LogMade(
        log_id=log_id,
        created=False,
        operator_key_id=None if signer is None else signer.key_id,
        operators=len(active),
    )


def _named(target: str) -> str:
    """How an error names a log: its file, or its server without the DSN's secrets."""
    return "the PostgreSQL database" if is_dsn(target) else target
