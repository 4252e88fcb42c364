"""The PostgreSQL fixtures of the log's tests, for the caches that tail a log on a server."""

from __future__ import annotations

from tests.eventlog.conftest import pg, pg_server

__all__ = ["pg", "pg_server"]
