"""Keep the library's log lines out of the benchmark's output and timings."""

from __future__ import annotations

import logging


def silence_logs() -> None:
    """Drop every factledger record below CRITICAL before it is built (the KB logs every
    overwrite)."""
    logging.getLogger("factledger").setLevel(logging.CRITICAL)
