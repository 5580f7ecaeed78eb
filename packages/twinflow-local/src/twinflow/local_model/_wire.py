"""Request bodies and response parsing for the two wire formats: Ollama's `/api/chat` and the
OpenAI-compatible `/v1/chat/completions` (llama-cpp-python, llama.cpp, vLLM, LM Studio).

Messages and tools are translated, both ways, by `twinflow.vocab.wire`, the one translation of
every wire format in twinflow. What stays here is this client's request-level policy: what of
a conversation it sends (`outgoing`), the dialects' `response_format`, sampling settings,
`extra_body`, and reading a response's finish reason, usage and model name.

Everything here is a pure function from values to JSON and back: no I/O, so every body can be
checked against the `ollama` package's own request types and every recorded response parsed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import JsonValue

from twinflow.local_model._errors import MalformedResponseError
from twinflow.trace import UserError
from twinflow.vocab import (
    FinishReason,
    MediaPart,
    Message,
    ModelRequest,
    ModelSettings,
    OutputSchema,
    Part,
    ReasoningPart,
    StructuredPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    ToolSpec,
    Transcript,
    Usage,
    WireFormatError,
    carried_parts,
)
from twinflow.vocab import value_bytes as canonical_bytes
from twinflow.vocab.wire import (
    from_ollama_messages,
    from_openai_messages,
    ollama_chat_request,
    to_openai_messages,
    to_openai_tools,
)

__all__ = [
    "Dialect",
    "Reply",
    "check_extra_body",
    "ollama_chat_body",
    "openai_chat_body",
    "openai_response_format",
    "outgoing",
    "parse_ollama_chat",
    "parse_openai_chat",
]

Dialect = Literal["llama-cpp-python", "llama.cpp", "vllm", "lmstudio"]
"""How an OpenAI-compatible server takes a schema.

`llama-cpp-python`: `response_format: {"type": "json_object", "schema": ...}` (its server answers
500 to `json_schema`). `llama.cpp`, `vllm`, `lmstudio`: `response_format: {"type": "json_schema",
"json_schema": {"name": ..., "schema": ..., "strict": true}}`.
"""

# Fields this client owns: an `extra_body` may not replace them, so the schema cannot be dropped.
RESERVED_OPENAI_FIELDS = frozenset(
    {"model", "messages", "response_format", "stream", "stream_options", "tools", "tool_choice"}
)


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
    """The conversation as this client sends it, for `twinflow.vocab.wire` to translate.

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


def openai_response_format(dialect: Dialect, name: str, schema: dict[str, JsonValue]) -> JsonValue:
    """The `response_format` that makes `dialect` constrain decoding to `schema`."""
    if dialect == "llama-cpp-python":
        return {"type": "json_object", "schema": schema}
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}


def openai_chat_body(
    *,
    model: str,
    transcript: Transcript,
    settings: ModelSettings,
    response_format: JsonValue | None = None,
    tools: Sequence[ToolSpec] = (),
    extra_body: Mapping[str, JsonValue] | None = None,
) -> dict[str, JsonValue]:
    """Build a non-streaming `/v1/chat/completions` body.

    Messages and tools are translated by `twinflow.vocab.wire`. `extra_body` fields (vLLM's
    `guided_json`, llama.cpp's `grammar`, ...) are copied as given; they may not replace a field
    this client owns.
    """
    # vocab.wire's builders return plain JSON dicts (`dict[str, Any]`).
    body: dict[str, Any] = {
        "model": model,
        "messages": to_openai_messages(transcript),
        "stream": False,
    }
    if settings.temperature is not None:
        body["temperature"] = settings.temperature
    if settings.max_tokens is not None:
        body["max_tokens"] = settings.max_tokens
    if settings.seed is not None:
        body["seed"] = settings.seed
    if response_format is not None:
        body["response_format"] = response_format
    if tools:
        body["tools"] = to_openai_tools(tools)
    if extra_body:
        check_extra_body(extra_body)
        body.update(extra_body)
    return body


def check_extra_body(extra_body: Mapping[str, JsonValue]) -> None:
    """Refuse pass-through fields that would replace a field this client owns."""
    clash = sorted(RESERVED_OPENAI_FIELDS.intersection(extra_body))
    if clash:
        raise UserError(
            f"extra_body may not set {', '.join(clash)}: those fields carry the messages and the "
            "schema, which this client always sends; put engine-specific fields only in extra_body"
        )


