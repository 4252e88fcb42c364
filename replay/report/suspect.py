"""Who a report is about: the selectors, checked once, and the commands that name them."""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from eventlog import InvalidInputError
from eventlog.checks import check_optional_actor, check_positions


class Suspect(msgspec.Struct, frozen=True, kw_only=True):
    """The selectors of a suspect; an event is the suspect's when it matches every one given.
    Names are checked as actors are (`check_optional_actor`), so the commands a report prints
    hold them verbatim."""

    source_adapter: str | None = None
    producer_task_id: str | None = None
    run_id: str | None = None
    positions: tuple[int, ...] = ()

    @classmethod
    def of(
        cls,
        *,
        source_adapter: str | None,
        producer_task_id: str | None,
        run_id: str | None,
        positions: Iterable[int] | None,
    ) -> Suspect:
        """The suspect these selectors name; `InvalidInputError` when none is given."""
        suspect = cls(
            source_adapter=check_optional_actor("source_adapter", source_adapter),
            producer_task_id=check_optional_actor("producer_task_id", producer_task_id),
            run_id=check_optional_actor("run_id", run_id),
            positions=check_positions("positions", positions),
        )
        if suspect == cls():
            raise InvalidInputError(
                "a report needs a suspect: source_adapter, producer_task_id, run_id or positions"
            )
        return suspect

    def flags(self, *, producer_flag: str = "--producer") -> str:
        """The selectors as command-line options (`--adapter evil --producer t1`)."""
        chosen = [
            ("--adapter", self.source_adapter),
            (producer_flag, self.producer_task_id),
            ("--run", self.run_id),
            *(("--position", str(p)) for p in self.positions),
        ]
        return " ".join(f"{flag} {value}" for flag, value in chosen if value is not None)

    def describe(self) -> str:
        """The suspect as `factledger report` names it."""
        return self.flags(producer_flag="--task")

    def listing(self, limit: int) -> str:
        """The command that lists every row of the suspect's blast radius."""
        return f"factledger blast-radius {self.flags()} --limit {limit} --json"
