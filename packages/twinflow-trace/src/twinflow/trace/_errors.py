"""The errors of twinflow.trace; the root and the file errors live in `twinflow._base._errors`.

The whole tree is drawn in the package docstring (``twinflow.trace.__doc__``). A failure is a
``reason`` tag on one of these classes, not a class of its own: callers that tell failures
apart compare the tag.
"""

from __future__ import annotations

from twinflow._base._errors import TwinflowError

# Not `typing.TYPE_CHECKING`: importing `typing` would be most of `import twinflow.trace`;
# mypy reads any `TYPE_CHECKING` as true.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Literal

    from twinflow.trace._verify import VerificationReport

    FormatReason = Literal["format", "event_too_large", "witness_state", "attestation"]
    SignatureReason = Literal[
        "malformed_note",
        "malformed_key",
        "ambiguous_key",
        "malformed_checkpoint",
        "invalid_signature",
        "unverified",
        "origin_mismatch",
        "signing_unavailable",
        "unsigned_checkpoint",
        "cosignature",
        "witness_refused",
        "attestation_mismatch",
    ]


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
    """A proof, checkpoint, key, attestation or witness-state file is not in its documented
    form, or an event is too large to write as a trace line; the message says where.

    Attributes:
        reason: ``format`` (a file not in its form), ``event_too_large`` (an event whose line
            readers would refuse: it is not written, so no writer makes a trace its own readers
            refuse), ``witness_state`` (a witness's state file), ``attestation`` (an
            attestation envelope or statement).
    """

    def __init__(self, message: str, *, reason: FormatReason = "format") -> None:
        """Create the error with its message and reason tag."""
        super().__init__(message)
        self.reason: FormatReason = reason


class TraceCorruptError(TraceError):
    """A trace was read as events but does not verify; ``.report`` says where and how."""

    def __init__(self, message: str, report: VerificationReport) -> None:
        """Carry the verification report along with the message."""
        super().__init__(message)
        self.report = report


class SignatureError(TraceError):
    """A signed note, key, checkpoint, cosignature or attestation was refused.

    Attributes:
        reason: What was refused, as a stable tag: ``malformed_note``, ``malformed_key``,
            ``malformed_checkpoint`` (the text is not in its form; ``problem`` says how),
            ``ambiguous_key`` (two known keys share a name and hash), ``invalid_signature`` (a
            known key's signature does not verify), ``unverified`` (too few known keys signed),
            ``origin_mismatch`` (a checkpoint of another log), ``signing_unavailable`` (the
            ``signatures`` extra is not installed), ``unsigned_checkpoint`` (a checkpoint
            signature missing or empty-keyed), ``cosignature`` (a witness cosignature missing,
            late or wrong), ``witness_refused`` (a witness will not cosign), and
            ``attestation_mismatch`` (an attestation that does not match the run).
        problem: For the malformed reasons, the stable code of what was wrong in the text
            (``bad-base64``, ``too-large``, ...); for ``witness_refused``, why the witness
            refused (``unknown-log``, ``not-consistent``, ...); None otherwise.
        size: For ``witness_refused`` with ``old-size-mismatch``: the size the witness last
            cosigned; None otherwise.
    """

    def __init__(
        self,
        message: str,
        *,
        reason: SignatureReason,
        problem: str | None = None,
        size: int | None = None,
    ) -> None:
        """Create the error with its message, reason tag, problem code and size."""
        super().__init__(message)
        self.reason: SignatureReason = reason
        self.problem = problem
        self.size = size


class InvalidProofError(TraceError, ValueError):
    """An inclusion or consistency proof does not verify."""


class _Slow(Exception):
    """Internal to `canonical_bytes`: the fast walk found something only the exact writer can
    encode; never leaves it."""
