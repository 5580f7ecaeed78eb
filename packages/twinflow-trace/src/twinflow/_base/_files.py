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
`FileWriteError` with reason ``link``, the link and what it points at untouched; any other failure to write (a
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

Reading a path that a received file names (a run directory's ``results.json`` naming a trace,
say) is the mirror image, `open_inside` / `read_inside`: the path is resolved inside the
directory it is relative to, one component at a time with ``O_NOFOLLOW``, and refused
(`UnsafePathError`) if it is absolute, empty, holds ``.``/``..`` or a NUL, passes through a
symbolic link at any component, or ends at something other than a regular file (a FIFO would
block the reader). The directory itself is the one the user named, and is opened as named.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

from twinflow._base._errors import FileWriteError, TargetExistsError, UnsafePathError
from twinflow._base._untrusted import scrub_bytes

__all__ = [
    "WRITER_LOCK",
    "create_exclusive",
    "hold_directory",
    "lock_now",
    "make_directory",
    "open_inside",
    "read_inside",
    "refuse_linked",
    "write_new",
    "write_replace",
]

_MAX_NAMED_PATH = 4096

WRITER_LOCK = ".twinflow-writer.lock"
"""The file in a directory whose lock its one writer holds (`hold_directory`)."""


def lock_now(fd: int, refused: Callable[[], Exception]) -> None:
    """Take an exclusive ``flock`` on the open file ``fd`` without waiting: the one writer lock.

    The lock goes with the process that holds it, however it ends (a killed writer leaves no
    stale lock), and with ``fd`` when it is closed. Held by `hold_directory` (a directory's
    one writer) and by the trace sinks (a trace's one writer).

    Raises:
        Exception: ``refused()``, when another open file holds the lock; ``fd`` is closed.
    """
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise refused() from None


@contextlib.contextmanager
def hold_directory(path: str | os.PathLike[str], *, what: str = "run directory") -> Iterator[None]:
    """Be the one writer of directory ``path`` (created if missing) until the block ends.

    The lock is an exclusive ``flock`` on `WRITER_LOCK` inside the directory, taken without
    waiting: a second writer is refused at once, and the lock goes with the process that held
    it (a killed writer leaves no stale lock; the empty file stays). A directory created here
    is removed again if the block raises before anything but the lock was written in it.

    Raises:
        FileWriteError (``busy``): Another process (or another block of this one) holds it.
        FileWriteError (``link``): The lock file's name, or the directory, is a symbolic link.
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
    lock_now(
        fd,
        lambda: FileWriteError(
            f"{directory}: another twinflow process is writing this {what} (an eval run, "
            "rescore or merge); wait for it to finish, or use another directory",
            path=directory,
            reason="busy",
        ),
    )
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
        FileWriteError (``link``): ``path`` or its directory is a symbolic link (dangling or not); it
            is not touched.
        TargetExistsError: Something else exists at ``path``; it is not touched.
        OSError: The file cannot be created for another reason (a missing directory).
    """
    target = Path(path)
    # Created relative to its directory opened without following a link, as `write_new`
    # does: a folder of a received directory swapped for a link is not written through.
    dir_fd = _open_directory(target)
    try:
        # O_EXCL fails on any existing name, a symbolic link included, without following it.
        fd = os.open(target.name, _CREATE, 0o644 if mode is None else mode, dir_fd=dir_fd)
    except FileExistsError:
        if stat.S_ISLNK(os.stat(target.name, dir_fd=dir_fd, follow_symlinks=False).st_mode):
            raise FileWriteError(
                f"{what} {target} is a symbolic link; refusing to write through it "
                "(a planted link could redirect the write); pick a path that does not exist",
                path=target,
                reason="link",
            ) from None
        raise TargetExistsError(
            f"{what} {target} already exists; it was left as it is: "
            "pick a new path or move the old one away",
            path=target,
        ) from None
    finally:
        os.close(dir_fd)
    if mode is not None:
        # The umask changed what os.open set; a mode asked for is meant exactly.
        os.fchmod(fd, mode)
    return fd


def make_directory(path: str | os.PathLike[str], *, what: str = "folder") -> None:
    """Create the directory ``path`` (its parent must exist), or keep the one there.

    Where ``mkdir(exist_ok=True)`` accepts a symbolic link to a directory, and every file then
    written "inside" lands where the link points, this refuses it: the name and its parent
    are looked at without following a link. The folders of a run directory (which may be one
    received from someone else) are made or entered through here.

    Raises:
        FileWriteError (``link``): ``path`` or its parent is a symbolic link; nothing is created.
        TargetExistsError: ``path`` is something other than a directory.
        OSError: The directory cannot be created for another reason (a missing parent).
    """
    target = Path(path)
    dir_fd = _open_directory(target)
    try:
        with contextlib.suppress(FileExistsError):
            os.mkdir(target.name, dir_fd=dir_fd)
        mode = os.stat(target.name, dir_fd=dir_fd, follow_symlinks=False).st_mode
    finally:
        os.close(dir_fd)
    if stat.S_ISLNK(mode):
        raise FileWriteError(
            f"{what} {target} is a symbolic link; nothing is written through it (a planted "
            "link could redirect the writes): remove the link",
            path=target,
            reason="link",
        )
    if not stat.S_ISDIR(mode):
        raise TargetExistsError(
            f"{what} {target} exists and is not a directory; it was left as it is: move it away",
            path=target,
        )


def refuse_linked(path: str | os.PathLike[str], what: str, *, names: int = 1) -> None:
    """Refuse a file named as input that is a symbolic link, or in a directory that is one:
    a planted link could point anywhere (a received bundle's trace at one of the reader's
    own), so every command reading or continuing a trace refuses it, with this one message.

    ``names`` is the number of hard links the file was seen with (`os.fstat`'s ``st_nlink``)
    when it is about to be written: more than one, and another name's file would change too.

    Raises:
        FileWriteError (``link``): naming the link, and what to do.
    """
    target = Path(path)
    if target.parent.is_symlink():
        raise FileWriteError(
            f"{target.parent} is a symbolic link, so {what} {target.name} is not read or "
            "written through it (a planted link could point anywhere): name the real directory",
            path=target,
            reason="link",
        )
    if target.is_symlink():
        raise FileWriteError(
            f"{what} {target} is a symbolic link; it is not read or written through (a planted "
            "link could point anywhere): name the real file",
            path=target,
            reason="link",
        )
    if names > 1:
        raise FileWriteError(
            f"{what} {target} has {names} names (hard links); it is not written, so no other "
            "name's file changes with it: copy it to a file of its own and name that",
            path=target,
            reason="link",
        )


def _open_directory(path: Path) -> int:
    directory = path.parent
    try:
        return os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR) and directory.is_symlink():
            raise FileWriteError(
                f"{directory} is a symbolic link, so {path.name} is not written through it: "
                "remove the link, or name the real directory",
                path=path,
                reason="link",
            ) from None
        raise


