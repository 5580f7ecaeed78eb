"""Ollama `/api/chat` messages and request bodies to and from transcripts.

Ollama's messages carry one `content` string, `thinking`, `images` (bare base64, no media
type), `tool_calls` with arguments as objects and no ids, and `tool` messages naming the tool
(`tool_name`). Call ids therefore do not survive: reading assigns `call_<message>_<index>`
and matches each result to the oldest unanswered call of that tool. Images read back as PNG,
JPEG, GIF or WebP by their magic bytes.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from pydantic import JsonValue

from twinflow.models._errors import MalformedResponseError
from twinflow.models._openai_wire import to_openai_tools
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
from twinflow.models._stream import json_line, lines, token_count
from twinflow.models._wire import (
    Reply,
    count_of,
    finish_of,
    read_assistant,
    reply_from,
    require_dict,
)
from twinflow.vocab import (
    CallId,
    Chunk,
    FinishChunk,
    InvalidValueError,
    MediaPart,
    Message,
    ModelRequest,
    ModelSettings,
    OutputSchema,
    Part,
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
from twinflow.vocab._parts import carried_parts

_MAGIC = (
    ("iVBORw0KGgo", "image/png"),
    ("/9j/", "image/jpeg"),
    ("R0lGOD", "image/gif"),
    ("UklGR", "image/webp"),
)


def _image(part: MediaPart) -> str:
    uri = part.uri
    header, comma, data = uri[5:].partition(",") if uri.startswith("data:") else ("", "", "")
    if not comma or not header.endswith(";base64") or not part.media_type.startswith("image/"):
        raise InvalidValueError(
            f"Ollama takes images as base64 only; {part.media_type} at {uri[:40]!r} is not a base64 data: image URI"
        )
    return data


def to_ollama_messages(transcript: Transcript) -> list[dict[str, Any]]:
    """Translate a transcript to `/api/chat` `messages`.

    Text and structured values (as canonical JSON) join into `content`; reasoning into
    `thinking`; each tool result becomes its own `tool` message (`is_error` has no field).

    Extension parts are sent as their kind's fallback text (a cache hint is dropped).

    Raises:
        InvalidValueError: Media that is not a base64 `data:` image (Ollama has no other form).
        PartNotCarriedError: A part of an extension kind that declares no fallback (a prefill).
    """
    out: list[dict[str, Any]] = []
    for m in transcript.messages:
        if m.role == "tool":
            out.extend(
                {"role": "tool", "content": r.content, "tool_name": r.name}
                for r in carried_parts(m.parts, "ollama")
                if isinstance(r, ToolResultPart)
            )
            continue
        msg: dict[str, Any] = {"role": m.role, "content": ""}
        text: list[str] = []
        thinking: list[str] = []
        images: list[str] = []
        for p in carried_parts(m.parts, "ollama"):
            if isinstance(p, TextPart):
                text.append(p.text)
            elif isinstance(p, StructuredPart):
                text.append(structured_text(p))
            elif isinstance(p, ReasoningPart):
                thinking.append(p.text)
            elif isinstance(p, MediaPart):
                images.append(_image(p))
        msg["content"] = "".join(text)
        if thinking:
            msg["thinking"] = "".join(thinking)
        if images:
            msg["images"] = images
        if m.tool_calls:
            msg["tool_calls"] = [
                {"function": {"name": c.name, "arguments": c.arguments}} for c in m.tool_calls
            ]
        out.append(msg)
    return out


def to_ollama_tools(tools: Iterable[ToolSpec]) -> list[dict[str, Any]]:
    """Translate tool specs to `/api/chat` `tools`: Ollama takes OpenAI's function-tool form."""
    return to_openai_tools(tools)


def ollama_chat_request(
    request: ModelRequest, *, model: str, stream: bool = False
) -> dict[str, Any]:
    """Build an `/api/chat` request body: messages, tools, `format` (the output schema), options.

    Raises:
        InvalidValueError: As `to_ollama_messages`.
    """
    body: dict[str, Any] = {
        "model": model,
        "messages": to_ollama_messages(request.transcript),
        "stream": stream,
    }
    if request.tools:
        body["tools"] = to_ollama_tools(request.tools)
    if request.output_schema is not None:
        body["format"] = request.output_schema.json_schema
    settings = request.settings
    options: dict[str, JsonValue] = {}
    if settings.temperature is not None:
        options["temperature"] = settings.temperature
    if settings.max_tokens is not None:
        options["num_predict"] = settings.max_tokens
    if settings.seed is not None:
        options["seed"] = settings.seed
    if options:
        body["options"] = options
    return body


def _media_type(data: str) -> str:
    for prefix, media_type in _MAGIC:
        if data.startswith(prefix):
            return media_type
    return "image/*"


