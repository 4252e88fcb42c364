"""The knowledge projector: memory entries, their tags, fact versions, quarantine, and the
operator keys that authorize quarantines, releases and imports (`projections._operators`).

Entry ids are log positions. A published fact is a fact version (for subscribe and history)
and a `cross_task` memory row tagged with its tag (for list, query and the prompt path);
only the current version's row is visible. Versions older than the current one are
superseded; versions newer than it can only be quarantined ones. Quarantined events stay in
every table but are flagged out of every read; subscribe falls back to the newest version
not quarantined. An operator action the log's operators did not sign takes no effect here, so
it reaches no reader, rebuild, time travel and history included. A tag's conflict policy can
keep a version by an adapter that does not own the fact from becoming current
(`projections._conflicts`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import assert_never

import msgspec

from eventlog import (
    ConflictPolicySet,
    FactApproved,
    FactPublished,
    FactRejected,
    MemoryAdded,
    MemoryRemoved,
    MemoryReweighted,
    OperatorAdded,
    OperatorRemoved,
    QuarantineApplied,
    QuarantineReleased,
    RecallRecorded,
    RecordedEvent,
    Unreadable,
)
from eventlog.events import ContentErased, LogMigrated
from eventlog.signing import claims_of
from projections import _conflicts as conflicts
from projections import _sql_knowledge as sql_knowledge
from projections._conflicts import Publication
from projections._legacy import legacy_identity
from projections._operators import CLAIMS, UNSIGNED_IMPORT, Authority
from projections._projector import TableWriter
from projections._sql import Queryable

Identity = tuple[str, str, str, str]
"""(scope, run_key, tag, key): run_key is the run id for run scope and '' for project scope."""

IDENTITY_BATCH = 200
"""Fact identities looked up per statement (four bound values each)."""


def run_key(scope: str, run_id: str | None) -> str:
    """The run part of a fact's identity: the run id in run scope, '' in project scope."""
    return (run_id or "") if scope == "run" else ""


def fact_identity(scope: str, run_id: str | None, tag: str, key: str) -> Identity:
    """The identity a fact version is current under."""
    return (scope, run_key(scope, run_id), tag, key)


