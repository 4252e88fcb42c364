"""How factledger logs: structlog events handed to the standard library's `logging`.

The library never configures structlog or logging. Each event becomes a `logging.LogRecord` on
a logger under `factledger`: `record.msg` is the event name and every key/value is an attribute
of the record (logging's `extra`). The `factledger` logger has a `NullHandler`, as the logging
HOWTO asks of libraries, so nothing is written anywhere until the application configures logging.
"""

from __future__ import annotations

import logging

import structlog

ROOT = "factledger"

logging.getLogger(ROOT).addHandler(logging.NullHandler())


def get_logger(name: str) -> structlog.stdlib.BoundLogger:
    """A structlog logger writing to the standard library's logger `name` (under `factledger`)."""
    logger: structlog.stdlib.BoundLogger = structlog.wrap_logger(
        logging.getLogger(name),
        processors=[structlog.stdlib.filter_by_level, structlog.stdlib.render_to_log_kwargs],
        wrapper_class=structlog.stdlib.BoundLogger,
    )
    return logger
