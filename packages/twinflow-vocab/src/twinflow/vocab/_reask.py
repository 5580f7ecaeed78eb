"""The one validate-and-re-ask loop, shared by the agent's adapter and the local model clients.

`twinflow.agent` (`PydanticStructuredOutput`) and `twinflow.models` (the structured-output
adapters and the structured-action chat mode) must not import each other, so the loop, its
error formatter, its re-ask message and its attempt-count check live here, at the layer both
depend on. One loop means one rendering of a refusal (JSON pointers, ``/`` joins), one message
given back to the model, and one error for a bad attempt count (ADR 0074).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from twinflow._base._json import json_pointer, refuse_repeated_keys
from twinflow.trace import CanonicalError, UserError
from twinflow.vocab._canonical import value_bytes
from twinflow.vocab._errors import StructuredOutputError
from twinflow.vocab._protocols import Attempt, ModelSettings, Reask, StructuredResult

__all__ = [
    "SentRequest",
    "check_max_attempts",
    "no_json_form",
    "parametrized",
    "reask_message",
    "validate_with_reask",
    "validation_error_text",
]

M = TypeVar("M", bound=BaseModel)
R = TypeVar("R", bound=BaseModel)

ROOT = "(root)"
"""How a refusal names the whole emission (the JSON pointer ``""``, which prints as nothing)."""


def validation_error_text(exc: ValidationError) -> str:
    """Render a pydantic validation error for the model (and the trace) to read.

    Returns:
        One ``pointer: message`` line per problem, the location as an RFC 6901 JSON pointer
        (``/items/0/name``; ``(root)`` for the whole value), with no documentation URLs or
        context (they name the pydantic version and would make traces differ between installs).
    """
    lines = []
    for error in exc.errors(include_url=False, include_context=False):
        lines.append(f"{json_pointer(error['loc']) or ROOT}: {error['msg']}")
    return "\n".join(lines)


# Errors whose input is not the value at the pointer: a missing field's is its parent object,
# and bad JSON's is the whole reply.
_NO_GIVEN_VALUE = frozenset({"missing", "json_invalid"})
_GIVEN_MAX_CHARS = 80


def _refusal_text(exc: ValidationError) -> str:
    """`validation_error_text`, each line also naming the value the reply gave there.

    A re-ask that names the field, the constraint and the value lets a small model fix that
    value instead of writing the same one again.
    """
    lines = []
    for error in exc.errors(include_url=False, include_context=False):
        line = f"{json_pointer(error['loc']) or ROOT}: {error['msg']}"
        if error["type"] not in _NO_GIVEN_VALUE:
            given = json.dumps(error["input"], ensure_ascii=False, default=str)
            if len(given) > _GIVEN_MAX_CHARS:
                given = given[: _GIVEN_MAX_CHARS - 3] + "..."
            line += f" (the reply gave {given})"
        lines.append(line)
    return "\n".join(lines)


def no_json_form(output: BaseModel) -> str | None:
    """Why a validated ``output`` has no canonical JSON form (``pointer: detail``), or None.

    pydantic reads ``1e400`` as infinity, which validates as a float but cannot be recorded:
    such an output is refused like any invalid answer, and re-asked.
    """
    try:
        value_bytes(output)
    except CanonicalError as exc:
        return f"{exc.pointer or ROOT}: {exc.detail}"
    return None


def reask_message(error: str) -> str:
    """The user message that gives a refused reply's error back to the model."""
    return (
        "Your previous reply was refused by the schema validator:\n"
        f"{error}\n"
        "Reply again with one JSON object that satisfies the schema."
    )


def check_max_attempts(max_attempts: object) -> int:
    """Return ``max_attempts`` if it is a whole number of attempts, at least 1.

    Raises:
        UserError: It is not an integer, or is below 1.
    """
    if isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 1:
        raise UserError(
            f"max_attempts counts every attempt, the first included, and must be an integer of "
            f"at least 1, got {max_attempts!r}"
        )
    return max_attempts


