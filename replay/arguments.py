"""The arguments of each `factledger` command (the handlers are in `replay.cli`)."""

from __future__ import annotations

import argparse
import datetime
from collections.abc import Callable


def time_ns(text: str) -> int:
    """An ISO 8601 time (local time if it names no offset) or integer nanoseconds."""
    if text.isdigit():
        return int(text)
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an ISO 8601 time or nanoseconds: {text!r}") from None
    if moment.tzinfo is None:
        moment = moment.astimezone()
    return int(moment.timestamp() * 1e9)


def _scope(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--scope", choices=["run", "project"], default="project")


def _selectors(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--adapter", help="the suspect source adapter")
    parser.add_argument("--producer", help="the suspect producer task id")
    parser.add_argument("--position", type=int, action="append", help="a suspect position")


def _share(p: argparse.ArgumentParser) -> None:
    p.add_argument("key")
    p.add_argument("value")
    p.add_argument("--tag", required=True)
    _scope(p)


def _query(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tag", required=True)
    _scope(p)
    p.add_argument("--raw", action="store_true", help="print stored values verbatim")


def _add(p: argparse.ArgumentParser) -> None:
    p.add_argument("content")
    p.add_argument("--type", default="convention")
    p.add_argument("--tag", action="append", default=[])
    p.add_argument("--importance", type=float, default=1.0)
    p.add_argument("--task-id", help="default: the task id from the environment")


def _list(p: argparse.ArgumentParser) -> None:
    p.add_argument("--type")
    p.add_argument("--tag", action="append")
    p.add_argument("--limit", type=int, default=20)
    p.add_argument("--adapter", action="append", help="read only these adapters' entries")


def _remove(p: argparse.ArgumentParser) -> None:
    p.add_argument("id", type=int)


def _history(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tag")
    p.add_argument("--key")
    p.add_argument("--scope", choices=["run", "project"])
    p.add_argument("--run", help="the run of a run-scoped fact")


def _blame(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tag")
    p.add_argument("--scope", choices=["run", "project"])
    p.add_argument("--run")


def _diff(p: argparse.ArgumentParser) -> None:
    p.add_argument("from_position", type=int)
    p.add_argument("to_position", type=int)
    p.add_argument("--tag")


def _as_of(p: argparse.ArgumentParser) -> None:
    when = p.add_mutually_exclusive_group(required=True)
    when.add_argument("--position", type=int)
    when.add_argument("--at", type=time_ns, help="ISO 8601 time or nanoseconds")
    p.add_argument("--tag", help="show the facts under this tag (else memory entries)")
    _scope(p)
    p.add_argument("--limit", type=int, default=20)


def _verify(p: argparse.ArgumentParser) -> None:
    p.add_argument("--checkpoint", help="a checkpoint file taken earlier")
    p.add_argument("--key", help="operator key file: check the checkpoint's MAC first")


def _checkpoint(p: argparse.ArgumentParser) -> None:
    p.add_argument("--key", help="operator key file (32 bytes, mode 0600) to MAC the checkpoint")
    p.add_argument("--out", help="also write the checkpoint to this file")


def _keygen(p: argparse.ArgumentParser) -> None:
    p.add_argument("path")


def _prove(p: argparse.ArgumentParser) -> None:
    p.add_argument("position", type=int)
    p.add_argument("--checkpoint", required=True)


def _rebuild(p: argparse.ArgumentParser) -> None:
    p.add_argument("--swap", action="store_true", help="replace the live tables with the rebuild")


def _blast(p: argparse.ArgumentParser) -> None:
    _selectors(p)
    p.add_argument("--since", type=int, help="only events after this position")


def _quarantine(p: argparse.ArgumentParser) -> None:
    _selectors(p)
    p.add_argument("--reason", required=True)


def _release(p: argparse.ArgumentParser) -> None:
    p.add_argument("quarantine_position", type=int)
    p.add_argument("--reason", required=True)


def _export(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", help="file to write (default: standard output)")


def _import(p: argparse.ArgumentParser) -> None:
    p.add_argument("path", help="a database file with a legacy memory table")


def _demo(p: argparse.ArgumentParser) -> None:
    p.add_argument("--keep", help="play in this directory and keep it (default: a temp dir)")


_ARGUMENTS: dict[str, Callable[[argparse.ArgumentParser], None]] = {
    "share": _share,
    "query": _query,
    "add": _add,
    "list": _list,
    "remove": _remove,
    "history": _history,
    "blame": _blame,
    "diff": _diff,
    "as-of": _as_of,
    "verify": _verify,
    "checkpoint": _checkpoint,
    "keygen": _keygen,
    "prove": _prove,
    "rebuild": _rebuild,
    "blast-radius": _blast,
    "quarantine": _quarantine,
    "release": _release,
    "export": _export,
    "import-legacy": _import,
    "demo": _demo,
}


def add_arguments(command: str, parser: argparse.ArgumentParser) -> None:
    """Give `parser` the arguments of `command`."""
    _ARGUMENTS[command](parser)
