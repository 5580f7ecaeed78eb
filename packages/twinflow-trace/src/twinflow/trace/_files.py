"""The one writer of new files: traces, repair side files, a run's spec, proofs, keys, reports.

Three ways to write, one mechanism under them. Every file is created with
``O_CREAT | O_EXCL | O_NOFOLLOW``, so a planted name is never followed or reused:

- `create_exclusive` opens a new file for streaming writes (a trace sink, a repair side file);
- `write_new` writes a whole file under a fresh temporary name in the target's directory, syncs
  it, and links it to the target, which fails if *anything* has the name already (a file, a
  directory, a symbolic link, dangling or not): an all-or-nothing exclusive creation, so two
  processes can race for a name and exactly one gets it, complete;
- `write_replace` renames the temporary file over the target, which replaces a regular file
  whole.

A name taken is `TargetExistsError`; a symbolic link at the name (or as the directory) is
`PlantedLinkError`, the link and what it points at untouched; any other failure to write (a
full disk, no permission) is `FileWriteError` naming the file. `write_new` and `write_replace`
write the data scrubbed of every secret the process has read (`scrub_bytes`, the one door
untrusted text leaves through into a file). `hold_directory` makes a process the one writer of
a directory (an eval's run directory) while a block runs. `write_new` and `write_replace`
open the directory once without following a link (``O_DIRECTORY | O_NOFOLLOW``) and work
relative to it, so a directory swapped for a link between the check and the write cannot
redirect the write.

The temporary names hold the process id and a counter, not random bytes: this leaf reads no
entropy (randomness enters the workspace only through `twinflow.kernel`), and the exclusive
creation is what keeps two writers apart.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

from twinflow.trace._errors import (
    DirectoryBusyError,
    FileWriteError,
    PlantedLinkError,
    TargetExistsError,
)
from twinflow.trace._untrusted import scrub_bytes

__all__ = ["WRITER_LOCK", "create_exclusive", "hold_directory", "write_new", "write_replace"]

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


_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
_CREATE |= getattr(os, "O_CLOEXEC", 0)
_TEMPORARY_TRIES = 10_000


def create_exclusive(path: str | os.PathLike[str], what: str, mode: int | None = None) -> int:
    """Create ``path`` for writing, exclusively and without following a link; return its fd.

    Args:
        path: The new file.
        what: What the file is, for the error message (``"trace file"``).
        mode: Its exact permission bits (``0o600`` for a secret), set before any byte is
            written; None: ``0o644`` less the umask.

    Returns:
        A file descriptor open for writing.

    Raises:
        PlantedLinkError: ``path`` is a symbolic link (dangling or not); it is not touched.
        TargetExistsError: Something else exists at ``path``; it is not touched.
        OSError: The file cannot be created for another reason (a missing directory).
    """
    target = Path(path)
    try:
        # O_EXCL fails on any existing name, a symbolic link included, without following it.
        fd = os.open(target, _CREATE, 0o644 if mode is None else mode)
    except FileExistsError:
        if target.is_symlink():
            raise PlantedLinkError(
                f"{what} {target} is a symbolic link; refusing to write through it "
                "(a planted link could redirect the write); pick a path that does not exist",
                path=target,
            ) from None
        raise TargetExistsError(
            f"{what} {target} already exists; it was left as it is: "
            "pick a new path or move the old one away",
            path=target,
        ) from None
    if mode is not None:
        # The umask changed what os.open set; a mode asked for is meant exactly.
        os.fchmod(fd, mode)
    return fd


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


def _write_temporary(
    path: Path, data: bytes, dir_fd: int, *, durable: bool, mode: int | None
) -> str:
    """Write ``data``, scrubbed of secrets (`scrub_bytes`), to a fresh hidden name beside
    ``path``; return that name."""
    # The last door of every whole file written (results, reports, pages, spec copies): a key
    # the process read is not written, whatever path brought it here.
    data = scrub_bytes(data)
    for number in range(_TEMPORARY_TRIES):
        name = f".{path.name}.{os.getpid()}.{number}.tmp"
        try:
            fd = os.open(name, _CREATE, 0o644 if mode is None else mode, dir_fd=dir_fd)
            break
        except FileExistsError:
            continue
    else:
        raise FileExistsError(errno.EEXIST, "no free temporary name", path.name)
    try:
        if mode is not None:
            os.fchmod(fd, mode)
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


def _write_through(
    target: Path,
    data: bytes,
    *,
    durable: bool,
    mode: int | None,
    take_name: Callable[[str, int], None],
) -> None:
    """Write ``data`` to a temporary file beside ``target``, then ``take_name`` gives it the name."""
    dir_fd = _open_directory(target)
    try:
        _refuse_link(target, dir_fd)
        try:
            temporary = _write_temporary(target, data, dir_fd, durable=durable, mode=mode)
        except OSError as exc:
            raise _failed(target, exc) from None
        try:
            take_name(temporary, dir_fd)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(temporary, dir_fd=dir_fd)
        if durable:
            os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def write_new(
    path: str | os.PathLike[str], data: bytes, *, durable: bool = True, mode: int | None = None
) -> None:
    """Create ``path`` holding ``data``, only if nothing has that name yet.

    The file appears whole or not at all; of several processes racing for one name, exactly
    one succeeds and the others get `TargetExistsError`.

    Args:
        path: The file to create.
        data: Its content.
        durable: Sync the file before it takes the name, so it survives a power loss.
        mode: Its exact permission bits (``0o600`` for a secret), set before any byte is
            written; None: ``0o644`` less the umask.

    Raises:
        PlantedLinkError: ``path`` or its directory is a symbolic link.
        TargetExistsError: Something already has the name.
        FileWriteError: Writing failed (the disk is full, no permission); nothing was created.
    """
    target = Path(path)

    def link(temporary: str, dir_fd: int) -> None:
        try:
            os.link(temporary, target.name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except FileExistsError:
            _refuse_link(target, dir_fd)
            raise TargetExistsError(
                f"{target} exists already; it was left as it is", path=target
            ) from None
        except OSError as exc:
            raise _failed(target, exc) from None

    _write_through(target, data, durable=durable, mode=mode, take_name=link)


def write_replace(
    path: str | os.PathLike[str], data: bytes, *, durable: bool = True, mode: int | None = None
) -> None:
    """Write ``data`` to ``path`` through a temporary file and a rename over it.

    A killed process leaves either the old file or the new one, never half of one.

    Args:
        path: The file to create or replace.
        data: Its content.
        durable: Sync the file before the rename, so it survives a power loss.
        mode: Its exact permission bits, set before any byte is written; None: ``0o644``
            less the umask.

    Raises:
        PlantedLinkError: ``path`` or its directory is a symbolic link.
        FileWriteError: Writing failed (the disk is full, no permission); the old file is kept.
    """
    target = Path(path)

    def rename(temporary: str, dir_fd: int) -> None:
        try:
            os.replace(temporary, target.name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except OSError as exc:
            raise _failed(target, exc) from None

    _write_through(target, data, durable=durable, mode=mode, take_name=rename)
