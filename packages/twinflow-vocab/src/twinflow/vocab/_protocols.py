"""The model-facing seams: what the agent loop and the model clients meet at.

`ChatModel` and `StructuredOutputAdapter` are Protocols speaking only vocab values, so the loop
(`twinflow.agent`) and the clients (`twinflow.models`) never import each other; the
composition root injects one into the other.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, Literal, Protocol, Self, TypeVar

from pydantic import BaseModel, ConfigDict, Field, JsonValue, field_validator, model_validator

from twinflow.vocab._values import (
    FrozenValue,
    Message,
    ToolSpec,
    Transcript,
    check_json,
)

__all__ = [
    "Attempt",
    "ChatModel",
    "FinishReason",
    "ModelRequest",
    "ModelResponse",
    "ModelSettings",
    "OutputSchema",
    "Reask",
    "StructuredOutputAdapter",
    "StructuredResult",
    "Usage",
]

M = TypeVar("M", bound=BaseModel)

FinishReason = Literal["stop", "length", "tool_calls", "error"]
"""Why the model stopped: a natural end, the token limit, to call tools, or a failure."""

Reask = Callable[[str], str]
"""Takes the validation error text, returns the next raw emission (asked with the schema still present)."""


class OutputSchema(FrozenValue):
    """A named JSON Schema the model's answer must satisfy."""

    name: str
    """Schema name (a model class name, usually)."""
    json_schema: dict[str, JsonValue]
    """The JSON Schema."""

    @field_validator("json_schema")
    @classmethod
    def _json(cls, value: dict[str, JsonValue]) -> dict[str, JsonValue]:
        check_json(value, ("json_schema",))
        return value

    @classmethod
    def for_model(cls, model: type[BaseModel]) -> OutputSchema:
        """The schema of a pydantic model class, named after it."""
        return cls(name=model.__name__, json_schema=model.model_json_schema())


class ModelSettings(FrozenValue):
    """Sampling settings; `None` leaves the server's default."""

    temperature: float | None = Field(default=None, ge=0)
    """Sampling temperature."""
    max_tokens: int | None = Field(default=None, gt=0)
    """Upper bound on generated tokens."""
    seed: int | None = None
    """Sampling seed, for servers that honour one."""


class ModelRequest(FrozenValue):
    """One request to a chat model."""

    transcript: Transcript
    """The conversation so far."""
    tools: tuple[ToolSpec, ...] = ()
    """Tools the model may call (schema only)."""
    output_schema: OutputSchema | None = None
    """Schema the answer must satisfy, if any."""
    settings: ModelSettings = ModelSettings()
    """Sampling settings."""

    @classmethod
    def of_valid(
        cls,
        transcript: Transcript,
        tools: tuple[ToolSpec, ...],
        output_schema: OutputSchema | None,
        settings: ModelSettings,
    ) -> ModelRequest:
        """The request of values already validated, its tools' names already unique, built by
        `model_construct` (not checked again: a step's request would re-walk the whole
        transcript)."""
        return cls.model_construct(
            transcript=transcript, tools=tools, output_schema=output_schema, settings=settings
        )

    @model_validator(mode="after")
    def _unique_tools(self) -> Self:
        names = [t.name for t in self.tools]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"tool names must be unique within a request; repeated: {dupes}")
        return self


class Usage(FrozenValue):
    """Token counts reported by the server."""

    input_tokens: int = Field(default=0, ge=0)
    """Prompt tokens."""
    output_tokens: int = Field(default=0, ge=0)
    """Generated tokens."""


class ModelResponse(FrozenValue):
    """One reply from a chat model."""

    model_config = ConfigDict(protected_namespaces=())

    message: Message
    """The assistant message."""
    usage: Usage = Usage()
    """Token counts."""
    finish_reason: FinishReason = "stop"
    """Why the model stopped."""
    model_name: str = ""
    """The model the server says answered."""

    @field_validator("message")
    @classmethod
    def _assistant(cls, value: Message) -> Message:
        if value.role != "assistant":
            raise ValueError(f"a model response holds an assistant message, not {value.role}")
        return value


class ChatModel(Protocol):
    """A chat model: one request in, one assistant message out."""

    def request(self, request: ModelRequest) -> ModelResponse:
        """Send one request and return the model's reply."""
        ...


class Attempt(FrozenValue):
    """One attempt at a structured output."""

    number: int = Field(ge=1)
    """1 for the first attempt."""
    emission: str
    """The raw, untrusted text the model emitted."""
    error: str | None
    """Why the emission was refused, or None if it was accepted."""
    request_digest: str | None = None
    """Digest of the request that produced the emission, when the adapter made one."""
    settings: ModelSettings | None = None
    """The sampling settings of that request, when the adapter made one (re-asks change them)."""


class StructuredResult(FrozenValue, Generic[M]):
    """A validated structured output and the attempts it took."""

    output: M
    """The validated value."""
    attempts: tuple[Attempt, ...]
    """Every attempt, in order; the last one succeeded."""


class StructuredOutputAdapter(Protocol):
    """Turns an untrusted emission into a validated pydantic model, or raises."""

    def validate(self, emission: str, output_type: type[M], reask: Reask) -> StructuredResult[M]:
        """Validate `emission` as `output_type`, re-asking through `reask` on failure.

        Raises:
            StructuredOutputError: No emission validated within the adapter's attempts.
        """
        ...
