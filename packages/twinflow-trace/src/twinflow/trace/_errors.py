"""The errors of twinflow.trace; the root and the file errors live in `twinflow._base._errors`.

The whole tree is drawn in the package docstring (``twinflow.trace.__doc__``).
"""

from __future__ import annotations

from twinflow._base._errors import TwinflowError, UserError

# Not `typing.TYPE_CHECKING`: importing `typing` would be most of `import twinflow.trace`;
# mypy reads any `TYPE_CHECKING` as true.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from twinflow.trace._verify import VerificationReport


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


class TraceLockedError(TraceError, UserError):
    """Another process is writing the trace (a run, a resume or an approval); nothing was written."""


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
