"""Reading a small file a person names (a key, a checkpoint): a regular file only, opened so
that nothing it names can hang the reader.

`open` on a named pipe waits for a writer that may never come, and a device may never end.
The file is opened non-blocking (a pipe then opens at once), checked on the open descriptor
to be a regular file, and read up to a limit.
"""

from __future__ import annotations

import os
import stat
from typing import NamedTuple

from replay.errors import NotRegularFileError

_KINDS = {
    stat.S_IFIFO: "a named pipe (FIFO)",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
    stat.S_IFDIR: "a directory",
}


class SmallFile(NamedTuple):
    """What `read_regular` read: the bytes and the file's permission bits."""

    data: bytes
    mode: int


def read_regular(path: str, *, max_bytes: int) -> SmallFile:
    """Up to `max_bytes + 1` bytes of the regular file at `path` (one more than the limit, so
    the caller can tell a file over it) and its permission bits. Raises `NotRegularFileError`
    for a pipe, device, socket or directory, and `OSError` as `os.open` does (symbolic links
    are followed, as `open` follows them)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = _KINDS.get(stat.S_IFMT(info.st_mode), "an unknown kind of file")
            raise NotRegularFileError(path, kind)
        chunks: list[bytes] = []
        left = max_bytes + 1
        while left > 0:
            chunk = os.read(fd, left)
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return SmallFile(b"".join(chunks), stat.S_IMODE(info.st_mode))
    finally:
        os.close(fd)
