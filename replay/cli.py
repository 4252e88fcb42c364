"""The `factledger` command: each command opens the database, makes one library call, renders
the result, and turns library errors into one line on stderr and a non-zero exit code."""

from __future__ import annotations

import argparse
import importlib.metadata
import logging
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn, TextIO

import msgspec
import structlog

from eventlog import FactledgerError, InvalidInputError, StorageError
from projections import CrossTaskKB, Fact, SQLiteMemoryStore, redact_value
from replay.arguments import add_arguments
from replay.render import table, to_json, to_text

EXIT_OK, EXIT_ERROR, EXIT_TAMPERED = 0, 1, 2
DEFAULT_DB = ".sdd/memory/memory.db"
Handler = Callable[[argparse.Namespace], int]


# -- attribution from the environment ----------------------------------------------------


def _env(*names: str) -> str | None:
    for name in names:
        if os.environ.get(name, "").strip():
            return os.environ[name].strip()
    return None


def task_id() -> str:
    """The producing task: BERNSTEIN_TASK_ID, else FACTLEDGER_TASK_ID, else 'manual-cli'."""
    return _env("BERNSTEIN_TASK_ID", "FACTLEDGER_TASK_ID") or "manual-cli"


def run_id() -> str:
    """The run: BERNSTEIN_RUN_ID, else FACTLEDGER_RUN_ID, else none."""
    return _env("BERNSTEIN_RUN_ID", "FACTLEDGER_RUN_ID") or ""


def adapter() -> str | None:
    """The adapter stamped on writes: FACTLEDGER_ADAPTER, else BERNSTEIN_ADAPTER, else none."""
    return _env("FACTLEDGER_ADAPTER", "BERNSTEIN_ADAPTER")


# -- output --------------------------------------------------------------------------------


class Progress:
    """A one-line progress counter on a terminal; silent when stderr is piped."""

    def __init__(self, label: str, stream: TextIO | None = None) -> None:
        self._label = label
        self._stream = stream or sys.stderr
        self._enabled = self._stream.isatty()
        self._last = 0.0

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if self._enabled and (now - self._last > 0.1 or done == total):
            self._last = now
            self._stream.write(f"\r{self._label} {done:,}/{total:,} events")
            self._stream.flush()

    def finish(self) -> None:
        """Clear the progress line."""
        if self._enabled and self._last:
            self._stream.write("\r\x1b[K")
            self._stream.flush()


FACT_COLUMNS = ["key", "value", "producer_task_id", "source_adapter", "position", "ts_ns"]
ENTRY_COLUMNS = ["id", "type", "tags", "content", "source_adapter", "task_id", "created_at"]


def emit(args: argparse.Namespace, value: Any, text: str | None = None) -> None:
    """Print `value` as JSON with --json, else as `text` (or its readable rendering)."""
    print(to_json(value) if args.json else (text if text is not None else to_text(value)))


def emit_rows(
    args: argparse.Namespace, rows: Sequence[Any], columns: list[str], empty: str
) -> None:
    """Print rows as JSON with --json, else as a table of `columns` (or `empty`)."""
    emit(args, rows, table(rows, columns) if rows else empty)


def _existing(path: str) -> str:
    if not Path(path).exists():
        raise StorageError(f"no database at {path} (choose one with --db or FACTLEDGER_DB)")
    return path


def _store(args: argparse.Namespace, *, create: bool = False) -> SQLiteMemoryStore:
    return SQLiteMemoryStore(args.db if create else _existing(args.db), source_adapter=adapter())


def _kb(store: SQLiteMemoryStore) -> CrossTaskKB:
    return CrossTaskKB(store, run_id=run_id(), producer_task_id=task_id(), source_adapter=adapter())


# -- memory and facts ----------------------------------------------------------------------


