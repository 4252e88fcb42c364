"""Memory and facts: share, query, add, list, remove."""

from __future__ import annotations

import click
import msgspec

from eventlog import InvalidInputError
from projections import SCOPES, Fact, environment, redact_value
from replay.cli.app import EXIT_OK, Session, app

FACT_COLUMNS = ("key", "value", "producer_task_id", "source_adapter", "position", "ts_ns")
ENTRY_COLUMNS = ("id", "type", "tags", "content", "source_adapter", "task_id", "created_at")

scope_option = click.option(
    "--scope", type=click.Choice(sorted(SCOPES)), default="project", show_default=True
)


@app.command("share")
@click.argument("key")
@click.argument("value")
@click.option("--tag", required=True, help="the fact's tag")
@scope_option
@click.pass_obj
def share(session: Session, key: str, value: str, tag: str, scope: str) -> int:
    """Publish a fact under a tag and key."""
    with session.store(create=True) as store:
        fact = session.kb(store).publish(tag, key, value, scope=scope)
    session.emit(
        fact,
        f"published {fact.tag}/{fact.key} ({fact.scope}) at position {fact.position} "
        f"by {fact.producer_task_id}, adapter {fact.source_adapter or 'none'}, "
        f"{fact.content_hash}",
    )
    return EXIT_OK


@app.command("query")
@click.option("--tag", required=True, help="the tag to read")
@scope_option
@click.option("--raw", is_flag=True, help="print stored values verbatim")
@click.pass_obj
def query(session: Session, tag: str, scope: str, raw: bool) -> int:
    """Show the current facts under a tag (redacted unless --raw)."""
    with session.store() as store:
        facts = list(session.kb(store).subscribe(tag, scope=scope))
    shown = facts if raw else [_redacted(fact) for fact in facts]
    session.emit_rows(shown, FACT_COLUMNS, f"no facts under tag {tag!r} ({scope} scope)")
    return EXIT_OK


def _redacted(fact: Fact) -> Fact:
    return msgspec.structs.replace(fact, value=redact_value(fact.value))


@app.command("add")
@click.argument("content")
@click.option("--type", "type_", default="convention", show_default=True, help="memory type")
@click.option("--tag", "tags", multiple=True, help="a tag (repeat for more)")
@click.option("--importance", type=float, default=1.0, show_default=True, help="0.0 to 1.0")
@click.option("--task-id", help="default: the task id from the environment")
@click.pass_obj
def add(
    session: Session,
    content: str,
    type_: str,
    tags: tuple[str, ...],
    importance: float,
    task_id: str | None,
) -> int:
    """Add a memory entry."""
    with session.store(create=True) as store:
        entry_id = store.add(
            type_, content, list(tags), importance, task_id or environment.task_id()
        )
    session.emit({"id": entry_id}, f"added memory entry #{entry_id}")
    return EXIT_OK


@app.command("list")
@click.option("--type", "type_", help="only entries of this type")
@click.option("--tag", "tags", multiple=True, help="only entries with this tag (repeatable)")
@click.option("--limit", type=int, default=20, show_default=True)
@click.option("--adapter", "adapters", multiple=True, help="read only these adapters' entries")
@click.pass_obj
def list_(
    session: Session,
    type_: str | None,
    tags: tuple[str, ...],
    limit: int,
    adapters: tuple[str, ...],
) -> int:
    """List visible memory entries, newest first."""
    with session.store() as store:
        entries = store.query(
            type=type_,
            tags=list(tags) or None,
            limit=limit,
            read_only_from_adapters=list(adapters) or None,
        )
    session.emit_rows(entries, ENTRY_COLUMNS, "no entries")
    return EXIT_OK


@app.command("remove")
@click.argument("entry_id", metavar="ID", type=int)
@click.pass_obj
def remove(session: Session, entry_id: int) -> int:
    """Stop showing a memory entry (the log keeps it)."""
    with session.store() as store:
        if not store.remove(entry_id):
            raise InvalidInputError(f"no visible entry #{entry_id}")
    session.emit({"removed": entry_id}, f"removed memory entry #{entry_id} (the log keeps it)")
    return EXIT_OK
