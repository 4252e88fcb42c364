"""Agents: `mcp`, the knowledge base as MCP tools for one agent, its identity fixed here."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from eventlog.checks import check_actor
from projections import AgentIdentity, SQLiteMemoryStore
from replay.cli.app import EXIT_OK, Session, app

INSTALL_HINT = "factledger mcp needs the MCP SDK: pip install 'factledger[mcp]'"
SDK_MODULES = ("mcp", "pydantic", "anyio")
UNNAMED_DB = (
    "factledger mcp needs the log named: give --db /absolute/path/memory.db (or set "
    "FACTLEDGER_DB); an MCP client starts the server in a directory of its own choosing, so "
    "nothing is created there by default"
)


@app.command("mcp")
@click.option("--adapter", metavar="NAME", help="the adapter driving the agent, e.g. claude-code")
@click.option("--task-id", metavar="ID", required=True, help="the agent's task")
@click.option("--run-id", metavar="ID", default="", help="the agent's run (for run-scoped facts)")
@click.option(
    "--operator", is_flag=True, help="serve with no adapter: every write is an operator write"
)
@click.pass_obj
def mcp(session: Session, adapter: str | None, task_id: str, run_id: str, operator: bool) -> int:
    """Serve the knowledge base to one agent as MCP tools over stdio.

    Tools: publish, subscribe, add, recall, history, tags. The log must be named with --db
    (an absolute path) or FACTLEDGER_DB; with --dsn, --db names this host's cache. The
    agent's identity comes from these options only, never from the environment or a tool
    argument: every write is stamped with it, and reads show the agent only what the trust
    policy trusts (FACTLEDGER_TRUST_*) and its own adapter's writes. Standard output carries
    the protocol alone; logs go to standard error. Needs the `mcp` extra.
    """
    if operator == (adapter is not None):
        raise click.UsageError(
            "give --adapter NAME for an agent, or --operator to serve as an operator"
        )
    identity = AgentIdentity(
        task_id=check_actor("--task-id", task_id),
        run_id=check_actor("--run-id", run_id, allow_empty=True),
        adapter=None if adapter is None else check_actor("--adapter", adapter),
    )
    try:
        from replay.mcp import build_server
    except ImportError as exc:
        if (exc.name or "").split(".")[0] not in SDK_MODULES:
            raise
        raise click.ClickException(INSTALL_HINT) from None
    if not session.db_named:
        raise click.UsageError(UNNAMED_DB)
    dsn = session.log_dsn()
    existed = dsn is not None or Path(session.db).exists()
    SQLiteMemoryStore(session.db, log=dsn, source_adapter=identity.adapter).close()
    if not existed:
        sys.stderr.write(f"factledger: created a new factledger log at {session.db}\n")
    build_server(session.db, identity, log=dsn).run("stdio")
    return EXIT_OK
