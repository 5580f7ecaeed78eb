"""What the machine running a process is: the interpreter, the platform, the distributions it
imported, and files' digests. Each read differs from machine to machine, so they are read here,
in the kernel, and recorded (a run's `twinflow.agent._events.Environment`), never compared as
configuration.

Reads are cheap after the first: the distribution table is built once per process, and a file's
sha256 is kept per (path, size, modification time, inode), so a 100 MB model file is hashed once
per process however many runs name it.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import os
import platform
import sys
import threading
from collections.abc import Mapping
from pathlib import Path

__all__ = ["file_sha256", "imported_distributions", "interpreter"]


def interpreter() -> tuple[str, str, str]:
    """The Python version, its implementation and the platform, as `platform` reports them."""
    return platform.python_version(), platform.python_implementation(), platform.platform()


@functools.cache
def _distributions_of() -> Mapping[str, tuple[str, ...]]:
    """Import name to the installed distributions providing it (read once per process).

    From each distribution's file list (`importlib.metadata.packages_distributions`). An
    editable install lists no modules (only its ``.pth`` file): it is found by its name, as
    ``my-tool`` provides ``my_tool`` and ``twinflow-eval`` the namespace package's
    ``twinflow.eval``.
    """
    table = {
        name: list(dists) for name, dists in importlib.metadata.packages_distributions().items()
    }
    listed = {dist for dists in table.values() for dist in dists}
    for distribution in importlib.metadata.distributions():
        name = distribution.metadata["Name"]
        if not name or name in listed:
            continue
        lowered = name.lower()
        for module in {lowered.replace("-", "_"), lowered.replace("-", ".")}:
            table.setdefault(module, []).append(name)
    return {name: tuple(dists) for name, dists in table.items()}


@functools.cache
def _version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def imported_distributions() -> dict[str, str]:
    """The installed distributions this process has imported a module of, name to version,
    sorted by name. Standard-library modules belong to no distribution and are left out."""
    table = _distributions_of()
    names = tuple(sys.modules)
    imported = {name.partition(".")[0] for name in names} | (set(names) & table.keys())
    found: dict[str, str] = {}
    for module in imported:
        for distribution in table.get(module, ()):
            version = _version(distribution)
            if version is not None:
                found[distribution] = version
    return dict(sorted(found.items()))


def file_sha256(path: Path, *, cached: bool = False) -> str:
    """The sha256 of a file's bytes (hex), read in chunks.

    Args:
        path: The file.
        cached: Keep the digest for the process by the file's (path, size, mtime, inode). For
            describing a file (a fingerprint), not for deciding whether to trust it: a file
            rewritten with the same size and a restored modification time would be described
            by its old digest. Code checks hash afresh (the default).
    """
    if cached:
        return _cached_file_sha256(path)
    with path.open("rb") as file:
        return hashlib.file_digest(file, "sha256").hexdigest()


_digests: dict[tuple[str, int, int, int], str] = {}
_digests_lock = threading.Lock()


def _cached_file_sha256(path: Path) -> str:
    info = path.stat()
    key = (os.fspath(path.resolve()), info.st_size, info.st_mtime_ns, info.st_ino)
    with _digests_lock:
        known = _digests.get(key)
    if known is not None:
        return known
    digest = file_sha256(path)
    with _digests_lock:
        _digests[key] = digest
    return digest