def cmd_share(args: argparse.Namespace) -> int:
    with _store(args, create=True) as store:
        fact = _kb(store).publish(args.tag, args.key, args.value, scope=args.scope)
    emit(
        args,
        fact,
        f"published {fact.tag}/{fact.key} ({fact.scope}) at position {fact.position} "
        f"by {fact.producer_task_id}, adapter {fact.source_adapter or 'none'}, "
        f"{fact.content_hash[:19]}…",
    )
    return EXIT_OK


def cmd_query(args: argparse.Namespace) -> int:
    with _store(args) as store:
        facts = list(_kb(store).subscribe(args.tag, scope=args.scope))
    shown = [f if args.raw else _redacted(f) for f in facts]
    emit_rows(args, shown, FACT_COLUMNS, f"no facts under tag {args.tag!r} ({args.scope} scope)")
    return EXIT_OK


def _redacted(fact: Fact) -> Fact:
    return msgspec.structs.replace(fact, value=redact_value(fact.value))


def cmd_add(args: argparse.Namespace) -> int:
    with _store(args, create=True) as store:
        entry_id = store.add(
            args.type, args.content, args.tag, args.importance, args.task_id or task_id()
        )
    emit(args, {"id": entry_id}, f"added memory entry #{entry_id}")
    return EXIT_OK


def cmd_list(args: argparse.Namespace) -> int:
    with _store(args) as store:
        entries = store.query(
            type=args.type, tags=args.tag, limit=args.limit, read_only_from_adapters=args.adapter
        )
    emit_rows(args, entries, ENTRY_COLUMNS, "no entries")
    return EXIT_OK


def cmd_remove(args: argparse.Namespace) -> int:
    with _store(args) as store:
        if not store.remove(args.id):
            raise InvalidInputError(f"no visible entry #{args.id}")
    emit(args, {"removed": args.id}, f"removed memory entry #{args.id} (the log keeps it)")
    return EXIT_OK


# -- audit -----------------------------------------------------------------------------------


def cmd_history(args: argparse.Namespace) -> int:
    from replay.history import history

    emit(
        args,
        history(_existing(args.db), scope=args.scope, tag=args.tag, key=args.key, run_id=args.run),
    )
    return EXIT_OK


def cmd_blame(args: argparse.Namespace) -> int:
    from replay.history import blame

    emit(args, blame(_existing(args.db), scope=args.scope, tag=args.tag, run_id=args.run))
    return EXIT_OK


def cmd_diff(args: argparse.Namespace) -> int:
    from replay.history import diff

    emit(args, diff(_existing(args.db), args.from_position, args.to_position, tag=args.tag))
    return EXIT_OK


def cmd_as_of(args: argparse.Namespace) -> int:
    from replay.timetravel import as_of

    view = as_of(_existing(args.db), position=args.position, ts_ns=args.at)
    if args.tag:
        facts = list(CrossTaskKB(view, run_id=run_id()).subscribe(args.tag, scope=args.scope))
        emit_rows(args, facts, FACT_COLUMNS, f"no facts under tag {args.tag!r} then")
    else:
        emit_rows(args, view.list(limit=args.limit), ENTRY_COLUMNS, "no entries then")
    return EXIT_OK


def cmd_verify(args: argparse.Namespace) -> int:
    from replay.audit import verify
    from replay.checkpoints import Checkpoint, load_key

    checkpoint = Checkpoint.parse(_read(args.checkpoint)) if args.checkpoint else None
    if args.key:
        if checkpoint is None:
            raise InvalidInputError("--key checks a checkpoint's MAC: give --checkpoint too")
        if not checkpoint.verify_mac(load_key(args.key)):
            raise TamperedCheckpoint(f"the checkpoint's MAC does not verify with {args.key}")
    progress = Progress("verified")
    report = verify(_existing(args.db), checkpoint=checkpoint, progress=progress)
    progress.finish()
    emit(args, report)
    if not report.ok:
        return EXIT_TAMPERED
    return EXIT_ERROR if report.checked == 0 else EXIT_OK


def cmd_checkpoint(args: argparse.Namespace) -> int:
    from replay.checkpoints import checkpoint

    taken = checkpoint(_existing(args.db), key=args.key)
    if args.out:
        Path(args.out).write_text(str(taken), encoding="utf-8")
    emit(args, taken, str(taken).rstrip("\n"))
    return EXIT_OK


