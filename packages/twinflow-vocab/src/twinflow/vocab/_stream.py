"""The raw streaming chunk protocol and the one assembler that turns chunks into a reply.

Every streaming dialect (OpenAI-compatible server-sent events, Ollama NDJSON, Anthropic
Messages events) is decoded by its client into these typed chunks; `ChunkAssembler` is the
single implementation that builds the `ModelResponse` out of them, so a streamed reply and a
non-streamed one are the same value (the same canonical digest), whatever the split.

How parts are formed: consecutive text deltas join into one `TextPart`, consecutive reasoning
deltas into one `ReasoningPart`; a tool call becomes one `ToolCallPart` at the position where it
started, its argument deltas (JSON text fragments) joined and parsed when the stream ends.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Annotated, Literal, Protocol

from pydantic import Discriminator, Field

from twinflow._base._json import loads as received_json
from twinflow.trace import CanonicalError, UserError
from twinflow.vocab._canonical import value_bytes
from twinflow.vocab._errors import InvalidValueError, WireFormatError
from twinflow.vocab._protocols import FinishReason, ModelRequest, ModelResponse, Usage
from twinflow.vocab._values import (
    CallId,
    FrozenValue,
    Message,
    Part,
    ReasoningPart,
    TextPart,
    ToolCallPart,
)

__all__ = [
    "Chunk",
    "ChunkAssembler",
    "FinishChunk",
    "ReasoningDelta",
    "StreamingChatModel",
    "TextDelta",
    "ToolCallDelta",
    "ToolCallEnd",
    "ToolCallStart",
    "UsageChunk",
    "assemble",
    "response_chunks",
]


class TextDelta(FrozenValue):
    """A piece of the answer's text."""

    kind: Literal["text_delta"] = "text_delta"
    """Union tag."""
    text: str
    """The text, to append to what came before."""


class ReasoningDelta(FrozenValue):
    """A piece of the model's reasoning ("thinking") text."""

    kind: Literal["reasoning_delta"] = "reasoning_delta"
    """Union tag."""
    text: str
    """The reasoning text, to append to what came before."""


class ToolCallStart(FrozenValue):
    """A tool call begins: its stream index, id and tool name."""

    kind: Literal["tool_call_start"] = "tool_call_start"
    """Union tag."""
    index: int = Field(ge=0)
    """The call's index in the stream; its deltas and its end name the same index."""
    id: str
    """The call id (the provider's, or one the client derived)."""
    name: str
    """The tool called."""


class ToolCallDelta(FrozenValue):
    """A fragment of a tool call's arguments, as JSON text."""

    kind: Literal["tool_call_delta"] = "tool_call_delta"
    """Union tag."""
    index: int = Field(ge=0)
    """The index of the call started by a `ToolCallStart`."""
    arguments: str
    """JSON text to append to the call's arguments so far."""


class ToolCallEnd(FrozenValue):
    """A tool call's arguments are complete."""

    kind: Literal["tool_call_end"] = "tool_call_end"
    """Union tag."""
    index: int = Field(ge=0)
    """The index of the call started by a `ToolCallStart`."""


class UsageChunk(FrozenValue):
    """Token counts; later counts replace earlier ones field by field when they are not None."""

    kind: Literal["usage"] = "usage"
    """Union tag."""
    input_tokens: int | None = Field(default=None, ge=0)
    """Prompt tokens, if this chunk reports them."""
    output_tokens: int | None = Field(default=None, ge=0)
    """Generated tokens, if this chunk reports them."""


class FinishChunk(FrozenValue):
    """The model stopped: why, and which model answered."""

    kind: Literal["finish"] = "finish"
    """Union tag."""
    reason: FinishReason
    """Why the model stopped."""
    model_name: str = ""
    """The model the server says answered."""


Chunk = Annotated[
    TextDelta
    | ReasoningDelta
    | ToolCallStart
    | ToolCallDelta
    | ToolCallEnd
    | UsageChunk
    | FinishChunk,
    Discriminator("kind"),
]
"""Any raw streaming chunk, tagged by `kind`."""


class StreamingChatModel(Protocol):
    """A chat model that can also deliver its reply as it is generated.

    `stream` returns exactly what `request` would for the same reply (the chunks go through
    `ChunkAssembler`); `on_chunk` sees every chunk as it arrives, for display only.
    """

    def request(self, request: ModelRequest) -> ModelResponse:
        """Send one request and return the model's reply."""
        ...

    def stream(self, request: ModelRequest, on_chunk: Callable[[Chunk], None]) -> ModelResponse:
        """Send one request, call `on_chunk` with each chunk as it arrives, return the reply."""
        ...


class _Call:
    __slots__ = ("arguments", "ended", "id", "name", "number")

    def __init__(self, number: int, call_id: str, name: str) -> None:
        self.number = number
        self.id = call_id
        self.name = name
        self.arguments: list[str] = []
        self.ended = False