def from_ollama_messages(messages: object) -> Transcript:
    """Translate `/api/chat` `messages` to a transcript.

    Raises:
        WireFormatError: The payload is not `/api/chat` messages, or a tool message names a tool
            with no unanswered call; `.path` points at the offending part.
    """
    transcript = Transcript()
    unanswered: list[ToolCallPart] = []
    pending: list[ToolResultPart] = []
    pending_path: Path = ()
    for i, item in enumerate(arr(messages, ())):
        path: Path = (i,)
        m = obj(item, path)
        role = field(m, "role", path, string)
        content = optional(m, "content", path, string) or ""
        if role == "tool":
            name = field(m, "tool_name", path, string)
            match = next((c for c in unanswered if c.name == name), None)
            if match is None:
                raise fail(
                    f"tool message for {name!r}, but no earlier call to it is unanswered",
                    (*path, "tool_name"),
                )
            unanswered.remove(match)
            if not pending:
                pending_path = path
            pending.append(ToolResultPart(call_id=match.id, name=name, content=content))
            continue
        if pending:
            transcript = append(
                transcript, Message(role="tool", parts=tuple(pending)), pending_path
            )
            pending.clear()
        if role not in ("system", "user", "assistant"):
            raise fail(
                f"unknown role {role!r} (expected system, user, assistant or tool)", (*path, "role")
            )
        parts = _read_parts(m, path, i, content, unanswered)
        transcript = append(transcript, build(path, Message, role=role, parts=tuple(parts)), path)
    if pending:
        transcript = append(transcript, Message(role="tool", parts=tuple(pending)), pending_path)
    return transcript


def _read_parts(
    m: dict[str, Any], path: Path, i: int, content: str, unanswered: list[ToolCallPart]
) -> list[Part]:
    """A system, user or assistant message's parts; its calls join `unanswered`."""
    parts: list[Part] = []
    thinking = optional(m, "thinking", path, string)
    if thinking is not None:
        parts.append(ReasoningPart(text=thinking))
    # `content` is always present on the wire: empty content beside other parts means no text.
    if content or not (m.get("tool_calls") or m.get("images") or thinking is not None):
        parts.append(TextPart(text=content))
    for j, image in enumerate(optional(m, "images", path, arr) or []):
        data = string(image, (*path, "images", j))
        parts.append(
            build(
                (*path, "images", j),
                MediaPart,
                media_type=_media_type(data),
                uri=f"data:{_media_type(data)};base64,{data}",
            )
        )
    for j, call in enumerate(optional(m, "tool_calls", path, arr) or []):
        cpath = (*path, "tool_calls", j)
        fn = field(obj(call, cpath), "function", cpath, obj)
        fpath = (*cpath, "function")
        name = field(fn, "name", fpath, string)
        args = json_object(fn.get("arguments", {}), (*fpath, "arguments"))
        part = build(cpath, ToolCallPart, id=CallId(f"call_{i}_{j}"), name=name, arguments=args)
        parts.append(part)
        unanswered.append(part)
    return parts


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
    """Build a non-streaming `/api/chat` body with `twinflow.vocab._wire.ollama_chat_request`.

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


def parse_ollama_chat(body: JsonValue, url: str) -> Reply:
    """Parse a non-streaming `/api/chat` response; the message is read by vocab's reader.

    Raises:
        MalformedResponseError: When `message` or a tool call is missing or malformed.
    """
    top = require_dict(body, url, "")
    assistant = read_assistant(
        require_dict(top.get("message"), url, "/message"),
        "/message",
        lambda messages: from_ollama_messages(messages).messages,
        url,
    )
    return reply_from(
        top,
        assistant,
        top.get("done_reason"),
        Usage(
            input_tokens=count_of(top.get("prompt_eval_count")),
            output_tokens=count_of(top.get("eval_count")),
        ),
    )


def ollama_chunks(chunks: Iterable[bytes], url: str) -> Iterator[Chunk]:
    """Decode an Ollama `/api/chat` NDJSON stream.

    `message.content` and `message.thinking` become text and reasoning deltas; each complete
    tool call a start, one argument delta and an end; the last line (`done: true`) its usage
    and the finish chunk. A stream that ends before `done` has no finish chunk.

    Raises:
        MalformedResponseError: A line is not an `/api/chat` object, or reports an error.
    """
    calls = 0
    for number, line in enumerate(lines(chunks, url)):
        if not line.strip():
            continue
        event = json_line(line, url, number, "line")
        message = event.get("message")
        if message is not None:
            if not isinstance(message, dict):
                raise MalformedResponseError(
                    f"line {number}: message is not an object", url=url, path="/message"
                )
            thinking = message.get("thinking")
            if isinstance(thinking, str) and thinking:
                yield ReasoningDelta(text=thinking)
            content = message.get("content")
            if isinstance(content, str) and content:
                yield TextDelta(text=content)
            for j, call in enumerate(message.get("tool_calls") or []):
                function = call.get("function") if isinstance(call, dict) else None
                name = function.get("name") if isinstance(function, dict) else None
                arguments = function.get("arguments", {}) if isinstance(function, dict) else None
                if not isinstance(name, str) or not name or not isinstance(arguments, dict):
                    raise MalformedResponseError(
                        f"line {number}: a tool call needs a function name and an arguments object",
                        url=url,
                        path=f"/message/tool_calls/{j}",
                    )
                # The same id vocab's Ollama reader gives the call in a one-message reply.
                yield ToolCallStart(index=calls, id=f"call_0_{calls}", name=name)
                yield ToolCallDelta(index=calls, arguments=json.dumps(arguments))
                yield ToolCallEnd(index=calls)
                calls += 1
        if event.get("done") is True:
            yield UsageChunk(
                input_tokens=token_count(event.get("prompt_eval_count")) or 0,
                output_tokens=token_count(event.get("eval_count")) or 0,
            )
            model = event.get("model")
            yield FinishChunk(
                reason=finish_of(event.get("done_reason"), calls > 0),
                model_name=model if isinstance(model, str) else "",
            )
            return
