"""The root of every twinflow error, and the errors of the workspace's file plumbing.

`twinflow._base` is the lowest layer, so the root of the error tree lives here; `twinflow.trace`
re-exports these classes (their one public home) and draws the whole tree in its docstring.
"""

from __future__ import annotations

import os

# Not `typing.Literal` at run time: importing `typing` would be most of `import twinflow.trace`;
# mypy reads any `TYPE_CHECKING` as true.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Literal

    WriteReason = Literal["write", "link", "busy", "locked", "exists"]


class TwinflowError(Exception):
    """Root of every error raised by a twinflow package."""


class UserError(TwinflowError):
    """A usage mistake (a bad argument or configuration), as opposed to a run-time failure."""


class NotRegularFileError(UserError, OSError):
    """A path named as input is a FIFO, a device or a socket, not a file (`open_regular`).

    Constructed as ``OSError(errno, message, path)``: ``.filename`` names the path.
    """


class FileWriteError(TwinflowError, OSError):
    """A file (a trace, a side file, a run's spec, a proof) could not be written safely.

    Every writer of a file in the workspace raises it (`write_new`, `write_replace`,
    `create_exclusive`, `hold_directory` and the trace sinks); the message names the file and
    says what was kept.

    Attributes:
        filename: The file that was to be written (as `OSError` names it).
        reason: Why, as a stable tag: ``write`` (the disk is full, no permission), ``link``
            (the target or its directory is a symbolic link: nothing was written through it),
            ``busy`` (another process holds the directory's writer lock), ``locked`` (another
            process is writing the trace), ``exists`` (the name is taken: `TargetExistsError`).
    """

    def __init__(
        self, message: str, *, path: str | os.PathLike[str], reason: WriteReason = "write"
    ) -> None:
        """Create the error.

        Args:
            message: What went wrong, naming ``path``.
            path: The file that was to be written.
            reason: The stable tag (see the class).
        """
        TwinflowError.__init__(self, message)
        self.filename = os.fspath(path)
        self.reason: WriteReason = reason

    def __str__(self) -> str:
        """The message alone (not `OSError`'s ``[Errno ...]`` form)."""
        return str(self.args[0])

    def __reduce__(self) -> tuple[object, ...]:
        """Pickle with the path and reason (a worker process's error reaches its caller whole)."""
        return (_rebuild_file_error, (type(self), str(self.args[0]), self.filename, self.reason))


def _rebuild_file_error(
    cls: type[FileWriteError], message: str, path: str, reason: WriteReason
) -> FileWriteError:
    if cls is TargetExistsError:
        return TargetExistsError(message, path=path)
    return cls(message, path=path, reason=reason)


class TargetExistsError(FileWriteError, FileExistsError):
    """The name is taken (a file, a directory, a link): a new file is never written over one."""

    def __init__(self, message: str, *, path: str | os.PathLike[str]) -> None:
        """Create the error (reason ``exists``).

        Args:
            message: What went wrong, naming ``path``.
            path: The name that is taken.
        """
        super().__init__(message, path=path, reason="exists")


class UnsafePathError(TwinflowError, ValueError):
    """A path a received file names leaves its directory, or reaches a link or a non-file.

    Attributes:
        directory: The directory the path is relative to.
        path: The path as the received file names it.
    """

    def __init__(self, message: str, *, directory: str | os.PathLike[str], path: str) -> None:
        """Create the error.

        Args:
            message: What is wrong, naming the directory and the path.
            directory: The directory the path is relative to.
            path: The path as named.
        """
        super().__init__(message)
        self.directory = os.fspath(directory)
        self.path = path

    def __reduce__(self) -> tuple[object, ...]:
        """Pickle with the directory and path."""
        return (_rebuild_unsafe_path, (str(self.args[0]), self.directory, self.path))


def _rebuild_unsafe_path(message: str, directory: str, path: str) -> UnsafePathError:
    return UnsafePathError(message, directory=directory, path=path)


class _Refused(Exception):
    """Internal to `read_yaml`: a bound crossed while reading, the 1-based line (if one is to
    blame) and the problem; `read_yaml` raises it as its caller's error."""

    def __init__(self, mark: Any, problem: str) -> None:
        super().__init__(problem)
        self.line = None if mark is None else mark.line + 1
        self.problem = problem
