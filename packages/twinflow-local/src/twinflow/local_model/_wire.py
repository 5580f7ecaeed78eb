"""Request bodies and response parsing for the two wire formats: Ollama's `/api/chat` and the
OpenAI-compatible `/v1/chat/completions` (llama-cpp-python, llama.cpp, vLLM, LM Studio).

Everything here is a pure function from values to JSON and back: no I/O, so every body can be
checked against the `ollama` package's own request types and every recorded response parsed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import JsonValue

from twinflow.local_model._errors import MalformedResponseError
from twinflow.vocab import (
    FinishReason,
    MediaPart,
    Message,
    ModelSettings,
    StructuredPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    ToolSpec,
    Usage,
    UserError,
    canonical_bytes,
)

__all__ = [
    "Dialect",
    "Reply",
    "ollama_chat_body",
    "ollama_messages",
    "openai_chat_body",
    "openai_messages",
    "openai_response_format",
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
    {"model", "messages", "response_format", "stream", "tools", "tool_choice"}
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
    """Render a tool result as text for a server that has no tool role in play."""
    status = "error" if part.is_error else "result"
    return f"Tool {part.name} (call {part.call_id}) {status}: {part.content}"


def render_tool_call(part: ToolCallPart) -> str:
    """Render a tool call as the structured-action JSON the model itself would emit."""
    return _dumps({"action": "call_tool", "tool": part.name, "arguments": part.arguments})


def _text_of(message: Message, *, native_tools: bool) -> str:
    chunks: list[str] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            chunks.append(part.text)
        elif isinstance(part, ToolCallPart) and not native_tools:
            chunks.append(render_tool_call(part))
        elif isinstance(part, ToolResultPart) and not native_tools:
            chunks.append(render_tool_result(part))
        elif isinstance(part, StructuredPart):
            chunks.append(_dumps(part.value))
        elif isinstance(part, MediaPart):
            raise UserError(
                f"a media part ({part.media_type}) cannot be sent by twinflow.local_model; "
                "remove it from the transcript or use a client that supports media"
            )
        # Reasoning is the model's own scratch space: it is not sent back.
    return "".join(chunks)


def openai_messages(messages: Sequence[Message], *, native_tools: bool) -> list[JsonValue]:
    """Translate messages to OpenAI chat messages.

    Args:
        messages: The conversation so far.
        native_tools: Send tool calls and results in the `tool_calls` / `tool` role form; when
            false they are rendered as text (structured-action mode).

    Returns:
        The `messages` array of a chat completion request.
    """
    out: list[JsonValue] = []
    for message in messages:
        calls = [p for p in message.parts if isinstance(p, ToolCallPart)]
        results = [p for p in message.parts if isinstance(p, ToolResultPart)]
        if native_tools and results:
            for result in results:
                out.append(
                    {"role": "tool", "tool_call_id": str(result.call_id), "content": result.content}
                )
            continue
        role = "user" if message.role == "tool" else message.role
        entry: dict[str, JsonValue] = {
            "role": role,
            "content": _text_of(message, native_tools=native_tools),
        }
        if native_tools and calls:
            entry["tool_calls"] = [
                {
                    "id": str(call.id),
                    "type": "function",
                    "function": {"name": call.name, "arguments": _dumps(call.arguments)},
                }
                for call in calls
            ]
        out.append(entry)
    return out


def ollama_messages(messages: Sequence[Message], *, native_tools: bool) -> list[JsonValue]:
    """Translate messages to Ollama chat messages (`tool_name` on tool results, dict arguments).

    Args:
        messages: The conversation so far.
        native_tools: Send tool calls and results natively; when false render them as text.

    Returns:
        The `messages` array of an `/api/chat` request.
    """
    out: list[JsonValue] = []
    for message in messages:
        calls = [p for p in message.parts if isinstance(p, ToolCallPart)]
        results = [p for p in message.parts if isinstance(p, ToolResultPart)]
        if native_tools and results:
            for result in results:
                out.append({"role": "tool", "content": result.content, "tool_name": result.name})
            continue
        role = "user" if message.role == "tool" else message.role
        entry: dict[str, JsonValue] = {
            "role": role,
            "content": _text_of(message, native_tools=native_tools),
        }
        if native_tools and calls:
            entry["tool_calls"] = [
                {"function": {"name": call.name, "arguments": dict(call.arguments)}}
                for call in calls
            ]
        out.append(entry)
    return out


def openai_response_format(dialect: Dialect, name: str, schema: dict[str, JsonValue]) -> JsonValue:
    """The `response_format` that makes `dialect` constrain decoding to `schema`."""
    if dialect == "llama-cpp-python":
        return {"type": "json_object", "schema": schema}
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}


def _tool_entries(tools: Sequence[ToolSpec]) -> list[JsonValue]:
    return [
        {
            "type": "function",
            "function": {
                "name": tool.name,
                "description": tool.description,
                "parameters": dict(tool.parameters),
            },
        }
        for tool in tools
    ]


def openai_chat_body(
    *,
    model: str,
    messages: list[JsonValue],
    settings: ModelSettings,
    response_format: JsonValue | None = None,
    tools: Sequence[ToolSpec] = (),
    extra_body: Mapping[str, JsonValue] | None = None,
) -> dict[str, JsonValue]:
    """Build a non-streaming `/v1/chat/completions` body.

    `extra_body` fields (vLLM's `guided_json`, llama.cpp's `grammar`, ...) are copied as given;
    they may not replace a field this client owns.
    """
    body: dict[str, JsonValue] = {"model": model, "messages": messages, "stream": False}
    if settings.temperature is not None:
        body["temperature"] = settings.temperature
    if settings.max_tokens is not None:
        body["max_tokens"] = settings.max_tokens
    if settings.seed is not None:
        body["seed"] = settings.seed
    if response_format is not None:
        body["response_format"] = response_format
    if tools:
        body["tools"] = _tool_entries(tools)
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
    messages: list[JsonValue],
    settings: ModelSettings,
    format_schema: dict[str, JsonValue] | None = None,
    tools: Sequence[ToolSpec] = (),
) -> dict[str, JsonValue]:
    """Build a non-streaming `/api/chat` body; `format` carries the schema when one is given."""
    body: dict[str, JsonValue] = {"model": model, "messages": messages, "stream": False}
    options: dict[str, JsonValue] = {}
    if settings.temperature is not None:
        options["temperature"] = settings.temperature
    if settings.max_tokens is not None:
        options["num_predict"] = settings.max_tokens
    if settings.seed is not None:
        options["seed"] = settings.seed
    if options:
        body["options"] = options
    if format_schema is not None:
        body["format"] = format_schema
    if tools:
        body["tools"] = _tool_entries(tools)
    return body


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


def parse_openai_chat(body: JsonValue, url: str) -> Reply:
    """Parse a non-streaming chat completion response.

    Raises:
        MalformedResponseError: When `choices[0].message` or a tool call is missing or malformed.
    """
    top = _require_dict(body, url, "")
    choices = top.get("choices")
    if not isinstance(choices, list) or not choices:
        raise MalformedResponseError("expected a non-empty choices array", url=url, path="/choices")
    choice = _require_dict(choices[0], url, "/choices/0")
    message = _require_dict(choice.get("message"), url, "/choices/0/message")
    content = message.get("content")
    if content is not None and not isinstance(content, str):
        raise MalformedResponseError(
            "expected content to be a string or null", url=url, path="/choices/0/message/content"
        )
    calls: list[tuple[str, dict[str, JsonValue]]] = []
    raw_calls = message.get("tool_calls") or []
    if not isinstance(raw_calls, list):
        raise MalformedResponseError(
            "expected tool_calls to be an array", url=url, path="/choices/0/message/tool_calls"
        )
    for i, raw in enumerate(raw_calls):
        where = f"/choices/0/message/tool_calls/{i}/function"
        function = _require_dict(_require_dict(raw, url, where[:-9]).get("function"), url, where)
        name, arguments = function.get("name"), function.get("arguments")
        if not isinstance(name, str) or not isinstance(arguments, str):
            raise MalformedResponseError(
                "expected a function name and a JSON string of arguments", url=url, path=where
            )
        try:
            parsed = json.loads(arguments)
        except json.JSONDecodeError as exc:
            raise MalformedResponseError(
                f"tool call arguments are not JSON ({exc.msg})", url=url, path=f"{where}/arguments"
            ) from exc
        calls.append((name, _require_dict(parsed, url, f"{where}/arguments")))
    usage = top.get("usage")
    usage_d = usage if isinstance(usage, dict) else {}
    model_name = top.get("model")
    return Reply(
        content=content,
        tool_calls=tuple(calls),
        finish_reason=_finish(choice.get("finish_reason"), bool(calls)),
        usage=Usage(
            input_tokens=_count(usage_d.get("prompt_tokens")),
            output_tokens=_count(usage_d.get("completion_tokens")),
        ),
        model_name=model_name if isinstance(model_name, str) else "",
    )


def parse_ollama_chat(body: JsonValue, url: str) -> Reply:
    """Parse a non-streaming `/api/chat` response.

    Raises:
        MalformedResponseError: When `message` or a tool call is missing or malformed.
    """
    top = _require_dict(body, url, "")
    message = _require_dict(top.get("message"), url, "/message")
    content = message.get("content")
    if content is not None and not isinstance(content, str):
        raise MalformedResponseError(
            "expected content to be a string or null", url=url, path="/message/content"
        )
    calls: list[tuple[str, dict[str, JsonValue]]] = []
    raw_calls = message.get("tool_calls") or []
    if not isinstance(raw_calls, list):
        raise MalformedResponseError(
            "expected tool_calls to be an array", url=url, path="/message/tool_calls"
        )
    for i, raw in enumerate(raw_calls):
        where = f"/message/tool_calls/{i}/function"
        function = _require_dict(_require_dict(raw, url, where[:-9]).get("function"), url, where)
        name = function.get("name")
        if not isinstance(name, str):
            raise MalformedResponseError("expected a function name", url=url, path=f"{where}/name")
        calls.append((name, _require_dict(function.get("arguments"), url, f"{where}/arguments")))
    model_name = top.get("model")
    return Reply(
        content=content,
        tool_calls=tuple(calls),
        finish_reason=_finish(top.get("done_reason"), bool(calls)),
        usage=Usage(
            input_tokens=_count(top.get("prompt_eval_count")),
            output_tokens=_count(top.get("eval_count")),
        ),
        model_name=model_name if isinstance(model_name, str) else "",
    )
