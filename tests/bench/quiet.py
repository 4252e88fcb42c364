"""Keep the library's log lines out of the benchmark's output and timings."""

from __future__ import annotations

import logging

import structlog


def silence_logs() -> None:
    """Drop every structlog event below CRITICAL (the KB warns on every overwrite)."""
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(logging.CRITICAL),
        cache_logger_on_first_use=True,
    )
