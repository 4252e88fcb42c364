"""Which memory may reach a live prompt: the provenance trust policy.

Untagged rows (operator writes, and imports an operator signed claiming no adapter) are
trusted by default; a row written under an adapter is trusted only if that adapter was opted
in; an import no operator signed (`unsigned_import`) is never trusted. The policy is on
unless switched off.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass, field

from eventlog import InvalidTypeError, TrustSettings
from eventlog.checks import check_identifier
from projections import _environment as environment
from projections._entries import MemoryEntry

TRUSTED = "trusted"
"""The verdict on a row a reader under the policy may see."""
UNTRUSTED_ADAPTER = "untrusted_adapter"
"""Why a row written under an adapter the policy does not name is kept out."""
UNTAGGED_NOT_TRUSTED = "untagged_not_trusted"
"""Why a row written under no adapter is kept out by a policy that does not trust those."""
QUARANTINED = "quarantined"
"""Why a row an operator quarantined is kept out (whatever the policy)."""
ERASED = "erased"
"""Why a row whose text an operator erased is kept out (whatever the policy): it has none."""
UNSIGNED_IMPORT = "unsigned_import"
"""Why an import no operator signed is kept out: its writer's claims are only claims."""


@dataclass(frozen=True)
class MemoryTrustPolicy:
    """Decides, per entry, whether it may be replayed into a spawned agent's prompt."""

    enabled: bool = True
    trusted_adapters: frozenset[str] = field(default_factory=frozenset)
    trust_untagged: bool = True
    propagate_taint: bool = True
    """Whether a write derived from an event held out (untrusted, quarantined, mismatched) is
    held out too, with the reason `tainted` (`projections._lineage`)."""

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

    def refusal(self, adapter: str | None, *, unsigned_import: bool = False) -> str | None:
        """Why this policy keeps out what was written under `adapter` (None: no adapter, an
        operator's write), or None when it trusts it; an import no operator signed is trusted
        by no policy that is on. The one place the rule is written; quarantine, taint and rows
        their events do not bear out are `projections._verdicts`'."""
        if not self.enabled:
            return None
        if unsigned_import:
            return UNSIGNED_IMPORT
        if adapter is None:
            return None if self.trust_untagged else UNTAGGED_NOT_TRUSTED
        return None if adapter in self.trusted_adapters else UNTRUSTED_ADAPTER

    def trusting(self, adapter: str | None) -> MemoryTrustPolicy:
        """This policy with `adapter` trusted too (itself for None), every other setting kept."""
        if adapter is None or adapter in self.trusted_adapters:
            return self
        return dataclasses.replace(self, trusted_adapters=self.trusted_adapters | {adapter})

    def is_trusted(self, entry: MemoryEntry) -> bool:
        """Whether `entry` may reach a prompt under this policy, by who wrote it alone."""
        if not isinstance(entry, MemoryEntry):
            raise InvalidTypeError(f"expected a MemoryEntry, not {type(entry).__name__}")
        return self.refusal(entry.source_adapter, unsigned_import=entry.unsigned_import) is None

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
    is `projections._environment`'s. FACTLEDGER_TRUST_TAINT: 0/false/no/off switches taint
    propagation off.
    """
    return MemoryTrustPolicy(
        enabled=environment.trust_policy_enabled(),
        trusted_adapters=environment.trusted_adapters(),
        propagate_taint=environment.trust_taint(),
    )
