"""Settings from the environment: one table, one precedence rule, read anew on every call.

A setting may be named by a `FACTLEDGER_*` variable and by the `BERNSTEIN_*` variable of the
orchestrator factledger replaces. The first of its variables that is set decides (so
`FACTLEDGER_*` wins, even when set to empty); its value is stripped of surrounding whitespace,
and an empty value means the setting's default.
"""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Setting:
    """One setting: its variables in precedence order, its default, and what it controls."""

    variables: tuple[str, ...]
    default: str
    meaning: str

    def value(self) -> str:
        """The setting's value now (its default when unset or empty)."""
        for name in self.variables:
            if name in os.environ:
                return os.environ[name].strip() or self.default
        return self.default

    def source(self) -> str:
        """The variable that decides the setting now (its first, when none is set): the
        name a message about its value should give."""
        return next((name for name in self.variables if name in os.environ), self.variables[0])


DB = Setting(
    ("FACTLEDGER_DB",),
    ".sdd/memory/memory.db",
    "the database the command line opens (`--db` overrides it)",
)
DSN = Setting(
    ("FACTLEDGER_DSN",),
    "",
    "a log held elsewhere (`postgresql://…`) the command line opens; the database is then "
    "this host's read-model cache of it (`--dsn` overrides it)",
)
TASK_ID = Setting(
    ("FACTLEDGER_TASK_ID", "BERNSTEIN_TASK_ID"),
    "manual-cli",
    "the producer task stamped on the command line's writes",
)
RUN_ID = Setting(
    ("FACTLEDGER_RUN_ID", "BERNSTEIN_RUN_ID"),
    "",
    "the run stamped on the command line's writes; run-scoped facts need one",
)
ADAPTER = Setting(
    ("FACTLEDGER_ADAPTER", "BERNSTEIN_ADAPTER"),
    "",
    "the source adapter stamped on the command line's writes (none: an operator write, or "
    "with a DSN the login's bound adapter); set, `query`, `list`, `history`, `blame`, `diff` "
    "and `as-of` read as that agent, under the trust policy, receipted",
)
OPERATOR_KEY = Setting(
    ("FACTLEDGER_OPERATOR_KEY",),
    "",
    "the operator's private key file: signs quarantines, releases, erasures, imports, operator "
    "changes and checkpoints (`--key` overrides it)",
)
TRUST_POLICY = Setting(
    ("FACTLEDGER_TRUST_POLICY", "BERNSTEIN_MEMORY_TRUST_POLICY"),
    "on",
    "`0`, `false`, `no` or `off` (any case) switches the trust policy off (the prompt path and "
    "agents' reads)",
)
TRUST_ADAPTERS = Setting(
    ("FACTLEDGER_TRUST_ADAPTERS", "BERNSTEIN_MEMORY_TRUST_ADAPTERS"),
    "",
    "comma-separated adapters the trust policy trusts",
)
TRUST_TAINT = Setting(
    ("FACTLEDGER_TRUST_TAINT",),
    "on",
    "`0`, `false`, `no` or `off` (any case): writes derived from untrusted, quarantined or "
    "mismatched sources are no longer kept out of prompts as `tainted`",
)
SECRETS = Setting(
    ("FACTLEDGER_SECRETS",),
    "refuse",
    "what a write does with a secret in its text (docs/security.md): `refuse` (an "
    "error, nothing written), `redact` (`[REDACTED:<type>]` stored in its place) or `allow`; "
    "a store's `secrets=` argument overrides it",
)
DEBUG = Setting(
    ("FACTLEDGER_DEBUG",),
    "off",
    "anything but `0`, `false`, `no` or `off`: the command line shows tracebacks and debug logs",
)
SETTINGS = (
    DB,
    DSN,
    TASK_ID,
    RUN_ID,
    ADAPTER,
    OPERATOR_KEY,
    TRUST_POLICY,
    TRUST_ADAPTERS,
    TRUST_TAINT,
    SECRETS,
    DEBUG,
)
"""Every setting, in the order README's table lists them."""

_OFF = frozenset(("0", "false", "no", "off"))


def db_path() -> str:
    """The database path for the command line."""
    return DB.value()


def db_named() -> bool:
    """Whether the environment names the database (FACTLEDGER_DB set, not empty)."""
    return any(os.environ.get(name, "").strip() for name in DB.variables)


def dsn() -> str | None:
    """The log held elsewhere the command line opens, if one is set."""
    return DSN.value() or None


def task_id() -> str:
    """The producer task id for writes."""
    return TASK_ID.value()


def run_id() -> str:
    """The run id for writes ('' for none)."""
    return RUN_ID.value()


def adapter() -> str | None:
    """The source adapter for writes (None for none)."""
    return ADAPTER.value() or None


def operator_key() -> str | None:
    """The operator's private key file, if one is set."""
    return OPERATOR_KEY.value() or None


def trust_policy_enabled() -> bool:
    """Whether the trust policy is on (it is unless switched off)."""
    return _switch(TRUST_POLICY)


def trusted_adapters() -> frozenset[str]:
    """The adapters the trust policy trusts (blanks in the list are ignored)."""
    return frozenset(name.strip() for name in TRUST_ADAPTERS.value().split(",") if name.strip())


def trust_taint() -> bool:
    """Whether taint propagates along lineage (it does unless switched off)."""
    return _switch(TRUST_TAINT)


def secrets() -> str:
    """What writes do with secrets, as set (`projections._secrets.check_secrets_mode` checks
    it)."""
    return SECRETS.value()


def debug() -> bool:
    """Whether the command line shows tracebacks and debug logs."""
    return _switch(DEBUG)


def _switch(setting: Setting) -> bool:
    return setting.value().lower() not in _OFF
