"""Opening a path named as input: only a regular file, and never blocking to find out.

Every reader of a path a user or a received file names (a trace, a spec, a checkpoint, a key,
a dataset, a results file) opens it here. A FIFO opened for reading blocks until a writer
comes, and a device (``/dev/zero``, ``/dev/tty``) reads forever or waits for a person: so the
path is opened with ``O_NONBLOCK`` (a FIFO then opens at once), `fstat` of the opened
descriptor decides (no window between a check and the open), and anything but a regular file is
refused with `NotRegularFileError` before a byte is read.
"""

from __future__ import annotations

import errno
import os
import stat
from typing import BinaryIO

from twinflow._base._errors import NotRegularFileError

__all__ = ["open_regular", "read_regular"]

_KINDS = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _refuse_irregular(fd: int, path: str | os.PathLike[str]) -> None:
    mode = os.fstat(fd).st_mode
    if stat.S_ISREG(mode):
        return
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, "is a directory, expected a file", os.fspath(path))
    kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
    raise NotRegularFileError(
        errno.EINVAL, f"is {kind}, not a file: name a regular file", os.fspath(path)
    )


def open_regular(path: str | os.PathLike[str]) -> BinaryIO:
    """Open ``path`` for reading in binary mode if it is a regular file (links are followed).

    Raises:
        NotRegularFileError: ``path`` is a FIFO, a device or a socket (found without blocking).
        IsADirectoryError: ``path`` is a directory.
        OSError: ``path`` cannot be opened (``FileNotFoundError``, ``PermissionError``, ...).
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)
    try:
        _refuse_irregular(fd, path)
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular(path: str | os.PathLike[str], limit: int | None = None) -> bytes:
    """The bytes of the regular file ``path`` (at most ``limit + 1`` of them when ``limit`` is
    given, so the caller can tell a file over its limit); raises as `open_regular`."""
    with open_regular(path) as file:
        return file.read() if limit is None else file.read(limit + 1)


def refuse_irregular(fd: int, path: str | os.PathLike[str]) -> None:
    """Refuse a descriptor opened some other way (for writing, say) that is not a regular file."""
    _refuse_irregular(fd, path)
