"""OpenAI chat-completions messages (`/v1/chat/completions`) to and from transcripts.

What the format cannot say is documented per function: tool results carry no error flag and no
tool name (the name is recovered from the call); structured values travel as JSON text;
media travels as `image_url` (so only `data:` URIs keep their media type).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Literal

from pydantic import JsonValue

from twinflow.models._errors import MalformedResponseError
from twinflow.models._read import (
    Path,
    append,
    arr,
    build,
    fail,
    field,
    json_object,
    obj,
    optional,
    string,
    structured_text,
)
from twinflow.models._stream import json_line, sse_data, token_count
from twinflow.models._wire import (
    Reply,
    count_of,
    finish_of,
    read_assistant,
    reply_from,
    require_dict,
)
from twinflow.trace import UserError
from twinflow.vocab import (
    CallId,
    Chunk,
    FinishChunk,
    MediaPart,
    Message,
    ModelSettings,
    Part,
    PartNotCarriedError,
    ReasoningDelta,
    ReasoningPart,
    StructuredPart,
    TextDelta,
    TextPart,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallPart,
    ToolCallStart,
    ToolResultPart,
    ToolSpec,
    Transcript,
    Usage,
    UsageChunk,
)
from twinflow.vocab import value_bytes as canonical_bytes
from twinflow.vocab._parts import carried_parts
from twinflow.vocab._wire import read_json_text


def _media_type_of(uri: str) -> str:
    if uri.startswith("data:"):
        return uri[5:].split(",", 1)[0].split(";", 1)[0]
    return "image/*"


_AUDIO_FORMATS = {"audio/wav": "wav", "audio/x-wav": "wav", "audio/mpeg": "mp3", "audio/mp3": "mp3"}
_AUDIO_TYPES = {"wav": "audio/wav", "mp3": "audio/mpeg"}


def _audio(p: MediaPart) -> dict[str, str]:
    """Audio as chat-completions ``input_audio``: base64 wav or mp3 only."""
    header, comma, data = p.uri[5:].partition(",") if p.uri.startswith("data:") else ("", "", "")
    audio_format = _AUDIO_FORMATS.get(p.media_type)
    if audio_format is None or not comma or not header.endswith(";base64"):
        raise PartNotCarriedError(
            "openai",
            p.kind,
            f"chat completions take audio as a base64 data: URI of wav or mp3, not "
            f"{p.media_type} at {p.uri[:40]!r}",
        )
    return {"data": data, "format": audio_format}


def _content(parts: Iterable[Part]) -> str | list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for p in parts:
        if isinstance(p, TextPart):
            items.append({"type": "text", "text": p.text})
        elif isinstance(p, StructuredPart):
            items.append({"type": "text", "text": structured_text(p)})
        elif isinstance(p, MediaPart) and p.media_type.startswith("audio/"):
            items.append({"type": "input_audio", "input_audio": _audio(p)})
        elif isinstance(p, MediaPart):
            items.append({"type": "image_url", "image_url": {"url": p.uri}})
    if len(items) == 1 and items[0]["type"] == "text":
        return str(items[0]["text"])
    return items


def to_openai_messages(transcript: Transcript) -> list[dict[str, Any]]:
    """Translate a transcript to chat-completions `messages`.

    Assistant reasoning goes in `reasoning_content` (the field vLLM, llama.cpp and DeepSeek use);
    each tool result becomes its own `tool` message; `is_error` has no field and is dropped.
    Extension parts are sent as their kind's fallback text (a cache hint is dropped).

    Raises:
        PartNotCarriedError: A part of an extension kind that declares no fallback (a prefill).
    """
    out: list[dict[str, Any]] = []
    for m in transcript.messages:
        parts = carried_parts(m.parts, "openai")
        if m.role == "tool":
            out.extend(
                {"role": "tool", "tool_call_id": r.call_id, "content": r.content}
                for r in parts
                if isinstance(r, ToolResultPart)
            )
            continue
        if m.role != "assistant":
            out.append({"role": m.role, "content": _content(parts)})
            continue
        msg: dict[str, Any] = {"role": "assistant"}
        texts = [p for p in parts if isinstance(p, TextPart | StructuredPart)]
        msg["content"] = _content(texts) if texts else None
        reasoning = [p.text for p in parts if isinstance(p, ReasoningPart)]
        if reasoning:
            msg["reasoning_content"] = "".join(reasoning)
        if m.tool_calls:
            msg["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {
                        "name": c.name,
                        "arguments": canonical_bytes(c.arguments).decode("utf-8"),
                    },
                }
                for c in m.tool_calls
            ]
        out.append(msg)
    return out


def to_openai_tools(tools: Iterable[ToolSpec]) -> list[dict[str, Any]]:
    """Translate tool specs to chat-completions `tools`."""
    return [
        {
            "type": "function",
            "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
        }
        for t in tools
    ]


def _read_content(value: object, path: Path) -> tuple[Part, ...]:
    if isinstance(value, str):
        return (TextPart(text=value),)
    parts: list[Part] = []
    for i, item in enumerate(arr(value, path)):
        ipath = (*path, i)
        o = obj(item, ipath)
        kind = field(o, "type", ipath, string)
        if kind == "text":
            parts.append(TextPart(text=field(o, "text", ipath, string)))
        elif kind == "image_url":
            url = field(
                obj(field(o, "image_url", ipath, obj), (*ipath, "image_url")),
                "url",
                (*ipath, "image_url"),
                string,
            )
            parts.append(build(ipath, MediaPart, media_type=_media_type_of(url), uri=url))
        elif kind == "input_audio":
            apath = (*ipath, "input_audio")
            audio = field(o, "input_audio", ipath, obj)
            audio_format = field(audio, "format", apath, string)
            media_type = _AUDIO_TYPES.get(audio_format)
            if media_type is None:
                raise fail(f"audio format {audio_format!r} is not wav or mp3", (*apath, "format"))
            data = field(audio, "data", apath, string)
            uri = f"data:{media_type};base64,{data}"
            parts.append(build(ipath, MediaPart, media_type=media_type, uri=uri))
        else:
            raise fail(
                f"unsupported content part type {kind!r} (expected 'text', 'image_url' or "
                "'input_audio')",
                (*ipath, "type"),
            )
    return tuple(parts)


def _read_arguments(value: object, path: Path) -> dict[str, JsonValue]:
    parsed = read_json_text(string(value, path), path, what="tool call arguments")
    return json_object(parsed, path)


def from_openai_messages(messages: object) -> Transcript:
    """Translate chat-completions `messages` to a transcript.

    Consecutive `tool` messages become one tool message; a tool result's name is the name of
    the call it answers.

    Raises:
        WireFormatError: The payload is not chat-completions messages, or a tool message
            answers no earlier call; `.path` points at the offending part.
    """
    transcript = Transcript()
    names: dict[str, str] = {}
    pending: list[ToolResultPart] = []
    pending_path: Path = ()
    for i, item in enumerate(arr(messages, ())):
        path: Path = (i,)
        m = obj(item, path)
        role = field(m, "role", path, string)
        if role == "tool":
            if not pending:
                pending_path = path
            pending.append(_read_tool_message(m, path, names))
            continue
        if pending:
            transcript = append(
                transcript, Message(role="tool", parts=tuple(pending)), pending_path
            )
            pending.clear()
        transcript = append(transcript, _read_message(m, path, role, names), path)
    if pending:
        transcript = append(transcript, Message(role="tool", parts=tuple(pending)), pending_path)
    return transcript


def _reply_messages(messages: list[JsonValue]) -> Sequence[Message]:
    """A reply's one message as `from_openai_messages` reads it; the assistant's is read alone,
    without the transcript around it (a lone assistant message answers no call to check)."""
    (m,) = messages
    if isinstance(m, dict) and m.get("role") == "assistant":
        return (_read_message(m, (0,), "assistant", {}),)
    return from_openai_messages(messages).messages


def _read_tool_message(m: dict[str, Any], path: Path, names: dict[str, str]) -> ToolResultPart:
    """A `tool` message as the result of the call it answers (named as that call was)."""
    call_id = field(m, "tool_call_id", path, string)
    name = names.get(call_id)
    if name is None:
        raise fail(
            f"tool message answers call id {call_id!r}, which no earlier assistant message made",
            (*path, "tool_call_id"),
        )
    result_parts = _read_content(m.get("content", ""), (*path, "content"))
    text = "".join(p.text for p in result_parts if isinstance(p, TextPart))
    return build(path, ToolResultPart, call_id=CallId(call_id), name=name, content=text)


def _read_message(m: dict[str, Any], path: Path, role: str, names: dict[str, str]) -> Message:
    """A system, developer, user or assistant message; `names` learns each call's tool."""
    if role in ("system", "developer", "user"):
        parts = _read_content(field(m, "content", path, lambda v, p: v), (*path, "content"))
        return build(path, Message, role="system" if role == "developer" else role, parts=parts)
    if role != "assistant":
        raise fail(
            f"unknown role {role!r} (expected system, developer, user, assistant or tool)",
            (*path, "role"),
        )
    parts_list: list[Part] = []
    reasoning = optional(m, "reasoning_content", path, string)
    if reasoning is not None:
        parts_list.append(ReasoningPart(text=reasoning))
    content = m.get("content")
    if content is not None:
        parts_list.extend(_read_content(content, (*path, "content")))
    for j, call in enumerate(optional(m, "tool_calls", path, arr) or []):
        cpath = (*path, "tool_calls", j)
        c = obj(call, cpath)
        fn = field(c, "function", cpath, obj)
        fpath = (*cpath, "function")
        call_id = field(c, "id", cpath, string)
        name = field(fn, "name", fpath, string)
        args = field(fn, "arguments", fpath, _read_arguments)
        parts_list.append(build(cpath, ToolCallPart, id=CallId(call_id), name=name, arguments=args))
        names[call_id] = name
    return build(path, Message, role="assistant", parts=tuple(parts_list))


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

    Messages and tools are translated by `twinflow.vocab._wire`. `extra_body` fields (vLLM's
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


def parse_openai_chat(body: JsonValue, url: str) -> Reply:
    """Parse a non-streaming chat completion response; the message is read by vocab's reader.

    Raises:
        MalformedResponseError: When `choices[0].message` or a tool call is missing or malformed.
    """
    top = require_dict(body, url, "")
    choices = top.get("choices")
    if not isinstance(choices, list) or not choices:
        raise MalformedResponseError("expected a non-empty choices array", url=url, path="/choices")
    choice = require_dict(choices[0], url, "/choices/0")
    path = "/choices/0/message"
    assistant = read_assistant(
        require_dict(choice.get("message"), url, path), path, _reply_messages, url
    )
    usage = top.get("usage")
    usage_d = usage if isinstance(usage, dict) else {}
    return reply_from(
        top,
        assistant,
        choice.get("finish_reason"),
        Usage(
            input_tokens=count_of(usage_d.get("prompt_tokens")),
            output_tokens=count_of(usage_d.get("completion_tokens")),
        ),
    )


def openai_chunks(chunks: Iterable[bytes], url: str) -> Iterator[Chunk]:
    """Decode an OpenAI-compatible chat-completions event stream.

    Text, `reasoning_content` and tool-call deltas become their chunks; `usage` (sent when
    `stream_options.include_usage` is honoured) a `UsageChunk`; the finish chunk comes at the
    end, once `finish_reason` or `[DONE]` was seen. A stream cut before either has no finish
    chunk, and the assembler refuses it.

    Raises:
        MalformedResponseError: An event is not a chat-completion chunk, or reports an error.
    """
    started: dict[int, bool] = {}
    reason: JsonValue = None
    finished = False
    model_name = ""
    for number, data in enumerate(sse_data(chunks, url)):
        if data.strip() == b"[DONE]":
            finished = True
            break
        event = json_line(data, url, number, "event")
        if isinstance(event.get("model"), str) and event["model"]:
            model_name = event["model"]
        usage = event.get("usage")
        if isinstance(usage, dict):
            yield UsageChunk(
                input_tokens=token_count(usage.get("prompt_tokens")),
                output_tokens=token_count(usage.get("completion_tokens")),
            )
        # vLLM ends with a usage-only chunk whose choices are null; OpenAI's have [].
        choices = event.get("choices") or []
        if not isinstance(choices, list):
            raise MalformedResponseError(
                f"event {number} has no choices array", url=url, path="/choices"
            )
        # With `n` > 1 the choices interleave; the reply is choice 0, as non-streamed.
        first = [c for c in choices if not isinstance(c, dict) or c.get("index", 0) == 0]
        if not first:
            continue
        choice = first[0]
        delta = choice.get("delta") if isinstance(choice, dict) else None
        if not isinstance(delta, dict):
            raise MalformedResponseError(
                f"event {number} has no delta object", url=url, path="/choices/0/delta"
            )
        yield from _openai_delta(delta, started, url, number)
        if choice.get("finish_reason") is not None:
            reason = choice["finish_reason"]
            finished = True
    if finished:
        for index in started:
            yield ToolCallEnd(index=index)
        yield FinishChunk(reason=finish_of(reason, bool(started)), model_name=model_name)


def _openai_delta(
    delta: dict[str, Any], started: dict[int, bool], url: str, number: int
) -> Iterator[Chunk]:
    path = "/choices/0/delta"
    reasoning = delta.get("reasoning_content")
    if isinstance(reasoning, str) and reasoning:
        yield ReasoningDelta(text=reasoning)
    content = delta.get("content")
    if isinstance(content, str) and content:
        yield TextDelta(text=content)
    calls = delta.get("tool_calls")
    if calls is None:
        return
    if not isinstance(calls, list):
        raise MalformedResponseError(
            f"event {number}: tool_calls is not an array", url=url, path=f"{path}/tool_calls"
        )
    for j, call in enumerate(calls):
        cpath = f"{path}/tool_calls/{j}"
        function = call.get("function") if isinstance(call, dict) else None
        index = call.get("index", j) if isinstance(call, dict) else None
        if not isinstance(function, dict) or token_count(index) is None:
            raise MalformedResponseError(
                f"event {number}: a tool call delta needs an index and a function object",
                url=url,
                path=cpath,
            )
        assert isinstance(index, int)
        if index not in started:
            name = function.get("name")
            if not isinstance(name, str) or not name:
                raise MalformedResponseError(
                    f"event {number}: tool call {index} starts without a name",
                    url=url,
                    path=f"{cpath}/function/name",
                )
            call_id = call.get("id")
            started[index] = True
            yield ToolCallStart(
                index=index,
                id=call_id if isinstance(call_id, str) and call_id else f"call_{index}",
                name=name,
            )
        arguments = function.get("arguments")
        if isinstance(arguments, str) and arguments:
            yield ToolCallDelta(index=index, arguments=arguments)
