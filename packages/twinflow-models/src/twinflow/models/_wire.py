"""Request bodies and response parsing for the two wire formats: Ollama's `/api/chat` and the
OpenAI-compatible `/v1/chat/completions` (llama-cpp-python, llama.cpp, vLLM, LM Studio).

Messages and tools are translated, both ways, by `twinflow.vocab._wire`, the one translation of
every wire format in twinflow. What stays here is this client's request-level policy: what of
a conversation it sends (`outgoing`), the dialects' `response_format`, sampling settings,
`extra_body`, and reading a response's finish reason, usage and model name.

Everything here is a pure function from values to JSON and back: no I/O, so every body can be
checked against the `ollama` package's own request types and every recorded response parsed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pydantic import JsonValue

from twinflow.models._errors import MalformedResponseError
from twinflow.vocab import (
    MediaPart,
    Message,
    Part,
    ReasoningPart,
    StructuredPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    Transcript,
    Usage,
    WireFormatError,
)
from twinflow.vocab import value_bytes as canonical_bytes
from twinflow.vocab._parts import carried_parts
from twinflow.vocab._protocols import FinishReason


@dataclass(frozen=True)
class Reply:
    """The parts of a chat response this package uses, whichever wire format it came in."""

    content: str | None
    tool_calls: tuple[tuple[str, dict[str, JsonValue]], ...]
    finish_reason: FinishReason
    usage: Usage
    model_name: str


def _dumps(value: JsonValue) -> str:
    return canonical_bytes(value).decode("utf-8")


def render_tool_result(part: ToolResultPart) -> str:
    """Render a tool result as text for a server that has no tool role in play.

    The call id is left out: it is random per run, the model never saw it (a structured
    action carries none) and each result follows its own call. With it, two runs of one spec
    sent different tokens after their first tool call, so a temperature-0 model could answer
    differently from there on.
    """
    status = "error" if part.is_error else "result"
    return f"Tool {part.name} {status}: {part.content}"


def render_tool_call(part: ToolCallPart) -> str:
    """Render a tool call as the structured-action JSON the model itself would emit."""
    return _dumps({"action": "call_tool", "tool": part.name, "arguments": part.arguments})


def _as_text(parts: Sequence[Part]) -> tuple[Part, ...]:
    """Join text, structured values and rendered tool calls and results into one text part.

    Parts of extension kinds join as their kind's fallback text.

    Raises:
        PartNotCarriedError: A part of an extension kind that declares no fallback.
    """
    chunks: list[str] = []
    kept: list[Part] = []
    for part in carried_parts(parts, "structured-action"):
        if isinstance(part, TextPart):
            chunks.append(part.text)
        elif isinstance(part, StructuredPart):
            chunks.append(_dumps(part.value))
        elif isinstance(part, ToolCallPart):
            chunks.append(render_tool_call(part))
        elif isinstance(part, ToolResultPart):
            chunks.append(render_tool_result(part))
        elif isinstance(part, MediaPart):
            kept.append(part)
    return (TextPart(text="".join(chunks)), *kept)


def outgoing(messages: Sequence[Message] | Transcript, *, native_tools: bool) -> Transcript:
    """The conversation as this client sends it, for `twinflow.vocab._wire` to translate.

    Reasoning is the model's own scratch space: it is not sent back. Without native tools
    (structured-action mode and structured output) every message becomes one text part, tool
    calls rendered as the action JSON the model emits and tool results as text in a user turn.

    Args:
        messages: The conversation so far; given as a `Transcript` with native tools and no
            reasoning in it, that transcript is what is sent (it is not built and checked
            again, a pass over every message at every request).
        native_tools: Keep tool calls and results as such, for the server's own tool calling.

    Returns:
        The transcript to translate.

    Raises:
        PartNotCarriedError: Without native tools, a part of an extension kind that declares
            no fallback (with them, the wire translation decides).
    """
    if isinstance(messages, Transcript):
        if native_tools and not any(
            isinstance(part, ReasoningPart)
            for message in messages.messages
            for part in message.parts
        ):
            return messages  # nothing to drop: the loop below would rebuild it unchanged
        messages = messages.messages
    out: list[Message] = []
    for message in messages:
        if native_tools:
            parts = tuple(p for p in message.parts if not isinstance(p, ReasoningPart))
            keep = len(parts) == len(message.parts)  # nothing dropped: the message is sent as is
            out.append(message if keep else Message(role=message.role, parts=parts))
        elif (
            message.role != "tool"
            and len(message.parts) == 1
            and type(message.parts[0]) is TextPart
        ):
            out.append(message)  # already one text part: `_as_text` would rebuild it unchanged
        else:
            role = "user" if message.role == "tool" else message.role
            out.append(Message(role=role, parts=_as_text(message.parts)))
    return Transcript(messages=tuple(out))


def require_dict(value: JsonValue, url: str, path: str) -> dict[str, JsonValue]:
    if not isinstance(value, dict):
        raise MalformedResponseError(
            f"expected an object, found {type(value).__name__}", url=url, path=path
        )
    return value


def count_of(value: JsonValue) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def finish_of(reason: JsonValue, has_calls: bool) -> FinishReason:
    if has_calls or reason in ("tool_calls", "function_call"):
        return "tool_calls"
    if reason == "length":
        return "length"
    if reason in ("stop", None, "load", "unload"):
        return "stop"
    return "error"


def read_assistant(
    message: JsonValue, path: str, read: Callable[[list[JsonValue]], Sequence[Message]], url: str
) -> Message:
    """Read one response message with a `twinflow.vocab._wire` reader (given a one-message
    array, it returns the messages read); it must be the assistant's."""
    try:
        (assistant,) = read([message])
    except WireFormatError as exc:
        # The reader was given a one-message array, so its pointers start at that message, `/0`.
        reason = str(exc).removesuffix(f" (at {exc.path or '/'})")
        raise MalformedResponseError(
            reason, url=url, path=path + exc.path.removeprefix("/0")
        ) from None
    if assistant.role != "assistant":
        raise MalformedResponseError(
            f"expected the assistant's message, found role {assistant.role!r}",
            url=url,
            path=f"{path}/role",
        )
    return assistant


def reply_from(
    top: dict[str, JsonValue], assistant: Message, finish_reason: JsonValue, usage: Usage
) -> Reply:
    calls = tuple((c.name, c.arguments) for c in assistant.tool_calls)
    text = [p.text for p in assistant.parts if isinstance(p, TextPart)]
    model_name = top.get("model")
    return Reply(
        content="".join(text) if text else None,
        tool_calls=calls,
        finish_reason=finish_of(finish_reason, bool(calls)),
        usage=usage,
        model_name=model_name if isinstance(model_name, str) else "",
    )