_PARAMETRIZED: dict[tuple[type[BaseModel], type[BaseModel]], type[BaseModel]] = {}


def parametrized(generic: type[R], output_type: type[BaseModel]) -> type[R]:
    """``generic[output_type]``, built once per pair (pydantic's own lookup costs ~0.1 ms a call)."""
    key = (generic, output_type)
    found = _PARAMETRIZED.get(key)
    if found is None:
        found = _PARAMETRIZED[key] = generic[output_type]  # type: ignore[index]  # a pydantic generic model, subscripted at run time, which mypy cannot see
    return found  # type: ignore[return-value]  # generic[output_type] is a subclass of R


@dataclass(frozen=True)
class SentRequest:
    """What the caller knows of one request it made, for the attempt its reply becomes."""

    digest: str
    """The request's digest."""
    settings: ModelSettings
    """Its sampling settings."""
    cut: bool
    """The reply stopped at ``max_tokens`` (finish reason ``length``)."""


def _validated(
    emission: str, output_type: type[M], sent: SentRequest | None
) -> tuple[M | None, str | None]:
    """The emission's output, or why it was refused (a cut-off reply says so first)."""
    try:
        refuse_repeated_keys(emission)
    except ValueError as exc:
        return None, f"{ROOT}: {exc}"
    try:
        output = output_type.model_validate_json(emission)
    except ValidationError as exc:
        error = _refusal_text(exc)
        if sent is not None and sent.cut:
            error = (
                f"{ROOT}: the reply was cut off at max_tokens={sent.settings.max_tokens} "
                f"before it ended; give a shorter answer\n{error}"
            )
        return None, error
    unrecordable = no_json_form(output)
    return (output, None) if unrecordable is None else (None, unrecordable)


def validate_with_reask(
    emission: str,
    output_type: type[M],
    reask: Reask,
    *,
    max_attempts: int,
    requests: Sequence[SentRequest] = (),
) -> StructuredResult[M]:
    """Validate ``emission``, re-asking on failure until ``max_attempts`` attempts are spent.

    An emission is refused when it does not validate as ``output_type``, or when the value it
    validates to has no canonical JSON form (it could not be recorded).

    Args:
        emission: The first raw, untrusted emission.
        output_type: The pydantic model to validate into.
        reask: Called with the error text; returns the next emission (the caller asks the
            model again, the schema still present, `reask_message` telling it why).
        max_attempts: Total attempts allowed, the first included.
        requests: When the caller made the requests, each one so far, read after each reask
            so attempt ``n`` carries the digest and settings of request ``n``.

    Returns:
        The validated output and every attempt.

    Raises:
        UserError: ``output_type`` is not a pydantic model class, or ``max_attempts`` is not
            at least 1.
        StructuredOutputError: No emission validated; ``.attempts`` holds them all.
    """
    check_max_attempts(max_attempts)
    if not (isinstance(output_type, type) and issubclass(output_type, BaseModel)):
        raise UserError(f"output_type must be a pydantic model class, not {output_type!r}")
    attempts: list[Attempt] = []
    for number in range(1, max_attempts + 1):
        sent = requests[number - 1] if len(requests) >= number else None
        output, error = _validated(emission, output_type, sent)
        attempts.append(
            Attempt(
                number=number,
                emission=emission,
                error=error,
                request_digest=None if sent is None else sent.digest,
                settings=None if sent is None else sent.settings,
            )
        )
        if output is not None:
            return parametrized(StructuredResult, output_type)(
                output=output, attempts=tuple(attempts)
            )
        if number < max_attempts and error is not None:
            emission = reask(error)
    raise StructuredOutputError(
        f"no reply validated as {output_type.__name__} in {max_attempts} attempt(s); last "
        f"error: {attempts[-1].error}. Inspect .attempts, simplify the schema, or use a "
        "stronger model",
        attempts=tuple(attempts),
    )
