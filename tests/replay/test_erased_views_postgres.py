"""The views of a PostgreSQL log read through a host's cache show an erased version as
erased, and its export passes the offline verifier given the operator's key."""

from __future__ import annotations

import io
import json
from pathlib import Path

from eventlog.postgres_admin import add_agent
from projections import CrossTaskKB, SQLiteMemoryStore
from replay import Ledger, generate_key, init_postgres, read_operator_key
from tests.postgres import PgLog
from tests.test_docs import docs_export_functions

SECRET = "pg-SECRETXYZZY-77"


def test_history_blast_radius_and_export_show_the_erasure(pg: PgLog, tmp_path: Path) -> None:
    key = tmp_path / "operator.key"
    generate_key(key)
    init_postgres(pg.dsn, role_prefix=pg.roles, key=key)
    add_agent(pg.dsn, f"{pg.roles}_codex", "codex", role_prefix=pg.roles)
    with SQLiteMemoryStore(tmp_path / "agent.db", log=pg.as_role(f"{pg.roles}_codex")) as store:
        kb = CrossTaskKB(store, producer_task_id="t1")
        kb.publish("api", "token", "see the vault", scope="project")
        leak = kb.publish("api", "token", SECRET, scope="project")
    with Ledger.open(pg.dsn, cache=tmp_path / "ops.db", read_only=False) as ledger:
        done = ledger.erase([leak.position], reason="leaked", key=key)
        _, version = ledger.history(tag="api", key="token").versions
        radius = ledger.blast_radius(positions=[leak.position])
        out = io.StringIO()
        ledger.export(out)
    assert ("erased", None) == (version.status, version.value)
    assert version.erased is not None
    key_id = read_operator_key(key).key_id
    assert (done.position, key_id) == (version.erased.erasure_position, version.erased.key_id)
    assert 1 == radius.summary.erased
    exported = out.getvalue()
    assert SECRET not in exported
    line = json.loads(exported.splitlines()[leak.position])
    assert "erased" == line["text_state"] and "text" not in line
    path = tmp_path / "log.jsonl"
    path.write_text(exported, encoding="utf-8")
    pub = Path(f"{key}.pub").read_text(encoding="utf-8")
    verify_export = docs_export_functions()["verify_export"]
    assert done.position == len(verify_export(path, [pub]))