def cmd_keygen(args: argparse.Namespace) -> int:
    from replay.checkpoints import generate_key

    generate_key(args.path)
    emit(args, {"key": args.path}, f"wrote a new operator key to {args.path} (mode 0600)")
    return EXIT_OK


def cmd_prove(args: argparse.Namespace) -> int:
    from replay.checkpoints import Checkpoint
    from replay.proofs import prove_inclusion, verify_inclusion

    checkpoint = Checkpoint.parse(_read(args.checkpoint))
    proof = prove_inclusion(_existing(args.db), args.position, checkpoint)
    if not verify_inclusion(proof, proof.leaf_hash, checkpoint):
        raise StorageError(f"the proof for position {args.position} does not verify")
    emit(args, proof)
    return EXIT_OK


def cmd_rebuild(args: argparse.Namespace) -> int:
    from replay.rebuild import rebuild

    progress = Progress("rebuilt")
    report = rebuild(_existing(args.db), swap=args.swap, progress=progress)
    progress.finish()
    emit(args, report)
    return EXIT_OK if report.matches or args.swap else EXIT_TAMPERED


# -- forensics ----------------------------------------------------------------------------------


def cmd_blast_radius(args: argparse.Namespace) -> int:
    from replay.forensics import blast_radius

    emit(
        args,
        blast_radius(
            _existing(args.db),
            source_adapter=args.adapter,
            producer_task_id=args.producer,
            positions=args.position,
            since_position=args.since,
        ),
    )
    return EXIT_OK


def cmd_quarantine(args: argparse.Namespace) -> int:
    from replay.quarantine import quarantine

    position = quarantine(
        _existing(args.db),
        positions=args.position,
        producer_task_id=args.producer,
        source_adapter=args.adapter,
        reason=args.reason,
        by=task_id(),
    )
    emit(args, {"quarantine_position": position}, f"quarantine recorded at position {position}")
    return EXIT_OK


def cmd_release(args: argparse.Namespace) -> int:
    from replay.quarantine import release

    position = release(
        _existing(args.db), args.quarantine_position, reason=args.reason, by=task_id()
    )
    emit(args, {"release_position": position}, f"release recorded at position {position}")
    return EXIT_OK


def cmd_export(args: argparse.Namespace) -> int:
    from replay.transfer import export_log

    progress = Progress("exported")
    if args.out:
        with open(args.out, "w", encoding="utf-8") as out:
            header = export_log(_existing(args.db), out, progress=progress)
        progress.finish()
        emit(args, header, f"exported {header.events} events to {args.out}")
    else:
        export_log(_existing(args.db), sys.stdout, progress=progress)
        progress.finish()
    return EXIT_OK


def cmd_import_legacy(args: argparse.Namespace) -> int:
    from replay.transfer import import_legacy

    emit(args, import_legacy(args.db, args.path))
    return EXIT_OK


def cmd_demo(args: argparse.Namespace) -> int:
    from replay.demo import run_demo

    return run_demo(sys.stdout, keep=args.keep)


