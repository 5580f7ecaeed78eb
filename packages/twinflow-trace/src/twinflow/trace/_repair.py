"""Repair: move a torn last line aside so the trace ends at its last complete event."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from twinflow._base._errors import FileWriteError
from twinflow._base._files import create_exclusive
from twinflow._base._open import refuse_irregular

__all__ = ["RepairResult", "repair_trace"]

_CHUNK = 1 << 16


@dataclass(frozen=True, slots=True)
class RepairResult:
    """What `repair_trace` did."""

    moved_to: str | None
    """Where the partial last line was moved, or None if there was none."""
    moved_bytes: int
    """Bytes moved aside."""


def _last_newline_end(fd: int, size: int) -> int:
    """Offset just past the last newline of the open file ``fd`` (0 if none), reading backwards."""
    end = size
    while end > 0:
        start = max(0, end - _CHUNK)
        chunk = os.pread(fd, end - start, start)
        found = chunk.rfind(b"\n")
        if found >= 0:
            return start + found + 1
        end = start
    return 0


def repair_trace(path: str | os.PathLike[str]) -> RepairResult:
    """Move a partial last line aside so the trace ends at its last complete event.

    Nothing is deleted: the partial bytes are copied (and synced) to a new side file
    ``<trace>.partial`` (or ``.partial.N``, created exclusively, never through a link) before the
    trace is cut back to its last newline. If the side file cannot be written (disk full), it is
    removed again, the trace is left as it was, and the error names the side file: run repair
    again once space is free. Memory use does not depend on the file's size.

    Args:
        path: The trace file.

    Returns:
        Where the bytes went, if anywhere.

    Raises:
        FileWriteError: The side file or the trace could not be written.
        OSError: The trace cannot be read (missing, a directory, permissions).
    """
    trace = Path(path)
    fd = os.open(trace, os.O_RDWR | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    try:
        refuse_irregular(fd, trace)
        size = os.fstat(fd).st_size
        cut = _last_newline_end(fd, size)
        if cut == size:
            return RepairResult(moved_to=None, moved_bytes=0)
        side = trace.with_name(trace.name + ".partial")
        number = 0
        while os.path.lexists(side):
            number += 1
            side = trace.with_name(f"{trace.name}.partial.{number}")
        out = create_exclusive(side, "repair side file")
        try:
            offset = cut
            while offset < size:
                chunk = os.pread(fd, min(_CHUNK, size - offset), offset)
                view = memoryview(chunk)
                while view:
                    view = view[os.write(out, view) :]
                offset += len(chunk)
            os.fsync(out)
        except OSError as exc:
            os.close(out)
            side.unlink(missing_ok=True)
            raise FileWriteError(
                f"cannot write repair side file {side}: {exc.strerror or exc}; the trace "
                f"{trace} is unchanged; free space and run repair again",
                path=side,
            ) from None
        os.close(out)
        try:
            os.ftruncate(fd, cut)
            os.fsync(fd)
        except OSError as exc:
            raise FileWriteError(
                f"cannot cut trace file {trace} back to {cut} bytes: {exc.strerror or exc}; "
                f"its torn line is saved in {side}",
                path=trace,
            ) from None
        return RepairResult(moved_to=str(side), moved_bytes=size - cut)
    finally:
        os.close(fd)
