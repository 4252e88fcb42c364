"""Operator authority, checked where it takes effect (README, "Operators and signing").

The knowledge projector folds events in log order, so its operator table holds, at each
event, the keys registered at that position. A log with no operator key yet is open: any
operator action takes effect, as in a store without operators, but an import's claims count
for nothing (no operator vouched for them) and its rows are trusted by no policy. Once a key
is registered, an operator action (a quarantine, a release, a policy, an approval or
rejection, an import, an operator event) takes effect only if it carries a valid Ed25519
signature by a key registered and not removed at its position;
otherwise it changes nothing any reader sees, and its position, kind and the reason are kept
in `fl_unauthorized`. The first key is registered by an `operator_added` signed by that key
itself; the last key still registered cannot be removed, so a log never falls back to open.
"""

from __future__ import annotations

from typing import Literal

from eventlog import (
    OperatorAdded,
    OperatorRemoved,
    RecordedEvent,
)
from eventlog.checks import check_actor
from eventlog.events import RecordedPayload
from eventlog.migration import original_statement
from eventlog.signing import (
    PUBLIC_KEY_SIZE,
    action_statement,
    authorization_of,
    claims_of,
    key_id,
    strict_base64,
    verify,
)
from projections import _sql_knowledge as sql_knowledge
from projections._projector import TableWriter
from projections._sql import Queryable

UNSIGNED = "unsigned"
"""The log has an operator, and the action carries no signature."""
UNKNOWN_KEY = "unknown_key"
"""Signed by a key the log has not registered (at that position)."""
REMOVED_KEY = "removed_key"
"""Signed by a key removed at an earlier position."""
BAD_SIGNATURE = "bad_signature"
"""The signature does not verify over the action's statement."""
MALFORMED_KEY = "malformed_key"
"""An `operator_added` whose name, key id and public key do not agree."""
NOT_SELF_SIGNED = "not_self_signed"
"""The first `operator_added` of a log, not signed by the key it adds."""
ALREADY_REGISTERED = "already_registered"
"""An `operator_added` for a key id the log registered before (removed keys stay removed)."""
NOT_AN_OPERATOR = "not_an_operator"
"""An `operator_removed` for a key that is not registered, or no longer."""
LAST_OPERATOR = "last_operator"
"""An `operator_removed` that would leave the log without an operator key."""
NO_OPERATOR = "no_operator_key"
"""An erasure in a log with no operator key: destroying a text always needs a signature."""

Standing = Literal["claims", "signed_own", "unsigned"]
"""How an import counts (`Authority.import_standing`)."""
CLAIMS: Standing = "claims"
SIGNED_OWN: Standing = "signed_own"
UNSIGNED_IMPORT: Standing = "unsigned"


