"""The audit side of factledger: verify, checkpoints and proofs, rebuild, time travel,
history, forensics, and the `factledger` command line."""

from __future__ import annotations

__all__: list[str] = []
