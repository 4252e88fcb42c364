"""The command line's own error."""

from __future__ import annotations

from eventlog import FactledgerError


class DemoFailed(FactledgerError):
    """An outcome `factledger demo` promises did not happen."""
