"""`PydanticStructuredOutput`: the default `StructuredOutputAdapter` (validate, re-ask, bounded)."""

from __future__ import annotations

from typing import TypeVar

from pydantic import BaseModel, ValidationError

from twinflow.agent._errors import AgentConfigError
from twinflow.agent._tools import format_validation_error
from twinflow.vocab import (
    Attempt,
    CanonicalError,
    Reask,
    StructuredOutputError,
    StructuredResult,
    canonical_bytes,
)

__all__ = ["PydanticStructuredOutput"]

M = TypeVar("M", bound=BaseModel)


def _no_json_form(output: BaseModel) -> str | None:
    """Why ``output`` has no canonical JSON form (``location: reason``), or None if it has one."""
    try:
        canonical_bytes(output.model_dump(mode="json"))
    except CanonicalError as exc:
        where, _, reason = str(exc).removeprefix("no RFC 8785 form at /").partition(": ")
        return f"{where.replace('/', '.') or '(root)'}: {reason}"
    return None


class PydanticStructuredOutput:
    """Validate an emission with pydantic; on failure re-ask with the error, up to a bound."""

    __slots__ = ("max_attempts",)

    def __init__(self, max_attempts: int = 3) -> None:
        """Set the bound.

        Args:
            max_attempts: Attempts in all, the first included (at least 1).

        Raises:
            AgentConfigError: ``max_attempts`` is below 1.
        """
        if max_attempts < 1:
            raise AgentConfigError(f"max_attempts must be at least 1, not {max_attempts}")
        self.max_attempts = max_attempts

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
        attempts: list[Attempt] = []
        for number in range(1, self.max_attempts + 1):
            try:
                output = output_type.model_validate_json(emission)
                # The output is recorded as canonical JSON: one without that form (pydantic
                # reads 1e400 as inf) is refused like any invalid answer, and re-asked.
                error = _no_json_form(output)
            except ValidationError as exc:
                error = format_validation_error(exc)
            if error is not None:
                attempts.append(Attempt(number=number, emission=emission, error=error))
                if number == self.max_attempts:
                    break
                emission = reask(error)
                continue
            attempts.append(Attempt(number=number, emission=emission, error=None))
            return StructuredResult[output_type](output=output, attempts=tuple(attempts))  # type: ignore[valid-type]  # runtime type argument
        raise StructuredOutputError(
            f"{output_type.__name__}: no valid output after {self.max_attempts} attempts; "
            f"last error: {attempts[-1].error}",
            attempts=tuple(attempts),
        )
