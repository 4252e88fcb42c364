"""MemoryTrustPolicy and the environment switches that configure it."""

from __future__ import annotations

import pytest

from eventlog import InvalidTypeError
from projections import MemoryEntry, MemoryTrustPolicy, active_trust_policy

ENV = (
    "FACTLEDGER_TRUST_POLICY",
    "FACTLEDGER_TRUST_ADAPTERS",
    "BERNSTEIN_MEMORY_TRUST_POLICY",
    "BERNSTEIN_MEMORY_TRUST_ADAPTERS",
)


def entry(adapter: str | None) -> MemoryEntry:
    return MemoryEntry(
        id=1, type="learning", content="x", tags=[], created_at=0.0, source_adapter=adapter
    )


def test_default_policy_trusts_untagged_only() -> None:
    """By default untagged rows are trusted and every adapter's rows are not."""
    policy = MemoryTrustPolicy()
    assert (True, False) == (policy.is_trusted(entry(None)), policy.is_trusted(entry("codex")))


def test_trusted_adapter_is_admitted() -> None:
    """An adapter in trusted_adapters is trusted; others are still not."""
    policy = MemoryTrustPolicy(trusted_adapters=frozenset({"codex"}))
    assert (True, False) == (
        policy.is_trusted(entry("codex")),
        policy.is_trusted(entry("gemini-cli")),
    )


def test_disabled_policy_trusts_everything() -> None:
    """enabled=False trusts every row."""
    policy = MemoryTrustPolicy(enabled=False, trust_untagged=False)
    assert policy.is_trusted(entry("codex")) and policy.is_trusted(entry(None))


def test_untagged_can_be_distrusted() -> None:
    """trust_untagged=False refuses rows with no adapter."""
    assert not MemoryTrustPolicy(trust_untagged=False).is_trusted(entry(None))


def test_filter_entries_keeps_order() -> None:
    """filter_entries keeps only trusted entries, in their order."""
    entries = [entry(None), entry("codex"), entry("claude-code")]
    policy = MemoryTrustPolicy(trusted_adapters=frozenset({"claude-code"}))
    assert [None, "claude-code"] == [e.source_adapter for e in policy.filter_entries(entries)]


@pytest.mark.parametrize(
    "options",
    [
        {"trusted_adapters": "codex"},
        {"enabled": "no"},
        {"trust_untagged": 1},
        {"trusted_adapters": frozenset({5})},
    ],
)
def test_malformed_policy_is_refused(options: dict[str, object]) -> None:
    """A policy that could be misread (a string of adapters, a non-bool switch) is refused."""
    with pytest.raises((InvalidTypeError, ValueError)):
        MemoryTrustPolicy(**options)  # type: ignore[arg-type]


def test_is_trusted_fails_closed_on_other_objects() -> None:
    """Anything but a MemoryEntry is an error, not a guess."""
    with pytest.raises(InvalidTypeError):
        MemoryTrustPolicy().is_trusted(object())  # type: ignore[arg-type]


@pytest.mark.parametrize("value", ["0", "false", "FALSE", "No", "off", " Off "])
def test_env_switches_policy_off(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    """0/false/no/off in any case disables the policy."""
    monkeypatch.setenv("FACTLEDGER_TRUST_POLICY", value)
    assert not active_trust_policy().enabled


@pytest.mark.parametrize("value", ["", "1", "true", "yes", "on", "disabled", "nonsense"])
def test_env_anything_else_leaves_policy_on(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    """Unset, empty or any other value keeps the policy enabled (fail closed)."""
    monkeypatch.setenv("FACTLEDGER_TRUST_POLICY", value)
    assert active_trust_policy().enabled


def test_env_policy_unset_is_enabled() -> None:
    """With nothing set, the policy is on and trusts no adapter."""
    policy = active_trust_policy()
    assert (True, frozenset(), True) == (
        policy.enabled,
        policy.trusted_adapters,
        policy.trust_untagged,
    )


def test_env_adapters_are_parsed(monkeypatch: pytest.MonkeyPatch) -> None:
    """FACTLEDGER_TRUST_ADAPTERS is comma-separated; blanks are ignored."""
    monkeypatch.setenv("FACTLEDGER_TRUST_ADAPTERS", " codex, ,claude-code,")
    assert frozenset({"codex", "claude-code"}) == active_trust_policy().trusted_adapters


def test_bernstein_variables_are_honoured_when_ours_are_unset(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The replaced orchestrator's variables apply when factledger's are not set."""
    monkeypatch.setenv("BERNSTEIN_MEMORY_TRUST_POLICY", "off")
    monkeypatch.setenv("BERNSTEIN_MEMORY_TRUST_ADAPTERS", "codex")
    policy = active_trust_policy()
    assert (False, frozenset({"codex"})) == (policy.enabled, policy.trusted_adapters)


def test_our_variables_win_over_bernstein(monkeypatch: pytest.MonkeyPatch) -> None:
    """When both are set, FACTLEDGER_* decide, even when set to empty."""
    monkeypatch.setenv("BERNSTEIN_MEMORY_TRUST_POLICY", "off")
    monkeypatch.setenv("BERNSTEIN_MEMORY_TRUST_ADAPTERS", "codex")
    monkeypatch.setenv("FACTLEDGER_TRUST_POLICY", "")
    monkeypatch.setenv("FACTLEDGER_TRUST_ADAPTERS", "gemini-cli")
    policy = active_trust_policy()
    assert (True, frozenset({"gemini-cli"})) == (policy.enabled, policy.trusted_adapters)


def test_environment_is_read_on_every_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """Changing the environment changes the next policy; nothing is cached."""
    assert active_trust_policy().enabled
    monkeypatch.setenv("FACTLEDGER_TRUST_POLICY", "off")
    assert not active_trust_policy().enabled