def _refuse_link(path: Path, dir_fd: int) -> None:
    with contextlib.suppress(FileNotFoundError):
        if stat.S_ISLNK(os.stat(path.name, dir_fd=dir_fd, follow_symlinks=False).st_mode):
            raise FileWriteError(
                f"{path} is a symbolic link; it was not written and the file it points at is "
                "untouched: remove the link, or pick another directory",
                path=path,
                reason="link",
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
    take_name: Callable[[str, int], bool],
) -> None:
    """Write ``data`` to a temporary file beside ``target``, then ``take_name`` gives it the name
    and says whether the temporary name is left to remove (a link leaves it, a rename not)."""
    dir_fd = _open_directory(target)
    try:
        _refuse_link(target, dir_fd)
        try:
            temporary = _write_temporary(target, data, dir_fd, durable=durable, mode=mode)
        except OSError as exc:
            raise _failed(target, exc) from None
        left = True
        try:
            left = take_name(temporary, dir_fd)
        finally:
            if left:  # after a rename there is nothing to remove: no failing unlink a write
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
        FileWriteError (``link``): ``path`` or its directory is a symbolic link.
        TargetExistsError: Something already has the name.
        FileWriteError: Writing failed (the disk is full, no permission); nothing was created.
    """
    target = Path(path)

    def link(temporary: str, dir_fd: int) -> bool:
        try:
            os.link(temporary, target.name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except FileExistsError:
            _refuse_link(target, dir_fd)
            raise TargetExistsError(
                f"{target} exists already; it was left as it is", path=target
            ) from None
        except OSError as exc:
            raise _failed(target, exc) from None
        return True

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
        FileWriteError (``link``): ``path`` or its directory is a symbolic link.
        FileWriteError: Writing failed (the disk is full, no permission); the old file is kept.
    """
    target = Path(path)

    def rename(temporary: str, dir_fd: int) -> bool:
        try:
            os.replace(temporary, target.name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except OSError as exc:
            raise _failed(target, exc) from None
        return False

    _write_through(target, data, durable=durable, mode=mode, take_name=rename)


def _components(directory: Path, relative: object, what: str) -> list[str]:
    """The components of a named path, or `UnsafePathError` for one that could leave."""

    def refuse(why: str) -> UnsafePathError:
        shown = repr(relative)[:200]
        return UnsafePathError(
            f"{directory}: {what} names the path {shown}, which {why}; a path a received file "
            "names must stay inside its directory: nothing was read from it",
            directory=directory,
            path=str(relative)[:_MAX_NAMED_PATH],
        )

    if not isinstance(relative, str) or not relative:
        raise refuse("is not a non-empty relative path")
    if len(relative) > _MAX_NAMED_PATH or "\0" in relative:
        raise refuse("is too long or holds a NUL character")
    if relative.startswith("/"):
        raise refuse("is absolute")
    parts = relative.split("/")
    if ".." in parts:
        raise refuse("climbs out with '..'")
    if any(p in ("", ".") for p in parts):
        raise refuse("has an empty or '.' component")
    return parts


def open_inside(
    directory: str | os.PathLike[str], relative: object, *, what: str = "a received file"
) -> BinaryIO:
    """Open for reading a regular file that a received file names, inside ``directory``.

    Args:
        directory: The directory the path is relative to (opened as the user named it).
        relative: The path as the received file names it (``traces/a@1.jsonl``); anything but
            a relative POSIX path of plain components is refused.
        what: Which file named the path (``results.json``), for the error message.

    Returns:
        The open file (binary, positioned at its start); the caller closes it.

    Raises:
        UnsafePathError: The path is absolute, climbs out, holds ``.``/empty components, passes
            through a symbolic link at any component, or is not a regular file.
        FileNotFoundError: Nothing has that name (the caller decides what a missing file means).
        OSError: The directory or file cannot be opened for another reason.
    """
    root = Path(directory)
    parts = _components(root, relative, what)
    name = "/".join(parts)
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
    try:
        for index, part in enumerate(parts):
            next_fd = _open_component(fd, part, index == len(parts) - 1, root, name, what)
            os.close(fd)
            fd = next_fd
        # Checked again on the open descriptor: what was opened is what is read.
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UnsafePathError(
                f"{root}: {what} names {name!r:.200}, which is not a regular file: nothing "
                "was read from it",
                directory=root,
                path=name,
            )
        os.set_blocking(fd, True)
        opened = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    return opened


def _open_component(fd: int, part: str, last: bool, root: Path, name: str, what: str) -> int:
    """Open one component of ``name`` inside the directory ``fd``, never through a link: a
    directory, or (``last``) a regular file, without blocking on a FIFO.

    Raises:
        UnsafePathError: The component is a link, or not what it must be.
        FileNotFoundError: Nothing has that name.
    """
    flags = (
        os.O_RDONLY
        | os.O_NOFOLLOW
        | getattr(os, "O_CLOEXEC", 0)
        | (os.O_NONBLOCK if last else os.O_DIRECTORY)
    )
    try:
        st = os.stat(part, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        raise FileNotFoundError(
            errno.ENOENT, f"{root}: {what} names {name!r:.200}, which does not exist"
        ) from None
    if stat.S_ISLNK(st.st_mode):
        raise UnsafePathError(
            f"{root}: {what} names {name!r:.200}, whose component {part!r:.100} is a "
            "symbolic link; links in a received directory are never followed: nothing "
            "was read from it",
            directory=root,
            path=name,
        )
    wanted = stat.S_ISREG if last else stat.S_ISDIR
    if not wanted(st.st_mode):
        kind = "a regular file" if last else "a directory"
        raise UnsafePathError(
            f"{root}: {what} names {name!r:.200}, whose component {part!r:.100} is "
            f"not {kind} (a FIFO or device would block or never end): nothing was read",
            directory=root,
            path=name,
        )
    try:
        return os.open(part, flags, dir_fd=fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.ENXIO):
            raise UnsafePathError(
                f"{root}: {what} names {name!r:.200}, which changed into a link or "
                "a non-file while it was opened: nothing was read from it",
                directory=root,
                path=name,
            ) from None
        raise


def read_inside(
    directory: str | os.PathLike[str],
    relative: object,
    *,
    what: str = "a received file",
    max_bytes: int | None = None,
) -> bytes:
    """The bytes of the regular file a received file names, inside ``directory`` (`open_inside`).

    Args:
        directory: The directory the path is relative to.
        relative: The path as named.
        what: Which file named the path, for the error message.
        max_bytes: Refuse a file larger than this (None: no limit).

    Raises:
        UnsafePathError: As `open_inside`, or the file is larger than ``max_bytes``.
        FileNotFoundError: Nothing has that name.
        OSError: The file cannot be read.
    """
    with open_inside(directory, relative, what=what) as f:
        data = f.read() if max_bytes is None else f.read(max_bytes + 1)
    if max_bytes is not None and len(data) > max_bytes:
        raise UnsafePathError(
            f"{directory}: {what} names {relative!r:.200}, which is over {max_bytes} bytes",
            directory=directory,
            path=str(relative),
        )
    return data