class KnowledgeProjector:
    """Folds memory, fact, quarantine and operator events into the tag-indexed read model.
    Signatures cover the log's id, so the projector is made for one log."""

    name = "knowledge"
    version = 9
    tables = sql_knowledge.KNOWLEDGE_TABLES + sql_knowledge.CONFLICT_TABLES

    def __init__(self, log_id: str) -> None:
        self._authority = Authority(log_id)

    def create(self, writer: TableWriter) -> None:
        for statement in sql_knowledge.KNOWLEDGE_DDL + sql_knowledge.CONFLICT_DDL:
            writer.execute(statement)

    def apply(self, writer: TableWriter, records: Sequence[RecordedEvent]) -> None:
        entries: list[tuple[object, ...]] = []
        tags: list[tuple[str, float, int]] = []
        facts: list[Publication] = []
        for record in records:
            payload = record.payload
            if entries and not isinstance(payload, MemoryAdded):
                _insert_entries(writer, entries, tags)
                entries, tags = [], []
            if facts and not isinstance(payload, FactPublished):
                _publish(writer, facts)
                facts = []
            match payload:
                case MemoryAdded():
                    row = self._entry_row(writer, record, payload)
                    if row is not None:
                        entries.append(row)
                        tags.extend(
                            (tag, payload.importance, record.position) for tag in payload.tags
                        )
                case FactPublished():
                    facts.append(Publication.of(record, payload))
                case MemoryRemoved():
                    _remove(writer, payload.entry_ids)
                case MemoryReweighted():
                    writer.execute(sql_knowledge.MEMORY_REWEIGHT, (payload.factor,))
                    writer.execute(sql_knowledge.TAG_REWEIGHT, (payload.factor,))
                case QuarantineApplied():
                    if self._authority.permits(writer, record):
                        _quarantine(writer, record.position, payload)
                case QuarantineReleased():
                    if self._authority.permits(writer, record):
                        _release(writer, record.position, payload.quarantine_position)
                case OperatorAdded():
                    self._authority.add(writer, record, payload)
                case OperatorRemoved():
                    self._authority.remove(writer, record, payload)
                case ConflictPolicySet():
                    if self._authority.permits(writer, record):
                        conflicts.set_policy(writer, record.position, payload)
                case FactApproved() | FactRejected():
                    if self._authority.permits(writer, record):
                        approved = conflicts.decide(writer, record.position, payload)
                        if approved is not None:
                            _publish(writer, [approved], admitted=True)
                case RecallRecorded():
                    pass  # receipts are the receipt and lineage projectors' to fold
                case ContentErased():
                    if self._authority.permits_signed(writer, record):
                        _erase(writer, record.position, payload.positions)
                case LogMigrated():
                    # What it vouches for is read where it is (`eventlog.migration`); here
                    # an unsigned one in a log with operators is recorded as refused.
                    self._authority.permits(writer, record)
                case Unreadable():  # changes nothing; named so that history can say so
                    writer.execute(
                        sql_knowledge.UNREADABLE_INSERT,
                        (
                            record.position,
                            payload.claimed_kind,
                            record.source_adapter,
                            record.producer_task_id,
                            payload.reason,
                        ),
                    )
                case _:
                    assert_never(payload)
        if entries:
            _insert_entries(writer, entries, tags)
        if facts:
            _publish(writer, facts)

    def _entry_row(
        self, writer: TableWriter, record: RecordedEvent, payload: MemoryAdded
    ) -> tuple[object, ...] | None:
        """The memory row an added entry makes; None for an import without effect.

        An import's claims are its row's provenance only when an operator signed it;
        otherwise the row says what the event says (the importer's producer and adapter, the
        import's time) and keeps the claims as claims, and an import no operator signed is
        flagged `unsigned_import`, which no trust policy trusts.
        """
        claims = claims_of(payload)
        if claims is None:
            created = payload.created_at
            return _row(
                record,
                payload,
                task_id=payload.task_id,
                created_at=record.ts_ns / 1e9 if created is None else created,
                agent=payload.source_agent,
                model=payload.source_model,
                adapter=record.source_adapter,
                producer=record.producer_task_id,
                claims=None,
            )
        standing = self._authority.import_standing(writer, record)
        if standing is None:
            return None
        signed = standing != UNSIGNED_IMPORT
        writer.execute(
            sql_knowledge.IMPORT_INSERT,
            (legacy_identity(payload), signed, record.position),
        )
        shown = _CLAIMS.encode(claims).decode("utf-8")
        if standing == CLAIMS:
            return _row(
                record,
                payload,
                task_id=claims.task_id,
                created_at=claims.created_at,
                agent=claims.source_agent,
                model=claims.source_model,
                adapter=claims.source_adapter,
                producer=claims.task_id or "",
                claims=shown,
            )
        return _row(
            record,
            payload,
            task_id=record.producer_task_id or None,
            created_at=record.ts_ns / 1e9,
            agent="",
            model="",
            adapter=record.source_adapter,
            producer=record.producer_task_id,
            claims=shown,
            unsigned_import=not signed,
        )


def _row(
    record: RecordedEvent,
    payload: MemoryAdded,
    *,
    task_id: str | None,
    created_at: float,
    agent: str,
    model: str,
    adapter: str | None,
    producer: str,
    claims: str | None,
    unsigned_import: bool = False,
) -> tuple[object, ...]:
    """A `fl_memory` row, in `sql_knowledge.MEMORY_INSERT`'s column order."""
    return (
        record.position,
        payload.type,
        payload.content,
        ",".join(payload.tags),
        payload.importance,
        task_id,
        created_at,
        agent,
        model,
        adapter,
        producer,
        record.content_hash,
        claims,
        unsigned_import,
    )


_CLAIMS = msgspec.json.Encoder(order="deterministic")


def _insert_entries(
    writer: TableWriter, entries: list[tuple[object, ...]], tags: list[tuple[str, float, int]]
) -> None:
    writer.executemany(sql_knowledge.MEMORY_INSERT, entries)
    if tags:
        writer.executemany(sql_knowledge.TAG_INSERT, tags)


