"""The `factledger` group: the options every command takes, logging to stderr, and errors
turned into one line on stderr with an exit code.

Exit codes: 0 done, 1 an error or bad input, 2 tampering found (commands that check say so),
130 interrupted, 141 standard output closed early.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from contextlib import closing
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import click

from eventlog import (
    BoundLog,
    FactledgerError,
    InvalidInputError,
    LogMissingError,
    StorageError,
    __version__,
    open_log,
)
from eventlog.checks import check_actor, check_identifier, check_optional_actor, is_dsn
from projections import (
    CrossTaskKB,
    MemoryTrustPolicy,
    MemoryView,
    SQLiteMemoryStore,
    active_trust_policy,
    open_view,
)
from projections.internal import (
    cache_hint,
    environment,
)
from replay.bootstrap import holds_log
from replay.cli import output
from replay.cli.logs import logging_to_stderr
from replay.keys import OperatorKey, read_operator_key
from replay.ledger import Ledger
from replay.operators import Actor

EXIT_OK, EXIT_ERROR, EXIT_TAMPERED, EXIT_INTERRUPTED, EXIT_PIPE = 0, 1, 2, 130, 141
PROG = "factledger"
DB_HELP = (
    f"database path (default: $FACTLEDGER_DB, else {environment.DB.default}); "
    "with --dsn, this host's cache of the log"
)
DSN_HELP = (
    "the log in PostgreSQL, postgresql://... (default: $FACTLEDGER_DSN); "
    "--db then names this host's read-model cache"
)


@dataclass(frozen=True)
class Session:
    """What every command is given besides its own arguments: `--db`, `--dsn` and `--json`,
    from before or after the command's name (after wins), and the environment's attribution.

    Without a DSN, `db` is the file holding the log and its read model. With one, the log is
    in PostgreSQL and `db` is this host's cache of it: writes append to the log through the
    cache, reads read the cache caught up, and audits and operator actions go through one
    `Ledger` of the log with that cache."""

    db: str
    as_json: bool
    dsn: str | None = None
    db_named: bool = False
    """Whether `db` was named (`--db` or FACTLEDGER_DB) rather than the default."""

    def existing_db(self) -> str:
        """The database path, which must exist: reading never creates a database."""
        if not Path(self.db).exists():
            raise StorageError(f"no database at {self.db} (choose one with --db or FACTLEDGER_DB)")
        return self.db

    def ledger(self, *, read_only: bool = True, create: bool = False) -> Ledger:
        """The log as one `Ledger` for this command: the DSN's, with this host's cache
        (`db`), else the `db` file, which must exist unless the command may `create` it
        (then it is opened for writing)."""
        dsn = self.log_dsn()
        if dsn is not None:
            return Ledger.open(dsn, cache=self.db, read_only=read_only)
        return Ledger.open(self.db if create else self.existing_db(), read_only=read_only)

    def log_dsn(self) -> str | None:
        """The DSN of the log in PostgreSQL, checked, or None for a log in the `db` file."""
        if self.dsn is not None and not is_dsn(self.dsn):
            raise click.UsageError(
                f"--dsn (or {environment.DSN.source()}) must be a postgresql:// URI, "
                "not a file: give a file with --db"
            )
        return self.dsn

    def needs_dsn(self) -> str:
        """The DSN, which this command cannot do without."""
        dsn = self.log_dsn()
        if dsn is None:
            raise click.UsageError(f"give --dsn postgresql://... or set {environment.DSN.source()}")
        return dsn

    def attribution(self) -> tuple[str, str, str | None]:
        """(task, run or '', adapter or None) from the environment, each checked under the
        name of the variable that set it."""
        return (
            check_actor(environment.TASK_ID.source(), environment.task_id()),
            check_actor(environment.RUN_ID.source(), environment.run_id(), allow_empty=True),
            check_optional_actor(environment.ADAPTER.source(), environment.adapter()),
        )

    def reader_adapter(self) -> str | None:
        """The adapter a read is made as: the environment's, else (a log in PostgreSQL) the
        one the login is bound to, else none (an operator)."""
        adapter = self.attribution()[2]
        dsn = self.log_dsn()
        if adapter is not None or dsn is None:
            return adapter
        with closing(open_log(dsn, read_only=True)) as log:
            return log.bound_adapter if isinstance(log, BoundLog) else None

    def view(self) -> MemoryView:
        """The knowledge base opened read-only, as investigations read it: the file's, or
        with a DSN this host's cache of the log (caught up; the log is only read)."""
        dsn = self.log_dsn()
        if dsn is None:
            return open_view(self.existing_db())
        return open_view(self.db, log=dsn)

    def store(self, *, create: bool = False) -> SQLiteMemoryStore:
        """The store, writing as the environment's actor. Only with `create` may it start a
        new log, and then it says so on stderr; otherwise the file must hold one."""
        task, run, adapter = self.attribution()
        dsn = self.log_dsn()
        if dsn is not None:
            if not create:
                open_log(dsn, read_only=True).close()
            return SQLiteMemoryStore(
                self.db,
                log=dsn,
                source_adapter=adapter,
                producer_task_id=task,
                run_id=run or None,
            )
        if create:
            new = self.creates_log()
        else:
            open_log(self.existing_db(), read_only=True).close()
        store = SQLiteMemoryStore(
            self.db, source_adapter=adapter, producer_task_id=task, run_id=run or None
        )
        if create and new:
            self.created_log()
        return store

    def creates_log(self) -> bool:
        """Whether a write now would start a new log: the file holds none yet (a file that
        holds a log's remains is refused instead). A log in PostgreSQL is made by `pg init`
        (or by the first write of a role that may create tables), and not reported here."""
        return self.dsn is None and not holds_log(self.db)

    def created_log(self) -> None:
        """Say on stderr that a write started a new log, so a mistyped --db is noticed."""
        sys.stderr.write(f"{PROG}: created a new factledger log at {self.db}\n")

    def actor(self) -> Actor:
        """Who the command acts as: the environment's task, run and adapter."""
        task, run, adapter = self.attribution()
        return Actor(producer_task_id=task, run_id=run or None, source_adapter=adapter)

    def needs_run(self, scope: str | None) -> None:
        """Refuse run scope when the environment names no run."""
        if scope == "run" and not environment.run_id():
            raise InvalidInputError(
                f"--scope run needs a run id: set {environment.RUN_ID.source()}"
            )

    def trust_policy(self) -> MemoryTrustPolicy:
        """The environment's trust policy, its adapters checked under the variable's name."""
        for name in environment.trusted_adapters():
            check_identifier(f"an adapter in {environment.TRUST_ADAPTERS.source()}", name)
        return active_trust_policy()

    def operator_key(self, given: str | None) -> OperatorKey | None:
        """The operator key from `--key`, else FACTLEDGER_OPERATOR_KEY, read now (or None)."""
        path = given or environment.operator_key()
        return None if path is None else read_operator_key(path)

    def kb(self, store: SQLiteMemoryStore) -> CrossTaskKB:
        """The knowledge base over `store`, attributed from the environment."""
        task, run, adapter = self.attribution()
        return CrossTaskKB(store, run_id=run, producer_task_id=task, source_adapter=adapter)

    def emit(self, value: Any, text: str | None = None) -> None:
        """Print `value` as JSON with --json, else `text` (or `value` readably)."""
        if self.as_json:
            output.show_json(value)
        elif text is not None:
            output.say(text)
        else:
            output.show(value)

    def emit_rows(self, rows: Sequence[Any], columns: Sequence[str], empty: str) -> None:
        """Print rows as JSON with --json, else as a table of `columns` (or `empty`)."""
        if self.as_json:
            output.show_json(rows)
        elif rows:
            output.show(rows, columns)
        else:
            output.say(empty)


