"""Files the command line reads and writes for its user: text read with one-line errors,
outputs replaced only once complete."""

from __future__ import annotations

import contextlib
import os
import stat
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

from eventlog import InvalidInputError
from replay.errors import NotRegularFileError
from replay.regular_files import read_regular

STDIN = "-"
"""The name that reads standard input."""


def read_text(path: str, what: str, *, max_bytes: int) -> str:
    """The UTF-8 text of the file at `path` (standard input for `-`), at most `max_bytes`
    bytes; what goes wrong is one `InvalidInputError` naming `what` and `path`."""
    if path == STDIN:
        data = sys.stdin.buffer.read(max_bytes + 1)
        where = f"{what} on standard input"
    else:
        where = f"{what} file {path}"
        try:
            data = read_regular(path, max_bytes=max_bytes).data
        except FileNotFoundError:
            raise InvalidInputError(f"no {what} file at {path}") from None
        except NotRegularFileError as exc:
            raise InvalidInputError(f"the {where} is {exc.kind}, not a regular file") from None
        except OSError as exc:
            raise InvalidInputError(f"cannot read the {where}: {exc.strerror or exc}") from None
    if len(data) > max_bytes:
        raise InvalidInputError(f"the {where} is larger than {max_bytes} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInputError(
            f"the {where} is not UTF-8 text (byte {exc.start} is not valid)"
        ) from None


@contextlib.contextmanager
def replacing(path: Path) -> Iterator[TextIO]:
    """A text stream into a new temporary file beside `path`, which replaces `path` only
    when the block ends without an error; otherwise it is removed and `path` is untouched.
    A device or a pipe at `path` (`/dev/null`, `/dev/stdout`, a FIFO) is written in place,
    as a shell's `>` would: replacing it would put a regular file where it was."""
    if _is_special(path):
        with open(path, "w", encoding="utf-8", newline="") as stream:
            yield stream
        return
    mode = _mode_for(path)
    handle, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8", newline="") as stream:
            yield stream
            stream.flush()
            os.fchmod(stream.fileno(), mode)
            os.fsync(stream.fileno())
        os.replace(name, path)
    except BaseException:
        Path(name).unlink(missing_ok=True)
        raise


def _mode_for(path: Path) -> int:
    """The permissions a replacement keeps: the file's own, else what a new file gets."""
    try:
        return stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def _is_special(path: Path) -> bool:
    """Whether `path` names something that exists and is neither a regular file nor a
    directory (a character or block device, a FIFO, a socket)."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))
