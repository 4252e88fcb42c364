"""How factledger logs: structlog events handed to the standard library's `logging`.

The library never configures structlog or logging. Each event becomes a `logging.LogRecord` on
a logger under `factledger`: `record.msg` is the event name and every key/value is an attribute
of the record (logging's `extra`). The `factledger` logger has a `NullHandler`, as the logging
HOWTO asks of libraries, so nothing is written anywhere until the application configures logging.
"""

from __future__ import annotations

import logging

import structlog
from structlog.typing import EventDict

ROOT = "factledger"
CALLER_STACKLEVEL = 4
"""Frames from the stdlib logger's call up to the library code that logged: structlog's
`_proxy_to_logger` (base, then stdlib) and the `BoundLogger` method. With it a record's
`pathname`, `lineno` and `funcName` name that code rather than structlog."""

logging.getLogger(ROOT).addHandler(logging.NullHandler())


def _at_caller(_: object, __: str, event_dict: EventDict) -> EventDict:
    event_dict["stacklevel"] = CALLER_STACKLEVEL
    return event_dict


def get_logger(name: str) -> structlog.stdlib.BoundLogger:
    """A structlog logger writing to the standard library's logger `name` (under `factledger`)."""
    logger: structlog.stdlib.BoundLogger = structlog.wrap_logger(
        logging.getLogger(name),
        processors=[
            structlog.stdlib.filter_by_level,
            _at_caller,
            structlog.stdlib.render_to_log_kwargs,
        ],
        wrapper_class=structlog.stdlib.BoundLogger,
    )
    return logger