def _identity_of(fact: Publication) -> Identity:
    return fact_identity(fact.scope, fact.run_id, fact.tag, fact.key)


def _publish(writer: TableWriter, facts: Sequence[Publication], *, admitted: bool = False) -> None:
    """Fold consecutive published facts, a batch of statements for the lot.

    The same rows as folding them one by one: each version replaces the identity's current
    one (from the table, or the batch's previous version of it), only the newest version's
    mirror stays visible, and every earlier version from the replaced one on is superseded.
    Versions a conflict policy keeps out are recorded there instead, unless `admitted`.
    """
    if not admitted:
        facts = conflicts.admitted(writer, facts, _identity_of)
        if not facts:
            return
    identities = [_identity_of(fact) for fact in facts]
    latest = _current_positions(writer, list(dict.fromkeys(identities)))
    hide: dict[Identity, tuple[int, int]] = {}
    versions: list[tuple[object, ...]] = []
    for identity, fact in zip(identities, facts, strict=True):
        replaced = latest.get(identity)
        hide.setdefault(identity, (replaced or 0, fact.position))
        latest[identity] = fact.position
        versions.append(
            (
                fact.position,
                *identity,
                fact.value,
                fact.producer_task_id,
                fact.ts_ns,
                fact.content_hash,
                fact.run_id,
                fact.source_adapter,
                replaced,
            )
        )
    writer.executemany(sql_knowledge.FACT_INSERT, versions)
    writer.executemany(sql_knowledge.FACT_CURRENT_PUT, [(*i, latest[i]) for i in hide])
    mirrors = [
        (
            fact.position,
            "cross_task",
            fact.value,
            fact.tag,
            1.0,
            fact.producer_task_id or None,
            fact.ts_ns / 1e9,
            "",
            "",
            fact.source_adapter,
            fact.producer_task_id,
            fact.content_hash,
            0 if latest[identity] == fact.position else sql_knowledge.HIDDEN_SUPERSEDED,
        )
        for identity, fact in zip(identities, facts, strict=True)
    ]
    writer.executemany(sql_knowledge.MIRROR_INSERT, mirrors)
    writer.executemany(sql_knowledge.TAG_INSERT, [(fact.tag, 1.0, fact.position) for fact in facts])
    writer.executemany(
        sql_knowledge.FACT_MIRRORS_OLDER_HIDE, [(*i, low, high) for i, (low, high) in hide.items()]
    )


def _current_positions(db: Queryable, identities: Sequence[Identity]) -> dict[Identity, int]:
    """The current version's position of each identity that has one."""
    found: dict[Identity, int] = {}
    for start in range(0, len(identities), IDENTITY_BATCH):
        batch = identities[start : start + IDENTITY_BATCH]
        query = sql_knowledge.FACT_CURRENT_OF.format(rows=", ".join(["(?, ?, ?, ?)"] * len(batch)))
        for row in query.rows(db, [value for identity in batch for value in identity]):
            found[row.identity()] = row.position
    return found


def _remove(writer: TableWriter, entry_ids: Sequence[int]) -> None:
    for entry_id in entry_ids:
        found = sql_knowledge.MEMORY_TAGS_OF.first(writer, (entry_id,))
        if found is None:
            continue
        if found.tags:
            writer.executemany(
                sql_knowledge.TAG_DELETE,
                [(tag, found.importance, entry_id) for tag in found.tags.split(",")],
            )
        writer.execute(sql_knowledge.MEMORY_DELETE, (entry_id,))


def _quarantine(writer: TableWriter, position: int, payload: QuarantineApplied) -> None:
    writer.execute(sql_knowledge.QUARANTINE_INSERT, (position, payload.reason))
    covered = matching_positions(writer, position, payload)
    writer.executemany(sql_knowledge.QUARANTINE_COVER, [(p, position) for p in covered])
    _set_quarantined(writer, covered)


