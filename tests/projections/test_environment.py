"""The environment's settings: one precedence rule for every variable, typed accessors."""

from __future__ import annotations

import pytest

from projections._environment import SETTINGS
from projections.internal import (
    environment,
)


def test_every_setting_names_factledger_first() -> None:
    """Each setting has a FACTLEDGER_* variable, first; the others are BERNSTEIN_* ones."""
    for setting in SETTINGS:
        first, *others = setting.variables
        assert first.startswith("FACTLEDGER_")
        assert all(name.startswith("BERNSTEIN_") for name in others)


def test_unset_settings_take_their_defaults() -> None:
    """With nothing set, every accessor returns the documented default."""
    assert (".sdd/memory/memory.db", "manual-cli", "", None) == (
        environment.db_path(),
        environment.task_id(),
        environment.run_id(),
        environment.adapter(),
    )
    assert (True, frozenset(), False) == (
        environment.trust_policy_enabled(),
        environment.trusted_adapters(),
        environment.debug(),
    )


@pytest.mark.parametrize("setting", [s for s in SETTINGS if len(s.variables) > 1])
def test_factledger_wins_over_bernstein(
    monkeypatch: pytest.MonkeyPatch, setting: environment.Setting
) -> None:
    """Both set: the FACTLEDGER_* value decides; only BERNSTEIN_* set: it decides."""
    ours, theirs = setting.variables
    monkeypatch.setenv(theirs, "from-bernstein")
    assert "from-bernstein" == setting.value()
    monkeypatch.setenv(ours, " from-factledger ")
    assert "from-factledger" == setting.value()


@pytest.mark.parametrize("setting", [s for s in SETTINGS if len(s.variables) > 1])
def test_an_empty_factledger_variable_still_decides(
    monkeypatch: pytest.MonkeyPatch, setting: environment.Setting
) -> None:
    """FACTLEDGER_* set to empty (or blanks) means the default, whatever BERNSTEIN_* says."""
    ours, theirs = setting.variables
    monkeypatch.setenv(theirs, "from-bernstein")
    monkeypatch.setenv(ours, "  ")
    assert setting.default == setting.value()


def test_typed_accessors(monkeypatch: pytest.MonkeyPatch) -> None:
    """Switches read 0/false/no/off in any case as off; adapter lists split on commas."""
    monkeypatch.setenv("FACTLEDGER_TRUST_POLICY", "OFF")
    monkeypatch.setenv("FACTLEDGER_TRUST_ADAPTERS", " codex, ,claude-code,")
    monkeypatch.setenv("FACTLEDGER_DEBUG", "1")
    monkeypatch.setenv("FACTLEDGER_ADAPTER", "codex")
    assert (False, frozenset({"codex", "claude-code"}), True, "codex") == (
        environment.trust_policy_enabled(),
        environment.trusted_adapters(),
        environment.debug(),
        environment.adapter(),
    )
    monkeypatch.setenv("FACTLEDGER_DEBUG", "no")
    assert not environment.debug()
