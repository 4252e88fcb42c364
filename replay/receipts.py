"""`Ledger.receipts`: the receipts of reads, as their events record them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from projections import Receipt
from projections.internal import ReceiptProjector
from projections.internal import receipts as find_receipts

if TYPE_CHECKING:
    from replay.ledger import Ledger


def receipts(
    ledger: Ledger,
    *,
    task_id: str | None = None,
    run_id: str | None = None,
    after: int = 0,
    limit: int = 100,
) -> list[Receipt]:
    """The receipts of reads for `task_id` and `run_id` (None: any) after position `after`,
    oldest first, at most `limit`, each as its event in the log records it
    (`projections._receipts`). Opened read-only, the ledger writes nothing."""
    with ledger.at_head([ReceiptProjector()]) as (events, index):
        return find_receipts(
            index, events, task_id=task_id, run_id=run_id, after=after, limit=limit
        )
