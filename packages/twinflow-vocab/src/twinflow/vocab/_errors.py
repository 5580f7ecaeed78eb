"""The errors of twinflow.vocab; the tree is drawn in the package docstring.

The root `TwinflowError` and `UserError` are defined in `twinflow.trace`, the lowest layer, and
only there; so is `CanonicalError`, which `value_bytes` and `parse_canonical` raise.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from twinflow.trace import TwinflowError, UserError

if TYPE_CHECKING:
    from twinflow.vocab._protocols import Attempt


__all__ = [
    "InvalidValueError",
    "PartNotCarriedError",
    "StructuredOutputError",
    "VocabError",
    "WireFormatError",
]


class VocabError(TwinflowError):
    """Root of the errors raised by `twinflow.vocab`."""


class InvalidValueError(VocabError, ValueError):
    """A value was refused at construction: the message names the field and the rule broken."""


class WireFormatError(VocabError):
    """A provider payload does not match its wire format.

    Attributes:
        path: JSON pointer (RFC 6901) to the offending part of the payload; `""` is the whole payload.
        reason: The message without the path.
    """

    def __init__(self, message: str, *, path: str) -> None:
        """Create the error.

        Args:
            message: What was wrong and what was expected there.
            path: JSON pointer to the offending part of the payload.
        """
        super().__init__(f"{message} (at {path or '/'})")
        self.path = path
        self.reason = message


class PartNotCarriedError(VocabError, UserError):
    """A wire adapter cannot carry a part's kind, and the kind declares no fallback.

    Attributes:
        adapter: The wire format or client that refused (``openai``, ``ollama``, ...).
        kind: The part kind it cannot carry.
    """

    def __init__(self, adapter: str, kind: str, detail: str = "") -> None:
        """Create the error.

        Args:
            adapter: The wire format or client that refused.
            kind: The part kind it cannot carry.
            detail: Why, when it is more than "no field for it" (a prefill not at the end).
        """
        why = detail or (
            "it has no field for that kind and the kind declares no text fallback; use a "
            "model whose adapter carries it, or give the kind a fallback"
        )
        super().__init__(f"the {adapter} wire format cannot carry a {kind!r} part: {why}")
        self.adapter = adapter
        self.kind = kind


class StructuredOutputError(VocabError):
    """No emission passed validation within the allowed attempts.

    Attributes:
        attempts: Every attempt made, in order, each with its raw emission and error text.
    """

    def __init__(self, message: str, *, attempts: tuple[Attempt, ...]) -> None:
        """Create the error.

        Args:
            message: What failed, and what the caller can do about it.
            attempts: Every attempt made, in order.
        """
        super().__init__(message)
        self.attempts = attempts
