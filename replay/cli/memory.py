"""Memory and facts: share, query, tags, add, list, remove.

`add` and `share` take their text as an argument, as `-` (standard input) or with --file.
Reads by an agent (an adapter in FACTLEDGER_ADAPTER, or a PostgreSQL login bound to one)
show what its trust policy trusts, with its own adapter's writes, and say on stderr how many
rows they kept out; with --all they show every row. Each is receipted under the agent's
task, run and adapter, through the one read path (`projections._reading`). An operator (no
adapter) sees every row and writes nothing. Every row shown is marked with its trust under
the reader's policy.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click
import msgspec

from eventlog import MAX_CONTENT_BYTES, InvalidInputError
from projections import (
    AgentIdentity,
    MemoryTrustPolicy,
    MemoryView,
)
from projections.internal import (
    MEMORY_TYPES,
    SCOPES,
    agent_reading,
    check_allow_list,
    environment,
    list_tags,
    policy_for,
    reading,
    run_key,
)
from replay.cli import output
from replay.cli.app import EXIT_OK, Session, app
from replay.cli.files import STDIN, read_text
from replay.cli.masking import raw_option, shown
from replay.cli.params import ACTOR, ENTRY_ID, LIMIT, NAME, TAG

FACT_COLUMNS = ("key", "value", "producer_task_id", "source_adapter", "position", "ts_ns")
ENTRY_COLUMNS = ("id", "type", "tags", "content", "source_adapter", "task_id", "created_at")
TAG_COLUMNS = ("tag", "facts", "entries", "keys")
TRUST = "trust"

scope_option = click.option(
    "--scope", type=click.Choice(sorted(SCOPES)), default="project", show_default=True
)
file_option = click.option(
    "--file", "path", metavar="PATH", help="read the text from this file ('-': standard input)"
)
all_option = click.option(
    "--all",
    "show_all",
    is_flag=True,
    help="show every row, each marked with its trust (an agent sees only trusted rows without)",
)


def text_of(given: str | None, path: str | None, what: str) -> str:
    """The text to write: `given` (or standard input for '-'), else the file at `path`;
    empty or whitespace-only text is refused."""
    if (given is None) == (path is None):
        raise click.UsageError(f"give the {what}, '-' to read it from standard input, or --file")
    if path is not None or given == STDIN:
        text = read_text(path or STDIN, what, max_bytes=MAX_CONTENT_BYTES)
    else:
        assert given is not None
        text = given
    if not text.strip():
        raise InvalidInputError(f"the {what} is empty or only whitespace; nothing was written")
    return text


class CommandReader:
    """Who reads, and under which policy: an agent when the environment names an adapter (or
    the PostgreSQL login is bound to one), else an operator auditing the log."""

    def __init__(self, session: Session) -> None:
        task, run, _ = session.attribution()
        adapter = session.reader_adapter()
        self.session = session
        self.identity = AgentIdentity(task_id=task, run_id=run, adapter=adapter)
        self.is_agent = adapter is not None
        self.policy: MemoryTrustPolicy = policy_for(self.identity, session.trust_policy())

    def judging_store(self) -> MemoryView:
        """Where this reader's reads are judged: an agent's store, which its receipts are
        appended to; for an operator, the knowledge base opened read-only."""
        return self.session.store() if self.is_agent else self.session.view()

    def reading(self, store: MemoryView, show_all: bool) -> reading.Reading:
        """An agent's read, receipted (every row with --all); an operator's audit, every row
        and no receipt."""
        if not self.is_agent:
            return reading.Reading(None, self.policy)
        return agent_reading(store, self.identity, self.policy, show_all=show_all)

    def marked(self, rows: Sequence[Any], trust: Sequence[str]) -> list[dict[str, Any]]:
        """Each row as a dict of every field, with its trust under this reader's policy."""
        return [
            {**msgspec.structs.asdict(row), TRUST: verdict}
            for row, verdict in zip(rows, trust, strict=True)
        ]

    def kept_out(self, count: int, show_all: bool, *, offers_all: bool = True) -> None:
        """Say on stderr how many rows an agent's trusted-only read kept out (and, where the
        command `offers_all`, that --all shows them)."""
        if not self.is_agent or show_all:
            return
        rows = "row" if count == 1 else "rows"
        hint = "; --all shows every row, marked" if offers_all else ""
        output.note(
            f"kept out {count} {rows} the trust policy does not trust for adapter "
            f"{self.identity.adapter} ({environment.TRUST_ADAPTERS.source()} names the "
            f"adapters it trusts{hint})"
        )


