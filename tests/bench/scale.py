"""How big each measurement is in each mode: smoke (the test suite), quick (CI), full."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Scale:
    """Sizes and repeat counts for one mode of the benchmark."""

    name: str
    rounds: int
    """Interleaved baseline/ours rounds per throughput metric; medians are over these. A full
    round is long enough to include its share of WAL checkpoints (one per ~4,000 pages)."""
    single_durable: int
    """Single-row transactions per round in the durable (synchronous=FULL) mode."""
    single_fast: int
    """Single-row transactions per round in the fast (synchronous=NORMAL) mode."""
    batches: int
    """Transactions of `batch_size` rows per round for add_many and publish_many."""
    batch_size: int
    versions: tuple[int, ...]
    """Versions per key for subscribe (the first is the flatness reference)."""
    read_calls: int
    """subscribe calls per version count."""
    relevant_calls: int
    """Queries for get_relevant and load_persistent_memory (each also runs the legacy query)."""
    relevant_entries: int
    """Entries in the store get_relevant and load_persistent_memory read."""
    small_log: int
    """Events in the smaller audit log (RSS reference)."""
    large_log: int
    """Events in the large audit log (verify, rebuild, proofs, RSS)."""
    audit_rounds: int
    """Repeats of verify, rebuild and the raw table scan over the large log."""
    proofs: int
    """Inclusion proofs timed at the large log."""
    writers: int
    """Processes appending concurrently."""
    appends_per_writer: int
    """Single durable appends each concurrent writer makes."""
    concurrency_rounds: int


SMOKE = Scale(
    name="smoke",
    rounds=1,
    single_durable=10,
    single_fast=40,
    batches=1,
    batch_size=1000,
    versions=(1, 100, 1000),
    read_calls=10,
    relevant_calls=10,
    relevant_entries=2_000,
    small_log=1_000,
    large_log=4_000,
    audit_rounds=1,
    proofs=5,
    writers=4,
    appends_per_writer=10,
    concurrency_rounds=1,
)

QUICK = Scale(
    name="quick",
    rounds=5,
    single_durable=60,
    single_fast=600,
    batches=3,
    batch_size=1000,
    versions=(1, 100, 1000),
    read_calls=200,
    relevant_calls=100,
    relevant_entries=20_000,
    small_log=10_000,
    large_log=100_000,
    audit_rounds=1,
    proofs=50,
    writers=4,
    appends_per_writer=100,
    concurrency_rounds=2,
)

FULL = Scale(
    name="full",
    rounds=7,
    single_durable=600,
    single_fast=3000,
    batches=12,
    batch_size=1000,
    versions=(1, 100, 1000),
    read_calls=400,
    relevant_calls=200,
    relevant_entries=100_000,
    small_log=100_000,
    large_log=1_000_000,
    audit_rounds=3,
    proofs=200,
    writers=4,
    appends_per_writer=250,
    concurrency_rounds=6,
)

SCALES = {scale.name: scale for scale in (SMOKE, QUICK, FULL)}