def ollama_chat_body(
    *,
    model: str,
    transcript: Transcript,
    settings: ModelSettings,
    format_schema: dict[str, JsonValue] | None = None,
    schema_name: str = "output",
    tools: Sequence[ToolSpec] = (),
    output_schema: OutputSchema | None = None,
) -> dict[str, JsonValue]:
    """Build a non-streaming `/api/chat` body with `twinflow.vocab.wire.ollama_chat_request`.

    `format` carries the schema when one is given, as `format_schema` (checked here) or as an
    already checked `output_schema`, whose `json_schema` becomes `format` as is (the very
    object, so a caller can reuse its encoding); sampling settings go in `options`.
    """
    if format_schema is not None:
        output_schema = OutputSchema(name=schema_name, json_schema=format_schema)
    request = ModelRequest(
        transcript=transcript, tools=tuple(tools), output_schema=output_schema, settings=settings
    )
    return ollama_chat_request(request, model=model)


def _require_dict(value: JsonValue, url: str, path: str) -> dict[str, JsonValue]:
    if not isinstance(value, dict):
        raise MalformedResponseError(
            f"expected an object, found {type(value).__name__}", url=url, path=path
        )
    return value


def _count(value: JsonValue) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _finish(reason: JsonValue, has_calls: bool) -> FinishReason:
    if has_calls or reason in ("tool_calls", "function_call"):
        return "tool_calls"
    if reason == "length":
        return "length"
    if reason in ("stop", None, "load", "unload"):
        return "stop"
    return "error"


def _read_assistant(
    message: JsonValue, path: str, read: Callable[[object], Transcript], url: str
) -> Message:
    """Read one response message with a `twinflow.vocab.wire` reader; it must be the assistant's."""
    try:
        (assistant,) = read([message]).messages
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


def _reply(
    top: dict[str, JsonValue], assistant: Message, finish_reason: JsonValue, usage: Usage
) -> Reply:
    calls = tuple((c.name, c.arguments) for c in assistant.tool_calls)
    text = [p.text for p in assistant.parts if isinstance(p, TextPart)]
    model_name = top.get("model")
    return Reply(
        content="".join(text) if text else None,
        tool_calls=calls,
        finish_reason=_finish(finish_reason, bool(calls)),
        usage=usage,
        model_name=model_name if isinstance(model_name, str) else "",
    )


def parse_openai_chat(body: JsonValue, url: str) -> Reply:
    """Parse a non-streaming chat completion response; the message is read by vocab's reader.

    Raises:
        MalformedResponseError: When `choices[0].message` or a tool call is missing or malformed.
    """
    top = _require_dict(body, url, "")
    choices = top.get("choices")
    if not isinstance(choices, list) or not choices:
        raise MalformedResponseError("expected a non-empty choices array", url=url, path="/choices")
    choice = _require_dict(choices[0], url, "/choices/0")
    path = "/choices/0/message"
    assistant = _read_assistant(
        _require_dict(choice.get("message"), url, path), path, from_openai_messages, url
    )
    usage = top.get("usage")
    usage_d = usage if isinstance(usage, dict) else {}
    return _reply(
        top,
        assistant,
        choice.get("finish_reason"),
        Usage(
            input_tokens=_count(usage_d.get("prompt_tokens")),
            output_tokens=_count(usage_d.get("completion_tokens")),
        ),
    )


def parse_ollama_chat(body: JsonValue, url: str) -> Reply:
    """Parse a non-streaming `/api/chat` response; the message is read by vocab's reader.

    Raises:
        MalformedResponseError: When `message` or a tool call is missing or malformed.
    """
    top = _require_dict(body, url, "")
    assistant = _read_assistant(
        _require_dict(top.get("message"), url, "/message"), "/message", from_ollama_messages, url
    )
    return _reply(
        top,
        assistant,
        top.get("done_reason"),
        Usage(
            input_tokens=_count(top.get("prompt_eval_count")),
            output_tokens=_count(top.get("eval_count")),
        ),
    )