class ChunkAssembler:
    """Builds the `ModelResponse` of one streamed reply, chunk by chunk.

    Feed every chunk in order with `feed`, then call `result`. Feeding costs an append per
    delta; the parts are built once, in `result`.
    """

    def __init__(self) -> None:
        """Start an empty reply."""
        # Each slot: ("text" | "reasoning", [pieces]) or ("call", _Call).
        self._slots: list[tuple[str, list[str] | _Call]] = []
        self._calls: dict[int, _Call] = {}
        self._input: int | None = None
        self._output: int | None = None
        self._finish: FinishChunk | None = None
        self._count = 0

    def feed(self, chunk: Chunk) -> None:
        """Take the next chunk.

        Raises:
            WireFormatError: The chunk does not fit the stream so far (a delta for a call that
                never started, a second start of one index, anything after the finish); `.path`
                is `/<chunk number>`.
        """
        number = self._count
        self._count += 1
        if self._finish is not None and not isinstance(chunk, UsageChunk):
            raise WireFormatError(
                f"a {chunk.kind} chunk came after the finish chunk", path=f"/{number}"
            )
        if isinstance(chunk, TextDelta | ReasoningDelta):
            kind = "text" if isinstance(chunk, TextDelta) else "reasoning"
            if self._slots and self._slots[-1][0] == kind:
                pieces = self._slots[-1][1]
                assert isinstance(pieces, list)
                pieces.append(chunk.text)
            else:
                self._slots.append((kind, [chunk.text]))
        elif isinstance(chunk, ToolCallStart):
            if chunk.index in self._calls:
                raise WireFormatError(
                    f"tool call index {chunk.index} started twice", path=f"/{number}"
                )
            started = _Call(number, chunk.id, chunk.name)
            self._calls[chunk.index] = started
            self._slots.append(("call", started))
        elif isinstance(chunk, ToolCallDelta | ToolCallEnd):
            call = self._calls.get(chunk.index)
            if call is None or call.ended:
                state = "never started" if call is None else "already ended"
                raise WireFormatError(
                    f"{chunk.kind} for tool call index {chunk.index}, which {state}",
                    path=f"/{number}",
                )
            if isinstance(chunk, ToolCallDelta):
                call.arguments.append(chunk.arguments)
            else:
                call.ended = True
        elif isinstance(chunk, UsageChunk):
            if chunk.input_tokens is not None:
                self._input = chunk.input_tokens
            if chunk.output_tokens is not None:
                self._output = chunk.output_tokens
        else:
            self._finish = chunk

    def result(self) -> ModelResponse:
        """The assembled reply, equal to what the same reply non-streamed reads as.

        Without a finish chunk the stream was cut short: that is refused, not guessed.

        Raises:
            WireFormatError: No finish chunk, or a tool call's arguments are not a JSON object
                with a canonical form (`.path` is `/<number of its start chunk>`).
        """
        if self._finish is None:
            raise WireFormatError(
                f"the stream ended after {self._count} chunk(s) without a finish chunk: the "
                "reply is incomplete",
                path="",
            )
        parts: list[Part] = []
        for kind, slot in self._slots:
            if isinstance(slot, _Call):
                parts.append(_tool_call(slot))
            elif kind == "text":
                parts.append(TextPart(text="".join(slot)))
            else:
                parts.append(ReasoningPart(text="".join(slot)))
        finish = self._finish
        reason: FinishReason = finish.reason
        if any(isinstance(p, ToolCallPart) for p in parts) and reason == "stop":
            reason = "tool_calls"
        return ModelResponse(
            message=Message(role="assistant", parts=tuple(parts)),
            usage=Usage(input_tokens=self._input or 0, output_tokens=self._output or 0),
            finish_reason=reason,
            model_name=finish.model_name,
        )


def _tool_call(call: _Call) -> ToolCallPart:
    where = f"/{call.number}"
    text = "".join(call.arguments) or "{}"
    try:
        arguments = received_json(text)
    except (ValueError, RecursionError) as exc:
        raise WireFormatError(
            f"the arguments of tool call {call.id!r} are not JSON ({exc})", path=where
        ) from None
    if not isinstance(arguments, dict):
        raise WireFormatError(
            f"the arguments of tool call {call.id!r} are not a JSON object", path=where
        )
    try:
        value_bytes(arguments)
        return ToolCallPart(id=CallId(call.id), name=call.name, arguments=arguments)
    except (CanonicalError, InvalidValueError) as exc:
        raise WireFormatError(f"tool call {call.id!r}: {exc}", path=where) from None


def assemble(chunks: Iterable[Chunk]) -> ModelResponse:
    """Assemble a whole chunk sequence into its `ModelResponse` (see `ChunkAssembler`).

    Raises:
        WireFormatError: The sequence does not form a complete reply.
    """
    assembler = ChunkAssembler()
    for chunk in chunks:
        assembler.feed(chunk)
    return assembler.result()


def response_chunks(response: ModelResponse, *, size: int = 4) -> list[Chunk]:
    """A chunk sequence that streams `response`: the assembler's inverse, for fakes and tests.

    Text and reasoning are cut every `size` characters, tool-call arguments (as canonical JSON)
    likewise; `assemble(response_chunks(r))` has the digest of `r`.

    Raises:
        UserError: `size` is not positive.
    """
    if size < 1:
        raise UserError(f"response_chunks(size={size}): pass a positive size")
    chunks: list[Chunk] = []
    for index, part in enumerate(response.message.parts):
        if isinstance(part, TextPart | ReasoningPart):
            make = TextDelta if isinstance(part, TextPart) else ReasoningDelta
            pieces = [part.text[i : i + size] for i in range(0, len(part.text), size)]
            chunks += [make(text=piece) for piece in pieces or [""]]
        elif isinstance(part, ToolCallPart):
            text = value_bytes(part.arguments).decode("utf-8")
            chunks.append(ToolCallStart(index=index, id=part.id, name=part.name))
            chunks += [
                ToolCallDelta(index=index, arguments=text[i : i + size])
                for i in range(0, len(text), size)
            ]
            chunks.append(ToolCallEnd(index=index))
        else:
            raise UserError(
                f"response_chunks: a {part.kind} part has no streaming chunk; stream text, "
                "reasoning and tool calls only"
            )
    usage = response.usage
    chunks.append(UsageChunk(input_tokens=usage.input_tokens, output_tokens=usage.output_tokens))
    chunks.append(FinishChunk(reason=response.finish_reason, model_name=response.model_name))
    return chunks