def fail(message: str, *, code: int = EXIT_ERROR) -> int:
    """Report `message` as one line on stderr; return `code`."""
    line = " ".join(message.splitlines())
    sys.stderr.write(f"{PROG}: error: {output.cell(line)}\n")
    return code


def shared_options() -> list[click.Parameter]:
    """--db, --dsn and --json, which the group and every command take."""
    return [
        click.Option(["--db"], metavar="PATH", help=DB_HELP),
        click.Option(["--dsn"], metavar="DSN", help=DSN_HELP),
        click.Option(["--json", "as_json"], is_flag=True, help="print machine-readable JSON"),
    ]


def _summary(command: click.Command) -> str:
    """A command's summary in the command list: its help's first paragraph, whole."""
    return " ".join((command.short_help or command.help or "").split("\n\n")[0].split())


class _Command(click.Command):
    """A command that takes --db, --dsn and --json after its name too, and whose summary in
    the command list is its help's first paragraph, whole."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.params += shared_options()

    def invoke(self, ctx: click.Context) -> Any:
        before = ctx.find_object(Session) or Session(
            environment.db_path(),
            as_json=False,
            dsn=environment.dsn(),
            db_named=environment.db_named(),
        )
        db, dsn, as_json = ctx.params.pop("db"), ctx.params.pop("dsn"), ctx.params.pop("as_json")
        ctx.obj = replace(
            before,
            db=db or before.db,
            dsn=dsn or before.dsn,
            as_json=as_json or before.as_json,
            db_named=bool(db) or before.db_named,
        )
        return super().invoke(ctx)

    def get_short_help_str(self, limit: int = 45) -> str:
        return _summary(self)


class _Group(click.Group):
    """Runs one command; what goes wrong in it becomes one line on stderr and an exit code.
    Its subgroups are of this class too, and their commands take the shared options."""

    command_class = _Command
    group_class = type

    def get_short_help_str(self, limit: int = 45) -> str:
        return _summary(self)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except LogMissingError as exc:
            return fail(str(exc) + cache_hint(exc.remnants))
        except FactledgerError as exc:
            return fail(str(exc))
        except BrokenPipeError:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return EXIT_PIPE
        except OSError as exc:
            return fail(f"{exc.strerror or exc}: {exc.filename or ''}".rstrip(": "))
        except KeyboardInterrupt:
            return fail("interrupted", code=EXIT_INTERRUPTED)
        except Exception as exc:
            if environment.debug():
                raise
            return fail(
                f"internal error: {type(exc).__name__}: {exc} "
                "(FACTLEDGER_DEBUG=1 shows a traceback)"
            )


@click.group(
    PROG,
    cls=_Group,
    params=shared_options(),
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog="Every command takes --db PATH, --dsn DSN and --json, before or after its name. "
    "`factledger COMMAND --help` describes one command.",
)
@click.version_option(__version__, "--version", prog_name=PROG, message="%(prog)s %(version)s")
@click.pass_context
def app(ctx: click.Context, db: str | None, dsn: str | None, as_json: bool) -> None:
    """Shared agent memory on an append-only, hash-chained log: who wrote every byte, every
    version, and the audit trail behind every prompt. New here? Run `factledger demo`.

    Writes are attributed from the environment (FACTLEDGER_TASK_ID, FACTLEDGER_RUN_ID,
    FACTLEDGER_ADAPTER; README lists every variable). With --dsn (or FACTLEDGER_DSN) the
    log is in PostgreSQL and --db names this host's cache of it.
    """
    ctx.obj = Session(
        db=db or environment.db_path(),
        as_json=as_json,
        dsn=dsn or environment.dsn(),
        db_named=bool(db) or environment.db_named(),
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run one `factledger` command (`argv`, else the process's arguments); return its exit
    code."""
    with logging_to_stderr():
        try:
            code = app.main(args=argv, prog_name=PROG, standalone_mode=False)
        except click.exceptions.NoArgsIsHelpError as exc:
            exc.show()
            return EXIT_ERROR
        except click.UsageError as exc:
            where = exc.ctx.command_path if exc.ctx is not None else PROG
            return fail(f"{exc.format_message()} (see {where} --help)")
        except click.ClickException as exc:
            return fail(exc.format_message())
        except click.Abort:
            return fail("interrupted", code=EXIT_INTERRUPTED)
    return code if isinstance(code, int) else EXIT_OK
