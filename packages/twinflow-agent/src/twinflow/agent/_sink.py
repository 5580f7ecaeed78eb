"""Trace sinks: where trace lines go. A port with a file adapter and an in-memory adapter."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal, Protocol

from twinflow.agent._errors import TraceExistsError

__all__ = ["FileTraceSink", "FsyncPolicy", "MemoryTraceSink", "TraceSink"]

FsyncPolicy = Literal["event", "step", "none"]
"""When trace lines are made durable: after every event, at the end of every step (the
default: events are on disk when the step that wrote them returns), or never (flushed to
the operating system at step ends, not synced)."""


class TraceSink(Protocol):
    """Receives complete trace lines, in order."""

    def write(self, line: bytes) -> None:
        """Take one line (ending with a newline)."""
        ...

    def flush(self, *, durable: bool) -> None:
        """Hand buffered lines to the operating system; with ``durable``, to the disk."""
        ...

    def close(self) -> None:
        """Flush and release the sink."""
        ...


class FileTraceSink:
    """Appends trace lines to a new file; refuses to touch an existing one."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        """Create the trace file.

        Args:
            path: Where to write; the file must not exist yet.

        Raises:
            TraceExistsError: The file exists (traces are never overwritten).
        """
        self.path = Path(path)
        try:
            self._file = self.path.open("xb")
        except FileExistsError:
            raise TraceExistsError(
                f"trace file {self.path} already exists; traces are append-only, "
                "pick a new path or move the old trace away"
            ) from None

    def write(self, line: bytes) -> None:
        """Buffer one line."""
        self._file.write(line)

    def flush(self, *, durable: bool) -> None:
        """Write buffered lines out; with ``durable``, ``os.fsync`` the file."""
        self._file.flush()
        if durable:
            os.fsync(self._file.fileno())

    def close(self) -> None:
        """Flush, sync and close the file (idempotent)."""
        if not self._file.closed:
            self.flush(durable=True)
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
