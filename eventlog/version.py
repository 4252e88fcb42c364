"""The installed distribution's version, read once from its metadata."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

DISTRIBUTION = "factledger"

try:
    __version__ = version(DISTRIBUTION)
except PackageNotFoundError:  # the packages imported from a checkout that was never installed
    __version__ = "0+unknown"
