"""A new trace file: the first free name of ``trace.jsonl``, ``trace.1.jsonl``, ..., claimed
exclusively, so runs racing for one name never share or overwrite a file."""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from twinflow._base._errors import FileWriteError, TargetExistsError
from twinflow.trace import FileTraceSink, UserError

__all__ = ["claim_trace", "claimed_trace", "drop_if_empty", "numbered"]


def numbered(path: Path, n: int) -> Path:
    """The ``n``-th name for a new file: ``trace.jsonl``, ``trace.1.jsonl``, ``trace.2.jsonl``..."""
    if n == 0:
        return path
    return path.with_name(f"{path.stem}.{n}{path.suffix}")


_MAX_TRACES = 100_000


def claim_trace(path: Path) -> FileTraceSink:
    """A new trace file at ``path``, or at the first free numbered name beside it.

    Each name is created exclusively (`FileTraceSink`), so of runs racing for one name, one
    gets it and the others move on; an existing file or link is never opened, as
    ``twinflow run`` skips them.
    """
    directory = path.parent
    try:
        mode: int | None = os.lstat(directory).st_mode
    except OSError:
        mode = None  # missing (made below), or not reachable (mkdir says why)
    if mode is not None and stat.S_ISLNK(mode):
        raise FileWriteError(
            f"{directory} is a symbolic link; a trace is not written through it: name the "
            "real directory",
            path=directory,
            reason="link",
        )
    # One look at the directory per run, not a mkdir too: a fleet's runs share theirs.
    if mode is None or not stat.S_ISDIR(mode):
        directory.mkdir(parents=True, exist_ok=True)
    for n in range(_MAX_TRACES):
        try:
            return FileTraceSink(numbered(path, n))
        except TargetExistsError:
            continue  # a file at the name: never opened, the next name is tried
        except FileWriteError as exc:
            if exc.reason != "link":
                raise
            continue  # a link planted at the name: never opened either
    raise UserError(
        f"{path.parent} holds {_MAX_TRACES} traces named like {path.name}: pick a new one"
    )


def drop_if_empty(sink: FileTraceSink) -> None:
    """Remove a claimed trace no event reached (the server did not start, the block failed)."""
    sink.close()
    with contextlib.suppress(OSError):
        if sink.path.stat().st_size == 0:
            sink.path.unlink()


@contextlib.contextmanager
def claimed_trace(path: Path) -> Iterator[FileTraceSink]:
    """`claim_trace` for a ``with`` block: leaving it closes the trace, and removes it if no
    event reached it (`drop_if_empty`)."""
    sink = claim_trace(path)
    try:
        yield sink
    finally:
        drop_if_empty(sink)