class Authority:
    """Checks the operator actions of one log as they are folded. Needs the log's id, which
    every signature covers."""

    def __init__(self, log_id: str) -> None:
        self.log_id = log_id

    def permits(self, writer: TableWriter, record: RecordedEvent) -> bool:
        """Whether the operator action `record` takes effect; a refusal is recorded."""
        if not sql_knowledge.OPERATOR_ANY.exists(writer):
            return True
        return self._accepted(writer, record, self.signature_problem(writer, record))

    def permits_signed(self, writer: TableWriter, record: RecordedEvent) -> bool:
        """Whether the operator action `record` takes effect when it must be signed even in
        a log with no operator key (an erasure); a refusal is recorded."""
        if not sql_knowledge.OPERATOR_ANY.exists(writer):
            return self._accepted(writer, record, NO_OPERATOR)
        return self._accepted(writer, record, self.signature_problem(writer, record))

    def import_standing(self, writer: TableWriter, record: RecordedEvent) -> Standing | None:
        """How an import (`memory_added` with claims) counts: `CLAIMS` when an operator key
        registered at its position signed it (its claims are its provenance), `SIGNED_OWN`
        when one signed it but its claims name malformed actors (it counts as the signer's own
        writing), `UNSIGNED_IMPORT` in a log with no operator key (no operator vouched for it, so
        nothing trusts it), None when it takes no effect (refused: not validly signed in a log
        with operators)."""
        claims = claims_of(record.payload)
        assert claims is not None
        if not sql_knowledge.OPERATOR_ANY.exists(writer):
            return UNSIGNED_IMPORT
        if not self._accepted(writer, record, self.signature_problem(writer, record)):
            return None
        return CLAIMS if _valid_actors(claims.task_id, claims.source_adapter) else SIGNED_OWN

    def add(self, writer: TableWriter, record: RecordedEvent, payload: OperatorAdded) -> None:
        """Fold an `operator_added`: the first must be signed by the key it adds."""
        raw = strict_base64(payload.public_key)
        if (
            raw is None
            or len(raw) != PUBLIC_KEY_SIZE
            or not _valid_actors(payload.name, None)
            or key_id(payload.name, raw) != payload.key_id
        ):
            self._refuse(writer, record, MALFORMED_KEY)
            return
        auth = authorization_of(payload)
        if sql_knowledge.OPERATOR_ANY.exists(writer):
            problem = self.signature_problem(writer, record)
            if problem is None and sql_knowledge.OPERATOR_GET.exists(writer, (payload.key_id,)):
                problem = ALREADY_REGISTERED
        elif auth is None:
            problem = UNSIGNED
        elif auth.key_id != payload.key_id:
            problem = NOT_SELF_SIGNED
        else:
            problem = self._bad_signature(raw, record)
        if not self._accepted(writer, record, problem):
            return
        assert auth is not None
        writer.execute(
            sql_knowledge.OPERATOR_INSERT,
            (payload.key_id, payload.name, payload.public_key, record.position, auth.key_id),
        )

    def remove(self, writer: TableWriter, record: RecordedEvent, payload: OperatorRemoved) -> None:
        """Fold an `operator_removed`: the key stops authorizing after this position."""
        problem = self.signature_problem(writer, record)
        if problem is None:
            found = sql_knowledge.OPERATOR_GET.first(writer, (payload.key_id,))
            if found is None or found.removed_position is not None:
                problem = NOT_AN_OPERATOR
            elif sql_knowledge.OPERATOR_ACTIVE_COUNT.one(writer).count <= 1:
                problem = LAST_OPERATOR
        if not self._accepted(writer, record, problem):
            return
        auth = authorization_of(payload)
        assert auth is not None
        writer.execute(
            sql_knowledge.OPERATOR_REMOVE, (record.position, auth.key_id, payload.key_id)
        )

    def signature_problem(self, db: Queryable, record: RecordedEvent) -> str | None:
        """Why `record` is not signed by a key registered at its position, or None."""
        auth = authorization_of(record.payload)
        if auth is None:
            return UNSIGNED
        found = sql_knowledge.OPERATOR_GET.first(db, (auth.key_id,))
        if found is None:
            return UNKNOWN_KEY
        if found.removed_position is not None:
            return REMOVED_KEY
        raw = strict_base64(found.public_key)
        return BAD_SIGNATURE if raw is None else self._bad_signature(raw, record)

    def _bad_signature(self, public_key: bytes, record: RecordedEvent) -> str | None:
        auth = authorization_of(record.payload)
        signature = None if auth is None else strict_base64(auth.signature)
        if signature is None or not verify(public_key, signature, self.statement(record)):
            return BAD_SIGNATURE
        return None

    def statement(self, record: RecordedEvent) -> bytes:
        """The bytes `record`'s signature must cover: for an event a migration copied (which
        readers see only where the log's migration statement vouches for it), what the
        operator signed in the log it came from."""
        original = original_statement(record)
        return statement_of(self.log_id, record, record.payload) if original is None else original

    def _accepted(self, writer: TableWriter, record: RecordedEvent, problem: str | None) -> bool:
        if problem is None:
            return True
        self._refuse(writer, record, problem)
        return False

    @staticmethod
    def _refuse(writer: TableWriter, record: RecordedEvent, reason: str) -> None:
        auth = authorization_of(record.payload)
        writer.execute(
            sql_knowledge.UNAUTHORIZED_INSERT,
            (record.position, record.kind, None if auth is None else auth.key_id, reason),
        )


def statement_of(log_id: str, record: RecordedEvent, payload: RecordedPayload) -> bytes:
    """The statement an operator signs for the event `record` would be with `payload`."""
    return action_statement(
        log_id=log_id,
        event_id=record.event_id,
        producer_task_id=record.producer_task_id,
        run_id=record.run_id,
        source_adapter=record.source_adapter,
        content_hash=record.content_hash,
        payload=payload,
    )


def _valid_actors(name: str | None, adapter: str | None) -> bool:
    """Whether claimed names are well-formed actor names (the log refuses lookalikes)."""
    try:
        for value in (name, adapter):
            if value is not None:
                check_actor("claim", value)
    except ValueError:
        return False
    return True