@app.command("share")
@click.argument("key")
@click.argument("value", required=False)
@click.option("--tag", required=True, callback=TAG, help="the fact's tag")
@scope_option
@file_option
@click.pass_obj
def share(
    session: Session, key: str, value: str | None, tag: str, scope: str, path: str | None
) -> int:
    """Publish a fact under a tag and key: VALUE, '-' (standard input) or --file PATH.

    A value, tag or key holding a secret (an API key, a token, a private key, a password in
    a URL) is refused, naming the detector and the offset; FACTLEDGER_SECRETS=redact stores
    [REDACTED:<type>] in its place instead (docs/security.md).
    """
    text = text_of(value, path, "value")
    session.needs_run(scope)
    with session.store(create=True) as store:
        fact = session.kb(store).publish(tag, key, text, scope=scope)
    session.emit(
        fact,
        f"published {fact.tag}/{fact.key} ({fact.scope}) at position {fact.position} "
        f"by {fact.producer_task_id}, adapter {fact.source_adapter or 'none'}, "
        f"{fact.content_hash}",
    )
    return EXIT_OK


@app.command("query")
@click.option("--tag", required=True, callback=TAG, help="the tag to read")
@scope_option
@raw_option
@all_option
@click.pass_obj
def query(session: Session, tag: str, scope: str, raw: bool, show_all: bool) -> int:
    """Show the current facts under a tag, each with its trust; personal data masked unless
    --raw.

    An agent (FACTLEDGER_ADAPTER set, or a login bound to an adapter) sees each key's newest
    version its trust policy trusts, and is told on stderr how many versions were kept out;
    --all shows the current versions whatever wrote them. An agent's read is receipted.
    """
    session.needs_run(scope)
    reader = CommandReader(session)
    of_tag = (scope, run_key(scope, reader.identity.run_id), tag)
    with session.store() as store:
        found = reading.read(
            store,
            reader.reading(store, show_all),
            reading.current_facts(of_tag, None),
            tags=(tag,),
            limit=reading.NO_LIMIT,
            show=reading.shown_as_stored,
        )
    rows = shown(reader.marked(found.shown, found.trust), raw)
    session.emit_rows(rows, (*FACT_COLUMNS, TRUST), f"no facts under tag {tag!r} ({scope} scope)")
    reader.kept_out(len(found.kept_out), show_all)
    return EXIT_OK


@app.command("tags")
@scope_option
@raw_option
@click.pass_obj
def tags_(session: Session, scope: str, raw: bool) -> int:
    """List the tags under a scope: each with its facts' keys and how many entries carry it;
    personal data masked unless --raw.

    What to pass `query --tag`, `history` and `list --tag`. An agent (FACTLEDGER_ADAPTER
    set, or a login bound to an adapter) sees the tags and keys of what its trust policy
    trusts, and its read is receipted; an operator sees every one. Says on stderr when a
    bound cut the listing.
    """
    session.needs_run(scope)
    reader = CommandReader(session)
    with session.store() as store:
        listing = list_tags(store, reader.reading(store, False), scope, reader.identity.run_id)
    listing = shown(listing, raw)
    if session.as_json:
        output.show_json(listing)
    elif listing.tags:
        output.show(listing.tags, TAG_COLUMNS)
    else:
        output.say(f"no tags ({scope} scope)")
    if listing.truncated:
        output.note("the listing was cut: it reads at most 1000 tags, 1000 entries, 200 keys a tag")
    reader.kept_out(listing.kept_out, False, offers_all=False)
    return EXIT_OK


