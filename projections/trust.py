"""Which memory may reach a live prompt: the provenance trust policy.

Untagged rows (operator writes, and imports an operator signed claiming no adapter) are
trusted by default; a row written under an adapter is trusted only if that adapter was opted
in; an import no operator signed (`unsigned_import`) is never trusted. The policy is on
unless switched off.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from eventlog import InvalidTypeError, TrustSettings
from eventlog.checks import check_identifier
from projections import environment
from projections.entries import MemoryEntry


@dataclass(frozen=True)
class MemoryTrustPolicy:
    """Decides, per entry, whether it may be replayed into a spawned agent's prompt."""

    enabled: bool = True
    trusted_adapters: frozenset[str] = field(default_factory=frozenset)
    trust_untagged: bool = True
    propagate_taint: bool = True
    """Whether a write derived from an event held out (untrusted, quarantined, mismatched) is
    held out too, with the reason `tainted` (`projections.lineage`)."""

    def __post_init__(self) -> None:
        for name in ("enabled", "trust_untagged", "propagate_taint"):
            if not isinstance(getattr(self, name), bool):
                raise InvalidTypeError(
                    f"{name} must be bool, not {type(getattr(self, name)).__name__}"
                )
        adapters = self.trusted_adapters
        if isinstance(adapters, (str, bytes)) or not isinstance(adapters, Iterable):
            raise InvalidTypeError(
                f"trusted_adapters must be a set of adapter names, not {type(adapters).__name__}"
            )
        checked = frozenset(
            check_identifier("trusted_adapters item", adapter) for adapter in adapters
        )
        object.__setattr__(self, "trusted_adapters", checked)

    def is_trusted(self, entry: MemoryEntry) -> bool:
        """Whether `entry` may reach a prompt under this policy."""
        if not isinstance(entry, MemoryEntry):
            raise InvalidTypeError(f"expected a MemoryEntry, not {type(entry).__name__}")
        if not self.enabled:
            return True
        if entry.unsigned_import:
            return False
        if entry.source_adapter is None:
            return self.trust_untagged
        return entry.source_adapter in self.trusted_adapters

    def filter_entries(self, entries: Iterable[MemoryEntry]) -> list[MemoryEntry]:
        """The entries this policy trusts, in their order."""
        if not isinstance(entries, Iterable):
            raise InvalidTypeError(
                f"entries must be a list of MemoryEntry, not {type(entries).__name__}"
            )
        return [entry for entry in entries if self.is_trusted(entry)]

    def settings(self) -> TrustSettings:
        """The policy as recorded in a recall receipt."""
        return TrustSettings(
            enabled=self.enabled,
            trusted_adapters=tuple(sorted(self.trusted_adapters)),
            trust_untagged=self.trust_untagged,
            propagate_taint=self.propagate_taint,
        )


def active_trust_policy() -> MemoryTrustPolicy:
    """The policy the environment asks for, read anew on every call.

    FACTLEDGER_TRUST_POLICY (else BERNSTEIN_MEMORY_TRUST_POLICY): 0/false/no/off in any case
    disables it; unset, empty or anything else leaves it on. FACTLEDGER_TRUST_ADAPTERS (else
    BERNSTEIN_MEMORY_TRUST_ADAPTERS): comma-separated adapters to trust. The precedence rule
    is `projections.environment`'s. FACTLEDGER_TRUST_TAINT: 0/false/no/off switches taint
    propagation off.
    """
    return MemoryTrustPolicy(
        enabled=environment.trust_policy_enabled(),
        trusted_adapters=environment.trusted_adapters(),
        propagate_taint=environment.trust_taint(),
    )
