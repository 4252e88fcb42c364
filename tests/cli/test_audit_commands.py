"""The audit commands from the shell: verify's exit codes, checkpoints, proofs, rebuild,
history, blame, diff, as-of, and the demo."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.cli.conftest import Result

Cli = Callable[..., Result]


@pytest.fixture
def populated(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> Cli:
    cli("add", "Run tests with pytest -q", "--tag", "backend")
    cli("share", "users", "{name: str}", "--tag", "api-schema")
    monkeypatch.setenv("FACTLEDGER_ADAPTER", "evil")
    cli("share", "users", "POISON", "--tag", "api-schema")
    monkeypatch.delenv("FACTLEDGER_ADAPTER")
    return cli


def tamper(db: Path, sql: str) -> None:
    raw = sqlite3.connect(db)
    for table in ("fl_events", "fl_content"):
        raw.execute(f"DROP TRIGGER IF EXISTS {table}_no_update")
        raw.execute(f"DROP TRIGGER IF EXISTS {table}_no_delete")
    raw.execute(sql)
    raw.commit()
    raw.close()


def test_verify_exit_codes(populated: Cli, tmp_path: Path) -> None:
    """verify exits 0 on an intact log, 2 when a text beside the chain or a chained row was
    edited, 1 on an empty log."""
    ok = populated("verify", "--json")
    assert (0, True, 3, []) == (
        ok.code,
        ok.json()["ok"],
        ok.json()["checked"],
        ok.json()["findings"],
    )
    tamper(
        tmp_path / "cli.db",
        "UPDATE fl_content SET text = CAST('poison' AS BLOB) WHERE position = 3",
    )
    bad = populated("verify", "--json")
    assert (2, False, 3, "content_mismatch") == (
        bad.code,
        bad.json()["ok"],
        bad.json()["first_bad_position"],
        bad.json()["problem"],
    )
    assert [(3, "mismatch", "evil")] == [
        (f["position"], f["problem"], f["source_adapter"]) for f in bad.json()["findings"]
    ]
    tamper(
        tmp_path / "cli.db",
        "UPDATE fl_events SET body = replace(body, 'api-schema', 'api-schemb') WHERE position = 2",
    )
    broken = populated("verify", "--json")
    assert (2, 2, "chain_broken") == (
        broken.code,
        broken.json()["first_bad_position"],
        broken.json()["problem"],
    )
    empty = tmp_path / "empty.db"
    populated("add", "x", db_path=str(empty))
    sqlite3.connect(empty).close()
    fresh = tmp_path / "fresh.db"
    from eventlog import open_log

    open_log(fresh).close()
    assert 1 == populated("verify", db_path=str(fresh)).code


def test_checkpoint_then_verify_catches_a_cut_tail(populated: Cli, tmp_path: Path) -> None:
    """A checkpoint taken earlier makes verify exit 2 after the tail is cut off; so does the
    read model's own checkpoint in the file, which folded past the new head."""
    out = tmp_path / "cp.txt"
    taken = populated("checkpoint", "--out", str(out))
    assert 0 == taken.code and out.read_text(encoding="utf-8").startswith("factledger/")
    assert 0 == populated("verify", "--checkpoint", str(out)).code
    tamper(tmp_path / "cli.db", "DELETE FROM fl_events WHERE position = 3")
    alone = populated("verify", "--json")
    assert (2, "read_model_drift") == (alone.code, alone.json()["problem"])
    assert "past the log's head 2" in alone.json()["reason"]
    held = populated("verify", "--checkpoint", str(out), "--json")
    assert (2, False, "tail_cut") == (held.code, held.json()["ok"], held.json()["problem"])


