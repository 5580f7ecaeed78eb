"""Trace sinks: where trace lines go. A port with a file adapter and an in-memory adapter.

The file adapter creates its file with the one writer of new files (`create_exclusive`): a path
that exists is `TargetExistsError`, a symbolic link planted there (dangling or not) is
`FileWriteError` (reason ``link``), and either is left untouched. A write that fails (disk full, quota, I/O
error) raises `FileWriteError` naming the file; the lines
written before it are intact and `repair_trace` moves a torn last line aside once space is free.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Literal, Protocol

from twinflow._base._errors import FileWriteError
from twinflow._base._files import create_exclusive, lock_now, refuse_linked

__all__ = ["FileTraceSink", "FsyncPolicy", "MemoryTraceSink", "TraceSink"]

FsyncPolicy = Literal["event", "step", "none"]
"""When trace lines are made durable: after every event, at the end of every step (the
default: events are on disk when the step that wrote them returns), or never (flushed to
the operating system at step ends and at close, never synced: not even when the sink closes)."""

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def _lock(fd: int, path: Path) -> None:
    """Hold the trace's writer lock (`lock_now` on the trace file itself), or refuse at once.

    On the file, not on a lock file beside it: a trace is written by one process at a time
    whatever directory it is in, and a run killed mid-step leaves no stale lock behind for the
    resume that follows it.

    Raises:
        FileWriteError (``locked``): Another process holds it; ``fd`` is closed.
    """
    lock_now(
        fd,
        lambda: FileWriteError(
            f"trace file {path} is being written by another process (a run, a resume or an "
            "approval holds its lock); nothing was written: wait for it to end and try again",
            path=path,
            reason="locked",
        ),
    )


def _write_error(path: Path, exc: OSError) -> FileWriteError:
    return FileWriteError(
        f"cannot write trace file {path}: {exc.strerror or exc}; the events written before "
        f"are intact; free space, then run `twinflow repair {path}` if its last line is torn",
        path=path,
    )


class TraceSink(Protocol):
    """Receives complete trace lines, in order."""

    def write(self, line: bytes) -> None:
        """Take one line (ending with a newline)."""
        ...

    def flush(self, *, durable: bool) -> None:
        """Hand buffered lines to the operating system; with ``durable``, to the disk."""
        ...

    def close(self) -> None:
        """Hand buffered lines to the operating system and release the sink.

        Closing never syncs: durability is the writer's policy, asked for with
        ``flush(durable=True)`` (`FsyncPolicy`), so ``"none"`` costs no fsync at all.
        """
        ...


class FileTraceSink:
    """Appends trace lines to a new file; refuses to touch an existing one or follow a link.

    The sink holds the trace's writer lock (see `_lock`) from creation to `close`, so a resume
    or an approval of the same trace refuses while the run is still writing it.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        """Create the trace file.

        Args:
            path: Where to write; nothing (no file, no link) may exist there yet.

        Raises:
            TargetExistsError: Something exists at the path (traces are never overwritten).
            FileWriteError (``link``): The path is a symbolic link.
            OSError: The file cannot be created (a missing directory, permissions).
        """
        self.path = Path(path)
        fd = create_exclusive(self.path, "trace file")
        _lock(fd, self.path)
        self._file = os.fdopen(fd, "wb")

    @classmethod
    def append_to(cls, path: str | os.PathLike[str]) -> FileTraceSink:
        """Open an existing trace to append to it, holding its writer lock (never through a link).

        Take the lock before reading the trace to continue it: what is read is then what the
        lines written here extend (nothing else can append in between).

        Args:
            path: The trace file.

        Returns:
            The sink; its lines go after the file's last byte.

        Raises:
            FileWriteError (``locked``): Another process is writing the trace; nothing was written.
            FileWriteError (``link``): The path or its directory is a symbolic link, or the
                file has other names (hard links).
            OSError: The file cannot be opened (missing, permissions).
        """
        self = cls.__new__(cls)
        self.path = Path(path)
        refuse_linked(self.path, "the trace")
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | _NOFOLLOW | _CLOEXEC)
        try:
            refuse_linked(self.path, "the trace", names=os.fstat(fd).st_nlink)
        except FileWriteError:
            os.close(fd)
            raise
        _lock(fd, self.path)
        self._file = os.fdopen(fd, "ab")
        return self

    def write(self, line: bytes) -> None:
        """Buffer one line.

        Raises:
            FileWriteError: The file cannot be written (disk full, ...).
        """
        try:
            self._file.write(line)
        except OSError as exc:
            raise _write_error(self.path, exc) from None

    def flush(self, *, durable: bool) -> None:
        """Write buffered lines out; with ``durable``, ``os.fsync`` the file.

        Raises:
            FileWriteError: The file cannot be written (disk full, ...).
        """
        try:
            self._file.flush()
            if durable:
                os.fsync(self._file.fileno())
        except OSError as exc:
            raise _write_error(self.path, exc) from None

    def close(self) -> None:
        """Write buffered lines out and close the file (idempotent; closed even if that fails).

        Closing does not sync: the writer syncs what its `FsyncPolicy` promises before it
        closes (an fsync here cost an eval case three quarters of its time under ``"none"``).

        Raises:
            FileWriteError: The last lines cannot be written.
        """
        if self._file.closed:
            return
        try:
            self.flush(durable=False)
        finally:
            # A buffer that could not be written was reported above; it goes with the descriptor.
            with contextlib.suppress(OSError):
                self._file.close()


class MemoryTraceSink:
    """Keeps trace lines in memory; counts flushes so tests can check the fsync policy."""

    def __init__(self) -> None:
        """Start empty."""
        self.lines: list[bytes] = []
        self.flushes = 0
        self.durable_flushes = 0

    @property
    def data(self) -> bytes:
        """The trace as file bytes."""
        return b"".join(self.lines)

    def write(self, line: bytes) -> None:
        """Keep one line."""
        self.lines.append(line)

    def flush(self, *, durable: bool) -> None:
        """Count the flush."""
        self.flushes += 1
        if durable:
            self.durable_flushes += 1

    def close(self) -> None:
        """Nothing to release."""
