"""Worker interpreters: fresh Python processes that share a long read and report on a pipe.

Never forks: a SQLite handle carried across `fork` is unsafe. A worker runs a line of code
that imports its entry point from this package and hands its work to `serve`; its last
command-line argument is the descriptor of the pipe it reports on. A worker that cannot
start, dies, or reports an error costs time, not correctness: the caller does that share of
the work itself.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TypeVar

import msgspec

from eventlog.logs import get_logger

log = get_logger("factledger.replay")

M = TypeVar("M")
Send = Callable[[bytes], object]
"""How a worker reports: one encoded message at a time."""


def available() -> bool:
    """Whether this platform can start worker interpreters the way this module does."""
    return bool(sys.executable) and os.name == "posix"


def usable_cpus() -> int:
    """The CPUs this process may run on."""
    usable = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    return len(usable) if usable is not None else os.cpu_count() or 1


@contextmanager
def interpreters(code: str, arguments: Sequence[Sequence[str]]) -> Iterator[list[Connection]]:
    """One interpreter per argument list, each running `code`; yields the pipes they report on.

    A worker that cannot start leaves its pipe closed, so reading it raises EOFError. Workers
    still running when the block ends are killed.
    """
    package_root = str(Path(__file__).resolve().parent.parent)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (package_root, env.get("PYTHONPATH"))))
    processes: list[subprocess.Popen[bytes]] = []
    pipes: list[Connection] = []
    try:
        for argv in arguments:
            receiving, sending = os.pipe()
            pipes.append(Connection(receiving, writable=False))
            try:
                processes.append(
                    subprocess.Popen(
                        [sys.executable, "-c", code, *argv, str(sending)],
                        pass_fds=(sending,),
                        stdin=subprocess.DEVNULL,
                        stdout=subprocess.DEVNULL,
                        env=env,
                    )
                )
            except OSError as exc:
                log.warning("worker_not_started", error=str(exc))
            finally:
                os.close(sending)
        yield pipes
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
            process.wait()
        for pipe in pipes:
            pipe.close()


def receive(pipe: Connection, decoder: msgspec.msgpack.Decoder[M]) -> M | None:
    """The next message from a worker; None once it has ended or sent something unreadable."""
    try:
        return decoder.decode(pipe.recv_bytes())
    except (EOFError, OSError, msgspec.DecodeError):
        return None


def serve(work: Callable[[Send], object], failure: Callable[[str], bytes]) -> None:
    """In a worker: run `work`, which reports by calling the `send` it is given, on the pipe
    named by the last command-line argument; an exception is reported as `failure(reason)`.
    The pipe is closed afterwards either way."""
    pipe = Connection(int(sys.argv[-1]), readable=False)
    try:
        work(pipe.send_bytes)
    except Exception as exc:
        pipe.send_bytes(failure(f"{type(exc).__name__}: {exc}"))
    finally:
        pipe.close()
