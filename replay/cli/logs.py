"""Where the command line's log records go while a command runs: stderr, never stdout.

factledger's own records (the `factledger` logger and those under it) are rendered with their
fields, from WARNING up (everything with FACTLEDGER_DEBUG). Other libraries' records reach
stderr only at ERROR and above, each as one line naming its logger: a driver's warning about
its own housekeeping is not the user's business, and a traceback is not a message.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Iterator

import structlog

from eventlog.logs import ROOT
from projections.internal import (
    environment,
)


class OneLine(logging.Formatter):
    """`logger: first line of the message`, with no traceback."""

    def format(self, record: logging.LogRecord) -> str:
        first = record.getMessage().splitlines()[0] if record.getMessage() else ""
        return f"{record.name}: {first}"


def _own_handler() -> logging.Handler:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty()),
            ],
            foreign_pre_chain=[
                structlog.stdlib.add_log_level,
                structlog.stdlib.ExtraAdder(),
                structlog.processors.TimeStamper(fmt="%Y-%m-%d %H:%M:%S", utc=False),
            ],
        )
    )
    return handler


@contextlib.contextmanager
def logging_to_stderr() -> Iterator[None]:
    """Send factledger's records, and other libraries' errors, to stderr while the block
    runs; put every logger back as it was after."""
    own, others = logging.getLogger(ROOT), logging.getLogger()
    own_handler = _own_handler()
    others_handler = logging.StreamHandler(sys.stderr)
    others_handler.setFormatter(OneLine())
    others_handler.setLevel(logging.ERROR)
    level, propagate = own.level, own.propagate
    own.addHandler(own_handler)
    own.setLevel(logging.DEBUG if environment.debug() else logging.WARNING)
    own.propagate = False
    others.addHandler(others_handler)
    try:
        yield
    finally:
        own.removeHandler(own_handler)
        others.removeHandler(others_handler)
        own.setLevel(level)
        own.propagate = propagate
