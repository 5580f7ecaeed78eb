"""The root of every twinflow error, and the errors of the workspace's file plumbing.

`twinflow._base` is the lowest layer, so the root of the error tree lives here; `twinflow.trace`
re-exports these classes (their one public home) and draws the whole tree in its docstring.
"""

from __future__ import annotations

import os


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

    Every writer of a file in the workspace raises it (`write_new`,
    `write_replace`, `create_exclusive` and the trace sinks); the message names the file and
    says what was kept.

    Attributes:
        filename: The file that was to be written (as `OSError` names it).
    """

    def __init__(self, message: str, *, path: str | os.PathLike[str]) -> None:
        """Create the error.

        Args:
            message: What went wrong, naming ``path``.
            path: The file that was to be written.
        """
        TwinflowError.__init__(self, message)
        self.filename = os.fspath(path)

    def __str__(self) -> str:
        """The message alone (not `OSError`'s ``[Errno ...]`` form)."""
        return str(self.args[0])

    def __reduce__(self) -> tuple[object, ...]:
        """Pickle with the path (a worker process's error reaches its caller whole)."""
        return (_rebuild_file_error, (type(self), str(self.args[0]), self.filename))


def _rebuild_file_error(cls: type[FileWriteError], message: str, path: str) -> FileWriteError:
    return cls(message, path=path)


class PlantedLinkError(FileWriteError):
    """The target (or its directory) is a symbolic link; nothing was written through it."""


class DirectoryBusyError(FileWriteError):
    """Another process holds the directory's writer lock (`hold_directory`); nothing was written."""


class TargetExistsError(FileWriteError, FileExistsError):
    """The name is taken (a file, a directory, a link): a new file is never written over one."""


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
