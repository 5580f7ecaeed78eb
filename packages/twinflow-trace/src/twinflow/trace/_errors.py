"""The errors of twinflow.trace, and the root of every twinflow error.

The trace leaf is the lowest layer, so the root of the workspace's error tree lives here and
`twinflow.vocab` re-exports it (one ``except TwinflowError`` still catches every package). The
whole tree is drawn in the package docstring (``twinflow.trace.__doc__``).
"""

from __future__ import annotations

import os

# Not `typing.TYPE_CHECKING`: importing `typing` would be most of `import twinflow.trace`;
# mypy reads any `TYPE_CHECKING` as true.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from twinflow.trace._verify import VerificationReport

__all__ = [
    "CanonicalError",
    "DirectoryBusyError",
    "EventTooLargeError",
    "FileWriteError",
    "InvalidProofError",
    "NotRegularFileError",
    "PlantedLinkError",
    "SignatureError",
    "TargetExistsError",
    "TraceCorruptError",
    "TraceError",
    "TraceFormatError",
    "TraceLockedError",
    "TwinflowError",
    "UnsafePathError",
    "UserError",
]


class TwinflowError(Exception):
    """Root of every error raised by a twinflow package."""


class UserError(TwinflowError):
    """A usage mistake (a bad argument or configuration), as opposed to a run-time failure."""


class NotRegularFileError(UserError, OSError):
    """A path named as input is a FIFO, a device or a socket, not a file (`open_regular`).

    Constructed as ``OSError(errno, message, path)``: ``.filename`` names the path.
    """


class TraceError(TwinflowError):
    """Root of the errors raised by `twinflow.trace`."""


class CanonicalError(TraceError):
    """A value has no RFC 8785 canonical form, or bytes given as canonical JSON are not.

    Attributes:
        reason: A short tag for what is wrong (``duplicate_key``, ``non_finite``, ``too_deep``,
            ``not_json``, ``not_utf8``, ``number_form``, ``escape_form``, ``whitespace``,
            ``key_order``, ``no_json_form``), so callers can report each failure as its own kind.
        pointer: JSON pointer (RFC 6901) to the value that has no canonical form; ``""`` for
            the whole value, or where the failure has no one place (bytes that do not parse).
        detail: What is wrong there, without the pointer (the message is built from both), so
            a caller can render the failure its own way without parsing the message.
    """

    def __init__(
        self,
        message: str,
        *,
        reason: str = "no_json_form",
        pointer: str = "",
        detail: str | None = None,
    ) -> None:
        """Create the error with its message, reason tag, and where and what went wrong.

        Args:
            message: The whole message.
            reason: The short tag (see the class).
            pointer: JSON pointer to the offending value.
            detail: What is wrong at ``pointer``; the message when not given.
        """
        super().__init__(message)
        self.reason = reason
        self.pointer = pointer
        self.detail = message if detail is None else detail


class TraceFormatError(TraceError, ValueError):
    """A proof, checkpoint or key file is not in the documented form; the message says where."""


class EventTooLargeError(TraceError, ValueError):
    """An event whose trace line would be longer than readers accept: it is not written, so no
    writer makes a trace its own readers refuse."""


class FileWriteError(TraceError, OSError):
    """A file (a trace, a side file, a run's spec, a proof) could not be written safely.

    Every writer of a file in the workspace raises it (`twinflow.trace.write_new`,
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
        TraceError.__init__(self, message)
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


class TraceLockedError(TraceError, UserError):
    """Another process is writing the trace (a run, a resume or an approval); nothing was written."""


class UnsafePathError(TraceError, ValueError):
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


class TraceCorruptError(TraceError):
    """A trace was read as events but does not verify; ``.report`` says where and how."""

    def __init__(self, message: str, report: VerificationReport) -> None:
        """Carry the verification report along with the message."""
        super().__init__(message)
        self.report = report


class SignatureError(TraceError):
    """A checkpoint signature is missing, malformed or does not match the key."""


class InvalidProofError(TraceError, ValueError):
    """An inclusion or consistency proof does not verify."""