@app.command("add")
@click.argument("content", required=False)
@click.option(
    "--type",
    "type_",
    type=click.Choice(sorted(MEMORY_TYPES)),
    default="convention",
    show_default=True,
    help="memory type",
)
@click.option("--tag", "tags", multiple=True, callback=TAG, help="a tag (repeat for more)")
@click.option("--importance", type=float, default=1.0, show_default=True, help="0.0 to 1.0")
@click.option(
    "--task-id",
    callback=ACTOR,
    help="default: the task id from the environment (FACTLEDGER_TASK_ID)",
)
@file_option
@click.pass_obj
def add(
    session: Session,
    content: str | None,
    type_: str,
    tags: tuple[str, ...],
    importance: float,
    task_id: str | None,
    path: str | None,
) -> int:
    """Add a memory entry: CONTENT, '-' (standard input) or --file PATH.

    Content or a tag holding a secret (an API key, a token, a private key, a password in a
    URL) is refused, naming the detector and the offset; FACTLEDGER_SECRETS=redact stores
    [REDACTED:<type>] in its place instead (docs/security.md).
    """
    text = text_of(content, path, "content")
    with session.store(create=True) as store:
        entry_id = store.add(
            type_, text, list(tags), importance, task_id or session.attribution()[0]
        )
    session.emit({"id": entry_id}, f"added memory entry #{entry_id}")
    return EXIT_OK


@app.command("list")
@click.option("--type", "type_", type=click.Choice(sorted(MEMORY_TYPES)), help="only this type")
@click.option(
    "--tag", "tags", multiple=True, callback=TAG, help="only entries with this tag (repeatable)"
)
@click.option("--limit", type=LIMIT, default=20, show_default=True, help="at most this many")
@click.option(
    "--adapter",
    "adapters",
    multiple=True,
    callback=NAME,
    help="read only these adapters' entries (repeatable)",
)
@all_option
@raw_option
@click.pass_obj
def list_(
    session: Session,
    type_: str | None,
    tags: tuple[str, ...],
    limit: int,
    adapters: tuple[str, ...],
    show_all: bool,
    raw: bool,
) -> int:
    """List visible memory entries, newest first, each with its trust; personal data masked
    unless --raw.

    An agent (FACTLEDGER_ADAPTER set, or a login bound to an adapter) sees the entries its
    trust policy trusts, and is told on stderr how many newer ones were kept out; --all
    shows every entry. An agent's read is receipted. Says on stderr when --limit cut the
    list.
    """
    reader = CommandReader(session)
    allowed = check_allow_list(list(adapters) or None)
    with session.store() as store:
        found = reading.read(
            store,
            reader.reading(store, show_all),
            reading.newest_entries(type_, tags, allowed, limit),
            tags=tags,
            limit=limit,
            show=reading.shown_as_stored,
        )
    session.emit_rows(
        shown(reader.marked(found.shown, found.trust), raw),
        (*ENTRY_COLUMNS, TRUST),
        "no entries",
        limit=limit,
        truncated=found.more,
    )
    if found.more:
        output.note(f"showing the newest {limit} entries; older ones match (--limit N shows more)")
    reader.kept_out(len(found.kept_out), show_all)
    return EXIT_OK


@app.command("remove")
@click.argument("entry_id", metavar="ID", type=ENTRY_ID)
@click.pass_obj
def remove(session: Session, entry_id: int) -> int:
    """Stop showing a memory entry (the log keeps it)."""
    with session.store() as store:
        if not store.remove(entry_id):
            raise InvalidInputError(f"no visible entry #{entry_id}")
    session.emit({"removed": entry_id}, f"removed memory entry #{entry_id} (the log keeps it)")
    return EXIT_OK
