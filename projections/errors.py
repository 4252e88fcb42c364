"""The exceptions the read side adds. Each derives from `eventlog.FactledgerError`."""

from __future__ import annotations

from eventlog.errors import FactledgerError


class LegacyImportError(FactledgerError, ValueError):
    """A legacy row cannot be imported as it is; nothing was imported."""