def test_signed_checkpoint_and_key_checks(populated: Cli, tmp_path: Path) -> None:
    """keygen writes a 0600 key pair; a signed checkpoint verifies with its public key and
    fails with another's; --pub needs --checkpoint; an open private key is refused."""
    key, other = tmp_path / "op.key", tmp_path / "other.key"
    assert 0 == populated("keygen", str(key)).code
    populated("keygen", str(other))
    assert 0o600 == os.stat(key).st_mode & 0o777
    assert 1 == populated("keygen", str(key)).code
    cp = tmp_path / "signed.txt"
    populated("checkpoint", "--key", str(key), "--out", str(cp))
    assert 0 == populated("verify", "--checkpoint", str(cp), "--pub", f"{key}.pub").code
    forged = populated("verify", "--checkpoint", str(cp), "--pub", f"{other}.pub")
    assert 2 == forged.code and "no valid signature" in forged.err
    assert 1 == populated("verify", "--pub", f"{key}.pub").code
    os.chmod(key, 0o644)
    refused = populated("checkpoint", "--key", str(key))
    assert 1 == refused.code and "Traceback" not in refused.err


def test_prove_gives_a_verifying_inclusion_proof(populated: Cli, tmp_path: Path) -> None:
    """prove prints an inclusion proof for a position; a position past the checkpoint fails."""
    cp = tmp_path / "cp.txt"
    populated("checkpoint", "--out", str(cp))
    proof = populated("prove", "2", "--checkpoint", str(cp), "--json")
    assert 0 == proof.code
    assert (2, 3) == (proof.json()["position"], proof.json()["size"])
    assert 1 == populated("prove", "9", "--checkpoint", str(cp)).code
    assert 1 == populated("prove", "1", "--checkpoint", str(tmp_path / "missing.txt")).code


def test_rebuild_reports_and_repairs_drift(populated: Cli, tmp_path: Path) -> None:
    """rebuild exits 0 when the read model matches, 2 when it drifted, and --swap repairs."""
    assert 0 == populated("rebuild").code
    raw = sqlite3.connect(tmp_path / "cli.db")
    raw.execute("UPDATE fl_memory SET content = 'drifted' WHERE id = 1")
    raw.commit()
    raw.close()
    drifted = populated("rebuild", "--json")
    assert (2, False) == (drifted.code, drifted.json()["matches"])
    assert 0 == populated("rebuild", "--swap").code
    assert 0 == populated("rebuild").code
    assert ["Run tests with pytest -q"] == [
        e["content"] for e in populated("list", "--type", "convention", "--json").json()
    ]


def test_history_blame_diff_as_of(populated: Cli) -> None:
    """The history commands answer from the shell and parse back as JSON."""
    history = populated("history", "--tag", "api-schema", "--key", "users", "--json").json()
    assert [2, 3] == [v["position"] for v in history["versions"]]
    blame = populated("blame", "--tag", "api-schema", "--json").json()
    assert [(3, "evil")] == [(f["position"], f["source_adapter"]) for f in blame["facts"]]
    changes = populated("diff", "2", "3", "--json").json()
    assert [3] == [c["by_position"] for c in changes["changed"]]
    then = populated("as-of", "--position", "2", "--tag", "api-schema", "--json").json()
    assert ["{name: str}"] == [f["value"] for f in then]
    assert 1 == populated("as-of", "--position", "99").code
    assert 1 == populated("as-of", "--at", "yesterday-ish").code
    assert "users" in populated("as-of", "--at", "2100-01-01T00:00:00", "--tag", "api-schema").out


def test_demo_runs_to_completion_and_narrates_every_step(cli: Cli, tmp_path: Path) -> None:
    """The demo plays in a fresh directory, exits 0, and mentions each step of the incident."""
    result = cli("demo", "--keep", str(tmp_path / "demo"), db_path=None)
    assert (0, "") == (result.code, result.err)
    for phrase in (
        "the log with it (factledger init --operator-key)",
        "is registered at position 1, signed by itself",
        "publishes the API schema",
        "plants a poisoned value",
        "kept out 4 (untrusted_adapter)",
        "does include the poison",
        "blast-radius",
        "reached the prompt of: ['frontend-1']",
        "quarantines evil-cli",
        "kept out 4 (quarantined)",
        "verify: ok",
        "verify: FAILED at position 4",
        "Done.",
    ):
        assert phrase in result.out
    assert (tmp_path / "demo" / "checkpoint.txt").exists()
