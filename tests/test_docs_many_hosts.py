"""README's "Many hosts" commands run, as written, against a fresh schema on the server.

The block opens by naming the server (`FACTLEDGER_DSN`), the role prefix (`ROLES`) and the
agent's login (`AGENT_DSN`); the test drops those three lines and sets the variables to its
own schema, then runs every other line with bash, stopping at the first command that fails.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.postgres import PgLog

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
PLACE = re.compile(r"^(?:export )?(FACTLEDGER_DSN|ROLES|AGENT_DSN)=")


def section_block() -> str:
    """The one `sh` block of the "Many hosts" section."""
    section = README.split("\n## Many hosts\n", 1)[1].split("\n## ", 1)[0]
    [block] = re.findall(r"```sh\n(.*?)```", section, flags=re.DOTALL)
    return str(block)


def test_the_many_hosts_commands_run(pg: PgLog, tmp_path: Path) -> None:
    """Set up the log and an agent's login, write as the agent on one host, read, audit and
    checkpoint on another, and verify against the checkpoint: every command exits 0."""
    lines = section_block().splitlines()
    placed = [found[1] for line in lines if (found := PLACE.match(line))]
    assert ["FACTLEDGER_DSN", "ROLES", "AGENT_DSN"] == placed
    script = "\n".join(line for line in lines if not PLACE.match(line))
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("FACTLEDGER_", "BERNSTEIN_"))
    }
    env.update(
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
        HOME=str(tmp_path),
        FACTLEDGER_DSN=pg.dsn,
        ROLES=pg.roles,
        AGENT_DSN=pg.as_role(f"{pg.roles}_codex"),
    )
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert 0 == done.returncode, done.stderr
    assert "https://api.internal" in done.stdout
    assert "codex" in done.stdout
    assert (tmp_path / "checkpoint.txt").exists()
    assert {"ops-cache.db", "host-a-cache.db"} <= {p.name for p in tmp_path.iterdir()}