def _read(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise StorageError(f"cannot read {path}: {exc.strerror}") from None


# -- parsing ---------------------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    """Usage errors exit 1 with one line: exit 2 means tampering was found."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_ERROR, f"factledger: error: {message} (see --help)\n")


COMMANDS: list[tuple[str, Handler, str]] = [
    ("share", cmd_share, "publish a fact under a tag and key"),
    ("query", cmd_query, "show the current facts under a tag (redacted unless --raw)"),
    ("add", cmd_add, "add a memory entry"),
    ("list", cmd_list, "list visible memory entries, newest first"),
    ("remove", cmd_remove, "stop showing a memory entry (the log keeps it)"),
    ("history", cmd_history, "every version of one fact or of all facts, with provenance"),
    ("blame", cmd_blame, "which event, producer and adapter set each current fact"),
    ("diff", cmd_diff, "facts added, changed and removed between two positions"),
    ("as-of", cmd_as_of, "the knowledge base as it was at a position or time"),
    ("verify", cmd_verify, "re-hash the whole log (exit 0 ok, 1 empty or bad input, 2 tampered)"),
    ("checkpoint", cmd_checkpoint, "take a checkpoint to store outside the database"),
    ("keygen", cmd_keygen, "create an operator key file for MAC-signed checkpoints"),
    ("prove", cmd_prove, "prove that an event is in the log a checkpoint describes"),
    ("rebuild", cmd_rebuild, "refold every projection from the log and compare (or --swap)"),
    ("blast-radius", cmd_blast_radius, "what a suspect wrote and which prompts it reached"),
    ("quarantine", cmd_quarantine, "keep a suspect's events from every reader"),
    ("release", cmd_release, "undo a quarantine"),
    ("export", cmd_export, "write the raw log as JSON Lines, verifiable offline"),
    ("import-legacy", cmd_import_legacy, "import the memory table of a legacy database"),
    ("demo", cmd_demo, "play a short poisoning incident in a temporary directory"),
]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser for every command."""
    common = _Parser(add_help=False)
    _add_common_options(common, given_only=True)
    parser = _Parser(
        prog="factledger",
        description="Shared agent memory on an append-only, hash-chained log: who wrote every "
        "byte, every version, and the audit trail behind every prompt. New here? Run "
        "`factledger demo`.",
        epilog="Every command takes --db PATH (default $FACTLEDGER_DB, else "
        f"{DEFAULT_DB}) and --json, before or after its name. `factledger COMMAND --help` "
        "describes one command.",
    )
    parser.add_argument("--version", action="version", version=f"factledger {_version()}")
    _add_common_options(parser, given_only=False)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    built = {
        name: commands.add_parser(name, parents=[common], help=text, description=text)
        for name, _, text in COMMANDS
    }
    for name, handler, _ in COMMANDS:
        built[name].set_defaults(handler=handler)
        add_arguments(name, built[name])
    return parser


def _add_common_options(parser: argparse.ArgumentParser, *, given_only: bool) -> None:
    """--db and --json, accepted before the command and after it. After it, an option
    left out must not overwrite what was given before (so its default is suppressed)."""
    parser.add_argument(
        "--db",
        default=argparse.SUPPRESS if given_only else os.environ.get("FACTLEDGER_DB") or DEFAULT_DB,
        help=f"database path (default: $FACTLEDGER_DB, else {DEFAULT_DB})",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        default=argparse.SUPPRESS if given_only else False,
        help="print machine-readable JSON",
    )


def _version() -> str:
    try:
        return importlib.metadata.version("factledger")
    except importlib.metadata.PackageNotFoundError:
        return "unknown (not installed)"


def configure_logging() -> None:
    """Library log events go to stderr, warnings and above; stdout stays for results."""
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; return its exit code."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exited:
        return exited.code if isinstance(exited.code, int) else EXIT_ERROR
    configure_logging()
    try:
        return int(args.handler(args))
    except TamperedCheckpoint as exc:
        return _fail(str(exc), code=EXIT_TAMPERED)
    except FactledgerError as exc:
        return _fail(str(exc))
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except OSError as exc:
        return _fail(f"{exc.strerror or exc}: {exc.filename or ''}".rstrip(": "))
    except KeyboardInterrupt:
        return _fail("interrupted", code=130)
    except Exception as exc:
        if os.environ.get("FACTLEDGER_DEBUG"):
            raise
        return _fail(
            f"internal error: {type(exc).__name__}: {exc} (FACTLEDGER_DEBUG=1 shows a traceback)"
        )


class TamperedCheckpoint(FactledgerError):
    """A checkpoint whose MAC does not verify: it may have been forged."""


def _fail(message: str, *, code: int = EXIT_ERROR) -> int:
    print(f"factledger: error: {message}", file=sys.stderr)
    return code
