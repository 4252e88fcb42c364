"""Read-only log handles kept open between calls, one per database file per process.

Opening a log costs about half a millisecond (the file, its WAL index, the schema): more than
an inclusion proof itself. Replay's proof paths borrow a handle from here instead. A kept
handle is lent again only while its path still names the very file it opened (not replaced,
not deleted and recreated), and only in the process that opened it; each use reads in its
own snapshot, so it sees every commit made since. A handle nobody has borrowed for
`IDLE_SECONDS` is closed, so a process that proved something and moved on does not hold the
file (and its WAL) open; at most `KEPT` handles are kept at once.
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager

from eventlog import EventLog, open_log
from eventlog.checks import check_path

KEPT = 8
"""Handles kept open at most (the least recently lent is closed first)."""
IDLE_SECONDS = 2.0
"""A kept handle nobody borrowed for this long is closed."""
MEMORY = ":memory:"


class _Handle:
    """One open read-only log, the descriptor pinning its file, and who is using it."""

    __slots__ = ("borrowers", "idle_since", "kept", "log", "pin")

    def __init__(self, log: EventLog, pin: int | None) -> None:
        self.log = log
        self.pin = pin
        """A descriptor of the file the log opened, to tell whether the path still names it."""
        self.borrowers = 1
        self.idle_since = 0.0
        self.kept = pin is not None

    def close(self) -> None:
        self.log.close()
        if self.pin is not None:
            os.close(self.pin)


_lock = threading.Lock()
_kept: OrderedDict[str, _Handle] = OrderedDict()
_sweeping = False


@contextmanager
def shared_reader(db_path: str | os.PathLike[str]) -> Iterator[EventLog]:
    """A read-only handle on the log at `db_path` for the block, kept open for the next one.

    Raises as `open_log(db_path, read_only=True)` does. Do not close the handle.
    """
    path = check_path(db_path)
    if path == MEMORY:
        memory = open_log(path, read_only=True)
        try:
            yield memory
        finally:
            memory.close()
        return
    handle = _borrow(os.path.abspath(path))
    try:
        yield handle.log
    finally:
        _give_back(handle)


def release(db_path: str | os.PathLike[str]) -> None:
    """Keep no handle on `db_path`: close it now, or when its last borrower gives it back."""
    key = os.path.abspath(check_path(db_path))
    with _lock:
        if key in _kept:
            _retire(_kept.pop(key))


def _borrow(key: str) -> _Handle:
    with _lock:
        handle = _kept.get(key)
        if handle is not None and handle.pin is not None and _names(key, handle.pin):
            handle.borrowers += 1
            _kept.move_to_end(key)
            return handle
        if handle is not None:
            _retire(_kept.pop(key))
    fresh = _open(key)
    if fresh.kept:
        with _lock:
            if key in _kept:
                _retire(_kept.pop(key))
            _kept[key] = fresh
            while len(_kept) > KEPT:
                _retire(_kept.popitem(last=False)[1])
            _start_sweeping()
    return fresh


def _give_back(handle: _Handle) -> None:
    with _lock:
        handle.borrowers -= 1
        handle.idle_since = time.monotonic()
        if not handle.kept and handle.borrowers == 0:
            handle.close()


def _retire(handle: _Handle) -> None:
    """No longer lend `handle`; close it now, or when its last borrower gives it back."""
    handle.kept = False
    if handle.borrowers == 0:
        handle.close()


def _open(path: str) -> _Handle:
    """Open the log and pin the file it opened. A handle whose path changed meanwhile (or
    that could not be pinned) serves this one borrower and is not kept."""
    try:
        pin = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return _Handle(open_log(path, read_only=True), None)
    try:
        event_log = open_log(path, read_only=True)
    except BaseException:
        os.close(pin)
        raise
    if not _names(path, pin):
        os.close(pin)
        return _Handle(event_log, None)
    return _Handle(event_log, pin)


def _names(path: str, pin: int) -> bool:
    """Whether `path` still names the live file `pin` was opened on."""
    try:
        named, pinned = os.stat(path), os.fstat(pin)
    except OSError:
        return False
    return pinned.st_nlink > 0 and (named.st_dev, named.st_ino) == (pinned.st_dev, pinned.st_ino)


def _start_sweeping() -> None:
    """Run the sweeper while any handle is kept (called with the lock held)."""
    global _sweeping
    if not _sweeping:
        _sweeping = True
        threading.Thread(target=_sweep, name="factledger-reader-sweeper", daemon=True).start()


def _sweep() -> None:
    """Close kept handles idle for `IDLE_SECONDS`; stop once none is kept."""
    global _sweeping
    while True:
        time.sleep(IDLE_SECONDS / 2)
        with _lock:
            now = time.monotonic()
            for key, handle in list(_kept.items()):
                if handle.borrowers == 0 and now - handle.idle_since >= IDLE_SECONDS:
                    _retire(_kept.pop(key))
            if not _kept:
                _sweeping = False
                return


def _forget_inherited() -> None:
    """In a forked child: never lend (or close) the parent's connections."""
    global _lock, _sweeping
    _lock = threading.Lock()
    _inherited.extend(_kept.values())
    _kept.clear()
    _sweeping = False


_inherited: list[_Handle] = []
"""Handles a forked child inherited: kept referenced so the child never closes them."""
os.register_at_fork(after_in_child=_forget_inherited)
