"""`PydanticStructuredOutput`: the default `StructuredOutputAdapter` (validate, re-ask, bounded).

The loop itself is vocab's (`twinflow.vocab.validate_with_reask`), the same one the local model clients run,
so an agent run and a local client refuse, render and re-ask an answer alike (ADR 0074).
"""

from __future__ import annotations

from typing import TypeVar

from pydantic import BaseModel

from twinflow.agent._errors import AgentConfigError

# The loop is shared with twinflow.models, which this package may not import.
from twinflow.vocab import Reask, StructuredResult
from twinflow.vocab._reask import check_max_attempts, validate_with_reask

__all__ = ["PydanticStructuredOutput"]

M = TypeVar("M", bound=BaseModel)


class PydanticStructuredOutput:
    """Validate an emission with pydantic; on failure re-ask with the error, up to a bound."""

    __slots__ = ("max_attempts",)

    def __init__(self, max_attempts: int = 3) -> None:
        """Set the bound.

        Args:
            max_attempts: Attempts in all, the first included (at least 1).

        Raises:
            UserError: ``max_attempts`` is not an integer of at least 1.
        """
        self.max_attempts = check_max_attempts(max_attempts)

    def __repr__(self) -> str:
        """Show the bound."""
        return f"PydanticStructuredOutput(max_attempts={self.max_attempts})"

    def validate(self, emission: str, output_type: type[M], reask: Reask) -> StructuredResult[M]:
        """Validate ``emission`` as ``output_type``, re-asking through ``reask`` on failure.

        Args:
            emission: The model's raw, untrusted text.
            output_type: The pydantic model to validate into.
            reask: Called with the error text; returns the next emission (the caller asks
                the model again with the schema still present).

        Returns:
            The validated output and every attempt.

        Raises:
            StructuredOutputError: No emission validated within ``max_attempts``.
            AgentConfigError: ``output_type`` is not a pydantic model class.
        """
        if not (isinstance(output_type, type) and issubclass(output_type, BaseModel)):
            raise AgentConfigError(
                f"output_type must be a pydantic model class, not {output_type!r}"
            )
        return validate_with_reask(emission, output_type, reask, max_attempts=self.max_attempts)
