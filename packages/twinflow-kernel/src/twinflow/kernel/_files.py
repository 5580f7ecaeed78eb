"""Writing files in a directory another process (or a received bundle) may have prepared.

Two ways to write, one mechanism for both: the data goes to a fresh temporary file in the
target's own directory (created with ``O_CREAT | O_EXCL | O_NOFOLLOW``, so a planted name is
never followed or reused), is synced, and then takes the target's name:

- `write_new` links it there, which fails if *anything* has the name already (a file, a
  directory, a symlink, dangling or not): an all-or-nothing exclusive creation, so two
  processes can race for a name and exactly one gets it, complete;
- `write_replace` renames it over the target, which replaces a regular file whole.

Both write the data scrubbed of every secret the process has read (`scrub_bytes`, the one
door untrusted text leaves a process through into a file). Both refuse a target that is a symbolic link with `PlantedLinkError`, leaving the link and
what it points at untouched. The directory is opened once without following a link
(``O_DIRECTORY | O_NOFOLLOW``) and every step works relative to it, so a directory swapped for a
link between the check and the write cannot redirect the write.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path

from twinflow.kernel._errors import (
    DirectoryBusyError,
    FileWriteError,
    PlantedLinkError,
    TargetExistsError,
)
from twinflow.kernel._untrusted import scrub_bytes

__all__ = ["WRITER_LOCK", "hold_directory", "write_new", "write_replace"]

WRITER_LOCK = ".twinflow-writer.lock"
"""The file in a directory whose lock its one writer holds (`hold_directory`)."""


@contextlib.contextmanager
def hold_directory(path: str | os.PathLike[str], *, what: str = "run directory") -> Iterator[None]:
    """Be the one writer of directory ``path`` (created if missing) until the block ends.

    The lock is an exclusive ``flock`` on `WRITER_LOCK` inside the directory, taken without
    waiting: a second writer is refused at once, and the lock goes with the process that held
    it (a killed writer leaves no stale lock; the empty file stays). A directory created here
    is removed again if the block raises before anything but the lock was written in it.

    Raises:
        DirectoryBusyError: Another process (or another block of this one) holds it.
        PlantedLinkError: The lock file's name, or the directory, is a symbolic link.
    """
    directory = Path(path)
    created = not os.path.lexists(directory)
    directory.mkdir(parents=True, exist_ok=True)
    lock = directory / WRITER_LOCK
    dir_fd = _open_directory(lock)
    try:
        _refuse_link(lock, dir_fd)
        flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
        fd = os.open(WRITER_LOCK, flags, 0o644, dir_fd=dir_fd)
    finally:
        os.close(dir_fd)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise DirectoryBusyError(
            f"{directory}: another twinflow process is writing this {what} (an eval run, "
            "rescore or merge); wait for it to finish, or use another directory",
            path=directory,
        ) from None
    try:
        yield
    except BaseException:
        # A writer refused before it wrote anything leaves no directory behind it.
        if created:
            with contextlib.suppress(OSError):
                if [p.name for p in directory.iterdir()] == [WRITER_LOCK]:
                    lock.unlink()
                    directory.rmdir()
        raise
    finally:
        os.close(fd)  # releases the lock


def _open_directory(path: Path) -> int:
    directory = path.parent
    try:
        return os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR) and directory.is_symlink():
            raise PlantedLinkError(
                f"{directory} is a symbolic link, so {path.name} is not written through it: "
                "remove the link, or name the real directory",
                path=path,
            ) from None
        raise


def _refuse_link(path: Path, dir_fd: int) -> None:
    with contextlib.suppress(FileNotFoundError):
        if stat.S_ISLNK(os.stat(path.name, dir_fd=dir_fd, follow_symlinks=False).st_mode):
            raise PlantedLinkError(
                f"{path} is a symbolic link; it was not written and the file it points at is "
                "untouched: remove the link, or pick another directory",
                path=path,
            )


def _write_temporary(path: Path, data: bytes, dir_fd: int, *, durable: bool) -> str:
    """Write ``data``, scrubbed of secrets (`scrub_bytes`), to a fresh hidden name beside
    ``path``; return that name."""
    # The last door of every artefact (results, reports, pages, spec copies): a key that came
    # in through any path is not written.
    data = scrub_bytes(data)
    name = f".{path.name}.{secrets.token_hex(8)}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(name, flags, 0o644, dir_fd=dir_fd)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            if durable:
                f.flush()
                os.fsync(f.fileno())
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(name, dir_fd=dir_fd)
        raise
    return name


def _failed(path: Path, exc: OSError) -> FileWriteError:
    reason = "the disk is full" if exc.errno == errno.ENOSPC else (exc.strerror or str(exc))
    return FileWriteError(f"{path}: cannot write it ({reason}); nothing was changed", path=path)


def write_new(path: str | os.PathLike[str], data: bytes, *, durable: bool = True) -> None:
    """Create ``path`` holding ``data``, only if nothing has that name yet.

    The file appears whole or not at all; of several processes racing for one name, exactly
    one succeeds and the others get `TargetExistsError`.

    Args:
        path: The file to create.
        data: Its content.
        durable: Sync the file before it takes the name, so it survives a power loss.

    Raises:
        PlantedLinkError: ``path`` or its directory is a symbolic link.
        TargetExistsError: Something already has the name.
        FileWriteError: Writing failed (the disk is full, no permission); nothing was created.
    """
    target = Path(path)
    dir_fd = _open_directory(target)
    try:
        _refuse_link(target, dir_fd)
        try:
            temporary = _write_temporary(target, data, dir_fd, durable=durable)
        except OSError as exc:
            raise _failed(target, exc) from None
        try:
            os.link(temporary, target.name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except FileExistsError:
            _refuse_link(target, dir_fd)
            raise TargetExistsError(
                f"{target} exists already; it was left as it is", path=target
            ) from None
        except OSError as exc:
            raise _failed(target, exc) from None
        finally:
            with contextlib.suppress(OSError):
                os.unlink(temporary, dir_fd=dir_fd)
        if durable:
            os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def write_replace(path: str | os.PathLike[str], data: bytes, *, durable: bool = True) -> None:
    """Write ``data`` to ``path`` through a temporary file and a rename over it.

    A killed process leaves either the old file or the new one, never half of one.

    Args:
        path: The file to create or replace.
        data: Its content.
        durable: Sync the file before the rename, so it survives a power loss.

    Raises:
        PlantedLinkError: ``path`` or its directory is a symbolic link.
        FileWriteError: Writing failed (the disk is full, no permission); the old file is kept.
    """
    target = Path(path)
    dir_fd = _open_directory(target)
    try:
        _refuse_link(target, dir_fd)
        try:
            temporary = _write_temporary(target, data, dir_fd, durable=durable)
        except OSError as exc:
            raise _failed(target, exc) from None
        try:
            os.replace(temporary, target.name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.unlink(temporary, dir_fd=dir_fd)
            raise _failed(target, exc) from None
        if durable:
            os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
