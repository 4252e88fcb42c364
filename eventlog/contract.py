"""The contract every log backend must pass unchanged, shipped so a backend outside this
package can run it: subclass `LogContract` in a pytest module and implement `open`.

Needs pytest (`pip install factledger[dev]`); importing `eventlog` alone does not load it.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Callable
from typing import Any

import blake3
import msgspec
import pytest

from eventlog import (
    Authorization,
    ConflictPolicySet,
    EventIdConflictError,
    EventLog,
    EventNotFoundError,
    FactApproved,
    FactPublished,
    FactRejected,
    InvalidInputError,
    InvalidTypeError,
    LegacyClaims,
    MemoryAdded,
    MemoryRemoved,
    MemoryReweighted,
    NewEvent,
    OperatorAdded,
    OperatorRemoved,
    QuarantineApplied,
    QuarantineReleased,
    RecallRecorded,
    TrustSettings,
    verify_chain,
)
from eventlog.events import ContentErased, Exclusion, LogMigrated
from eventlog.formats import CURRENT
from eventlog.rows import READ_CHUNK


def memory(content: str = "use pytest", **fields: Any) -> NewEvent:
    payload = MemoryAdded(type="learning", content=content, tags=("tests",))
    return NewEvent(payload=payload, **{"producer_task_id": "task-1", **fields})


def fact(key: str, value: str, **fields: Any) -> NewEvent:
    payload = FactPublished(scope="project", tag="api-schema", key=key, value=value)
    return NewEvent(payload=payload, **{"producer_task_id": "task-2", **fields})


EVERY_KIND = [
    memory(),
    fact("users", "{name: str}", run_id="run-1", source_adapter="codex"),
    NewEvent(payload=MemoryRemoved(entry_ids=(1,), reason="removed")),
    NewEvent(payload=MemoryReweighted(factor=0.5)),
    NewEvent(
        payload=RecallRecorded(
            task_id="t",
            run_id=None,
            adapter="claude-code",
            tags=("api",),
            limit=10,
            included=(1,),
            excluded=(Exclusion(position=2, reason="untrusted_adapter"),),
            policy=TrustSettings(enabled=True, trusted_adapters=(), trust_untagged=True),
            head_position=2,
            rendered_hash="blake3:" + "0" * 64,
        )
    ),
    NewEvent(payload=QuarantineApplied(reason="poison", match_source_adapter="codex")),
    NewEvent(payload=QuarantineReleased(quarantine_position=6, reason="false alarm")),
    NewEvent(
        payload=OperatorAdded(
            name="ops",
            key_id="0a1b2c3d",
            public_key="A" * 43 + "=",
            authorization=Authorization(key_id="0a1b2c3d", signature="B" * 86 + "=="),
        ),
        event_id="op:contract-1",
    ),
    NewEvent(payload=OperatorRemoved(key_id="0a1b2c3d", reason="rotated")),
    NewEvent(
        payload=MemoryAdded(
            type="learning",
            content="imported",
            claims=LegacyClaims(id=7, created_at=1.5, task_id="t-7", source_adapter="codex"),
        ),
        producer_task_id="importer",
    ),
    NewEvent(payload=ConflictPolicySet(tag="api", on_conflict="hold", scope="project")),
    NewEvent(payload=FactApproved(position=2)),
    NewEvent(payload=FactRejected(position=2, reason="contested")),
    NewEvent(
        payload=LogMigrated(
            previous_log_id="00000000-0000-4000-8000-000000000000",
            previous_format=1,
            previous_size=0,
            previous_head_chain_hash="0" * 64,
            name="ops",
            key_id="0a1b2c3d",
            public_key="A" * 43 + "=",
        )
    ),
    NewEvent(payload=ContentErased(positions=(3,), reason="leaked")),
]


class LogContract:
    """Behaviour every `EventLog` backend keeps. Subclasses provide `open`."""

    def open(self, *, clock_ns: Callable[[], int] | None = None) -> EventLog:
        raise NotImplementedError

    @pytest.fixture
    def log(self) -> EventLog:
        return self.open()

    def test_empty_log_head_is_genesis(self, log: EventLog) -> None:
        """An empty log's head is position 0 with the genesis derived from its id."""
        head = log.head()
        assert 0 == head.position
        assert log.log_format.chain.genesis(log.log_id).hex() == head.chain_hash
        assert [] == list(log.read())

    def test_positions_are_dense_from_one(self, log: EventLog) -> None:
        """Appends get positions 1, 2, 3, ... in order, whether single or batched."""
        first = log.append(memory("a"))
        batch = log.append_many([memory("b"), memory("c")])
        assert [1, 2, 3] == [first.position] + [r.position for r in batch]
        assert [1, 2, 3] == [r.position for r in log.read()]
        assert 3 == log.head().position

    def test_every_kind_round_trips(self, log: EventLog) -> None:
        """Each event kind reads back with the same payload, kind and provenance."""
        recorded = log.append_many(EVERY_KIND)
        read = list(log.read())
        assert recorded == read
        assert [e.payload for e in EVERY_KIND] == [r.payload for r in read]
        assert [
            "memory_added",
            "fact_published",
            "memory_removed",
            "memory_reweighted",
            "recall_recorded",
            "quarantine_applied",
            "quarantine_released",
            "operator_added",
            "operator_removed",
            "memory_added",
            "conflict_policy_set",
            "fact_approved",
            "fact_rejected",
            "log_migrated",
            "content_erased",
        ] == [r.kind for r in read]
        assert ("run-1", "codex") == (read[1].run_id, read[1].source_adapter)

    def test_new_logs_are_format_v2(self, log: EventLog) -> None:
        """A new log is written in the current format (v2)."""
        assert CURRENT == log.log_format
        assert 2 == log.log_format.version

    def test_content_hash_is_blake3_keyed_by_the_salt_beside_it(self, log: EventLog) -> None:
        """content_hash is 'blake3-keyed:' + hex BLAKE3 keyed by the event's 32-byte salt over
        the UTF-8 text it writes; text and salt are stored beside the body."""
        log.append(memory("naïve café"))
        log.append(fact("k", "v1"))
        log.append(NewEvent(payload=MemoryRemoved(entry_ids=(1,), reason="removed")))
        texts = ["naïve café".encode(), b"v1", b""]
        for row, text, record in zip(log.scan(), texts, log.read(), strict=True):
            assert (text, 32) == (row.text, len(row.salt or b""))
            keyed = blake3.blake3(text, key=row.salt or b"").hexdigest()
            assert "blake3-keyed:" + keyed == record.content_hash

    def test_each_event_draws_its_own_salt(self, log: EventLog) -> None:
        """Two events writing the same text get different salts and content hashes."""
        first, second = log.append_many([memory("same"), memory("same")])
        salts = [row.salt for row in log.scan()]
        assert salts[0] != salts[1]
        assert first.content_hash != second.content_hash

    def test_the_chained_body_holds_no_text(self, log: EventLog) -> None:
        """The body is the envelope with the payload's text field empty; reads give the text."""
        log.append_many([memory("secret words"), fact("k", "more secret")])
        for row in log.scan():
            assert b"secret" not in row.body
            payload = msgspec.json.decode(row.body)["payload"]
            assert "" == payload.get("content", payload.get("value"))
        assert ["secret words", "more secret"] == [r.payload.written_text() for r in log.read()]
        assert ["intact", "intact"] == [r.text_state for r in log.read()]

    def test_chain_hash_follows_the_documented_construction(self, log: EventLog) -> None:
        """Every chain value is SHA-256(0x02 || previous || SHA-256(0x00 || body)) from
        SHA-256(domain || log id), computed here with hashlib alone."""
        log.append_many([memory("a"), fact("k", "v")])
        log.append(memory("b"))
        value = hashlib.sha256(b"factledger/v2 genesis\x00" + log.log_id.encode()).digest()
        for row in log.scan():
            leaf = hashlib.sha256(b"\x00" + row.body).digest()
            value = hashlib.sha256(b"\x02" + value + leaf).digest()
            assert value == bytes(row.chain_hash)
        assert value.hex() == log.head().chain_hash

    def test_clock_is_injectable_and_explicit_ts_wins(self) -> None:
        """ts_ns comes from the injected clock unless the event carries its own."""
        ticks = itertools.count(1000)
        log = self.open(clock_ns=lambda: next(ticks))
        assert 1000 == log.append(memory()).ts_ns
        assert 42 == log.append(memory(ts_ns=42)).ts_ns

    def test_retry_with_same_event_id_writes_nothing(self, log: EventLog) -> None:
        """Appending an event_id again returns the original record and adds no row."""
        original = log.append(memory("x", event_id="evt-1"))
        again = log.append(memory("x", event_id="evt-1"))
        assert original == again
        assert 1 == log.head().position

    def test_retry_inside_a_batch_appends_only_new_events(self, log: EventLog) -> None:
        """A batch mixing a retried event and new ones appends just the new ones."""
        first = log.append(memory("x", event_id="evt-1"))
        records = log.append_many([memory("x", event_id="evt-1"), memory("y")])
        assert [first.position, 2] == [r.position for r in records]
        assert 2 == log.head().position

    def test_reused_event_id_with_other_content_is_refused(self, log: EventLog) -> None:
        """A different event under a used event_id is a conflict, and nothing is written."""
        log.append(memory("x", event_id="evt-1"))
        head = log.head()
        with pytest.raises(EventIdConflictError, match="evt-1"):
            log.append(memory("not x", event_id="evt-1"))
        assert head == log.head()

    def test_generated_ids_are_unique_and_reserved(self, log: EventLog) -> None:
        """Generated ids carry the reserved 'fl:' prefix, differ, and callers cannot use it."""
        ids = [r.event_id for r in log.append_many([memory(str(i)) for i in range(50)])]
        assert 50 == len(set(ids)) and all(i.startswith("fl:") for i in ids)
        with pytest.raises(InvalidInputError, match="reserved"):
            log.append(memory(event_id=ids[0]))
        assert 50 == log.head().position

    def test_duplicate_event_id_in_one_batch_is_refused(self, log: EventLog) -> None:
        """Two events with one event_id in a batch are refused before anything is written."""
        with pytest.raises(InvalidInputError, match="twice"):
            log.append_many([memory("a", event_id="e"), memory("b", event_id="e")])
        assert 0 == log.head().position

    def test_append_many_is_all_or_nothing(self, log: EventLog) -> None:
        """A bad event in the middle of a batch leaves the log exactly as it was."""
        log.append(memory("before"))
        head = log.head()
        with pytest.raises(InvalidInputError):
            log.append_many([memory("a"), memory("\ud800"), memory("c")])
        assert head == log.head()
        assert ["before"] == [r.payload.content for r in log.read()]  # type: ignore[union-attr]

    def test_a_failed_transaction_appends_nothing(self, log: EventLog) -> None:
        """Appends inside a transaction that raises are rolled back with it."""
        log.append(memory("kept"))
        head = log.head()
        with pytest.raises(RuntimeError), log.transaction() as tx:
            tx.append(memory("lost"))
            raise RuntimeError("projector failed")
        assert head == log.head()
        assert ["kept"] == [r.payload.content for r in log.read()]  # type: ignore[union-attr]

    def test_read_after_limit_and_until(self, log: EventLog) -> None:
        """read(after=, until=, limit=) returns after < position <= until, at most limit of
        them, in position order; scan gives the same window."""
        log.append_many([memory(str(i)) for i in range(10)])
        assert [4, 5, 6] == [r.position for r in log.read(after=3, limit=3)]
        assert [8, 9] == [r.position for r in log.read(after=7, until=9)]
        assert [3, 4] == [r.position for r in log.read(after=2, until=9, limit=2)]
        assert [1, 2] == [r.position for r in log.read(until=2)]
        assert list(range(1, 11)) == [r.position for r in log.read(until=2**40)]
        assert [] == list(log.read(after=10))
        assert [] == list(log.read(after=5, until=5))
        assert [] == list(log.read(after=6, until=3))
        assert [] == list(log.read(limit=0))
        assert [3, 4] == [r.position for r in log.scan(after=2, until=9, limit=2)]
        assert [10] == [r.position for r in log.scan(after=9)]

    def test_read_until_defaults_to_the_head_when_the_read_starts(self, log: EventLog) -> None:
        """An append after a read has started is not part of it."""
        log.append_many([memory("a"), memory("b")])
        events, rows = log.read(), log.scan()
        log.append(memory("c"))
        assert [1, 2] == [r.position for r in events]
        assert [1, 2] == [r.position for r in rows]

    def test_reads_longer_than_a_chunk_page_through_and_stop_at_limit(self, log: EventLog) -> None:
        """A read past one chunk of rows pages on; a limit inside a later chunk stops there."""
        count = READ_CHUNK + 5
        log.append_many([memory(str(i)) for i in range(count)])
        assert list(range(1, count + 1)) == [r.position for r in log.read()]
        assert list(range(3, READ_CHUNK + 5)) == [
            r.position for r in log.read(after=2, limit=READ_CHUNK + 2)
        ]

    def test_reads_inside_a_transaction_see_its_appends(self, log: EventLog) -> None:
        """A transaction reads its own uncommitted appends."""
        with log.transaction() as tx:
            tx.append_many([memory("a"), memory("b")])
            assert 2 == tx.head().position
            assert [1, 2] == [r.position for r in tx.read()]
            assert [2] == [r.position for r in tx.read(after=1, limit=5)]

    @pytest.mark.parametrize(
        "call",
        [
            lambda source: source.read(2),
            lambda source: source.read(2, 5),
            lambda source: source.event_at(),
        ],
        ids=["read(after)", "read(after, until)", "event_at()"],
    )
    def test_positional_read_arguments_are_refused(
        self, log: EventLog, call: Callable[[Any], object]
    ) -> None:
        """read's arguments are keyword-only, on the log, a snapshot and a transaction alike."""
        log.append_many([memory("a"), memory("b")])
        with pytest.raises(TypeError):
            call(log)
        with pytest.raises(TypeError), log.snapshot() as snap:
            call(snap)
        with pytest.raises(TypeError), log.transaction() as tx:
            call(tx)
        with pytest.raises(TypeError):
            log.scan(2)  # type: ignore[call-arg]
        assert 2 == log.head().position

    @pytest.mark.parametrize(
        ("arguments", "error"),
        [
            ({"after": -1}, InvalidInputError),
            ({"until": -1}, InvalidInputError),
            ({"limit": -1}, InvalidInputError),
            ({"after": 2**63}, InvalidInputError),
            ({"after": "1"}, InvalidTypeError),
            ({"until": 2.0}, InvalidTypeError),
            ({"limit": True}, InvalidTypeError),
        ],
    )
    def test_bad_read_arguments_are_refused_when_read_is_called(
        self, log: EventLog, arguments: dict[str, Any], error: type[Exception]
    ) -> None:
        """A negative, too large or non-int bound is refused by read, scan and a snapshot's
        read as soon as they are called, naming the argument."""
        log.append(memory("a"))
        [name] = arguments
        with pytest.raises(error, match=name):
            log.read(**arguments)
        with pytest.raises(error, match=name):
            log.scan(**arguments)
        with log.snapshot() as snap, pytest.raises(error, match=name):
            snap.read(**arguments)

    def test_event_at_is_the_event_stored_there(self, log: EventLog) -> None:
        """event_at gives the event at a position, from the log, a snapshot and a
        transaction, equal to what read gives."""
        recorded = log.append_many(EVERY_KIND)
        assert recorded == [log.event_at(r.position) for r in recorded]
        with log.snapshot() as snap:
            assert recorded == [snap.event_at(r.position) for r in recorded]
        with log.transaction() as tx:
            added = tx.append(memory("in the transaction"))
            assert added == tx.event_at(added.position)
            assert recorded[0] == tx.event_at(1)
        assert added == log.event_at(added.position)

    @pytest.mark.parametrize("position", [0, -1, 16, 2**63, 2**64])
    def test_event_at_a_position_holding_no_event_is_not_found(
        self, log: EventLog, position: int
    ) -> None:
        """Before the first position or past the head, event_at raises EventNotFoundError
        (an InvalidInputError and a LookupError) naming the position."""
        log.append_many(EVERY_KIND)
        with pytest.raises(EventNotFoundError, match=f"position {position}$") as raised:
            log.event_at(position)
        assert position == raised.value.position
        with log.snapshot() as snap, pytest.raises(EventNotFoundError):
            snap.event_at(position)
        with log.transaction() as tx, pytest.raises(EventNotFoundError):
            tx.event_at(position)
        assert issubclass(EventNotFoundError, InvalidInputError)
        assert issubclass(EventNotFoundError, LookupError)

    def test_event_at_refuses_a_position_that_is_not_an_int(self, log: EventLog) -> None:
        """A bool, str or float position is a type error, not a missing event."""
        log.append(memory("a"))
        for position in (True, "1", 1.0):
            with pytest.raises(InvalidTypeError, match="position"):
                log.event_at(position)  # type: ignore[arg-type]
            with log.snapshot() as snap, pytest.raises(InvalidTypeError, match="position"):
                snap.event_at(position)  # type: ignore[arg-type]

    def test_verify_passes_on_an_untouched_log(self, log: EventLog) -> None:
        """The verification primitive accepts a log nobody tampered with."""
        log.append_many(EVERY_KIND)
        report = verify_chain(log)
        assert (True, len(EVERY_KIND), None) == (
            report.ok,
            report.checked,
            report.first_bad_position,
        )
        assert log.head().chain_hash == report.head_chain_hash

    @pytest.mark.parametrize(
        ("event", "error", "message"),
        [
            (MemoryAdded(type="x", content="y"), InvalidTypeError, "NewEvent"),
            (NewEvent(payload="text"), InvalidTypeError, "payload"),  # type: ignore[arg-type]
            (memory(producer_task_id=7), InvalidTypeError, "producer_task_id"),
            (memory(producer_task_id="a\x00b"), InvalidInputError, "producer_task_id"),
            (memory(run_id=""), InvalidInputError, "run_id"),
            (memory(source_adapter=" codex"), InvalidInputError, "source_adapter"),
            (memory(source_adapter="\u0441laude-code"), InvalidInputError, "U\\+0441 CYRILLIC"),
            (memory(producer_task_id="t\u0430sk-7"), InvalidInputError, "producer_task_id"),
            (memory(run_id="run\u200b-1"), InvalidInputError, "U\\+200B ZERO WIDTH"),
            (memory(source_adapter="codex\u2010cli"), InvalidInputError, "source_adapter"),
            (memory(event_id=""), InvalidInputError, "event_id"),
            (memory(ts_ns=-1), InvalidInputError, "ts_ns"),
            (memory(ts_ns=2**63), InvalidInputError, "ts_ns"),
            (memory("x" * (1024 * 1024 + 1)), InvalidInputError, "limit"),
            (memory("lone \udc00 surrogate"), InvalidInputError, "surrogate"),
            (NewEvent(payload=MemoryAdded(type="x", content=5)), InvalidTypeError, "content"),  # type: ignore[arg-type]
            (NewEvent(payload=MemoryAdded(type=5, content="y")), InvalidInputError, "schema"),  # type: ignore[arg-type]
        ],
    )
    def test_bad_events_are_refused_and_change_nothing(
        self, log: EventLog, event: Any, error: type[Exception], message: str
    ) -> None:
        """Each bad event raises a clear error, and the head stays where it was."""
        log.append(memory("existing"))
        head = log.head()
        with pytest.raises(error, match=message):
            log.append(event)
        assert head == log.head()