def matching_positions(db: Queryable, position: int, payload: QuarantineApplied) -> list[int]:
    """Positions before `position` of content events (entries, fact versions) that every
    selector of `payload` matches: what a quarantine appended at `position` covers."""
    memory_filters: list[str] = []
    fact_filters: list[str] = []
    selectors: list[object] = []
    chosen: list[tuple[tuple[str, str], list[object]]] = []
    if payload.match_positions:
        chosen.append((sql_knowledge.QUARANTINE_MATCH_POSITIONS, [*payload.match_positions]))
    if payload.match_producer_task_id is not None:
        chosen.append((sql_knowledge.QUARANTINE_MATCH_PRODUCER, [payload.match_producer_task_id]))
    if payload.match_source_adapter is not None:
        chosen.append((sql_knowledge.QUARANTINE_MATCH_ADAPTER, [payload.match_source_adapter]))
    marks = ", ".join("?" * len(payload.match_positions))
    for (on_memory, on_fact), values in chosen:
        memory_filters.append(on_memory.format(marks=marks))
        fact_filters.append(on_fact.format(marks=marks))
        selectors.extend(values)
    params = [position, *selectors, position, *selectors]
    query = sql_knowledge.QUARANTINE_CANDIDATES.format(
        where_memory="".join(memory_filters), where_fact="".join(fact_filters)
    )
    return sorted(row.position for row in query.rows(db, params))


def _erase(writer: TableWriter, position: int, positions: Sequence[int]) -> None:
    """Fold an authorized erasure at `position`: the texts of the earlier `positions` leave
    the read model, and their versions are covered as a quarantine covers them, for good
    (nothing releases an erasure), so subscribe falls back to the version before."""
    earlier = sorted({p for p in positions if p < position})
    writer.executemany(sql_knowledge.ERASURE_INSERT, [(p, position) for p in earlier])
    for statement in (
        sql_knowledge.ERASURE_BLANK_MEMORY,
        sql_knowledge.ERASURE_BLANK_FACT,
        sql_knowledge.ERASURE_BLANK_HELD,
    ):
        writer.executemany(statement, [(p,) for p in earlier])
    covered = [p for p in earlier if sql_knowledge.ERASURE_PRESENT.exists(writer, (p, p))]
    writer.executemany(sql_knowledge.QUARANTINE_COVER, [(p, position) for p in covered])
    _set_quarantined(writer, covered)


def _release(writer: TableWriter, position: int, quarantine_position: int) -> None:
    if not sql_knowledge.QUARANTINE_ACTIVE.exists(writer, (quarantine_position,)):
        return
    covered = [
        row.position
        for row in sql_knowledge.QUARANTINE_COVERED_BY.rows(writer, (quarantine_position,))
    ]
    writer.execute(sql_knowledge.QUARANTINE_UNCOVER, (quarantine_position,))
    writer.execute(sql_knowledge.QUARANTINE_RELEASE, (position, quarantine_position))
    _set_quarantined(writer, covered)


def _set_quarantined(writer: TableWriter, positions: Sequence[int]) -> None:
    """Refresh the quarantine flags of `positions` and the current version of their facts."""
    identities: set[Identity] = set()
    for event_position in positions:
        flag = int(sql_knowledge.QUARANTINE_STILL_COVERED.exists(writer, (event_position,)))
        writer.execute(
            sql_knowledge.QUARANTINE_SET_MEMORY,
            (flag * sql_knowledge.HIDDEN_QUARANTINED, event_position),
        )
        writer.execute(sql_knowledge.QUARANTINE_SET_FACT, (flag, event_position))
        for row in sql_knowledge.FACT_IDENTITY_OF.rows(writer, (event_position,)):
            identities.add(row.identity())
    for identity in sorted(identities):
        newest = sql_knowledge.FACT_NEWEST_VISIBLE.one(writer, identity).position
        if newest is None:
            writer.execute(sql_knowledge.FACT_CURRENT_DELETE, identity)
        else:
            writer.execute(sql_knowledge.FACT_CURRENT_PUT, (*identity, newest))
        writer.execute(sql_knowledge.FACT_MIRRORS_SUPERSEDE, (newest or 0, *identity))
