"""OpenAI chat-completions messages (`/v1/chat/completions`) to and from transcripts.

What the format cannot say is documented per function: tool results carry no error flag and no
tool name (the name is recovered from the call); structured values travel as JSON text;
media travels as `image_url` (so only `data:` URIs keep their media type).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import JsonValue

from twinflow.vocab._canonical import value_bytes as canonical_bytes
from twinflow.vocab._errors import PartNotCarriedError
from twinflow.vocab._parts import carried_parts
from twinflow.vocab._values import (
    CallId,
    MediaPart,
    Message,
    Part,
    ReasoningPart,
    StructuredPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    ToolSpec,
    Transcript,
)
from twinflow.vocab.wire._reader import (
    Path,
    append,
    arr,
    build,
    fail,
    field,
    json_object,
    obj,
    optional,
    read_json_text,
    string,
    structured_text,
)

__all__ = ["from_openai_messages", "to_openai_messages", "to_openai_tools"]


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

    def flush(t: Transcript) -> Transcript:
        if pending:
            msg = Message(role="tool", parts=tuple(pending))
            t = append(t, msg, pending_path)
            pending.clear()
        return t

    for i, item in enumerate(arr(messages, ())):
        path: Path = (i,)
        m = obj(item, path)
        role = field(m, "role", path, string)
        if role == "tool":
            call_id = field(m, "tool_call_id", path, string)
            name = names.get(call_id)
            if name is None:
                raise fail(
                    f"tool message answers call id {call_id!r}, which no earlier assistant message made",
                    (*path, "tool_call_id"),
                )
            result_parts = _read_content(m.get("content", ""), (*path, "content"))
            text = "".join(p.text for p in result_parts if isinstance(p, TextPart))
            if not pending:
                pending_path = path
            pending.append(
                build(path, ToolResultPart, call_id=CallId(call_id), name=name, content=text)
            )
            continue
        transcript = flush(transcript)
        if role in ("system", "developer", "user"):
            parts = _read_content(field(m, "content", path, lambda v, p: v), (*path, "content"))
            transcript = append(
                transcript,
                build(path, Message, role="system" if role == "developer" else role, parts=parts),
                path,
            )
        elif role == "assistant":
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
                parts_list.append(
                    build(cpath, ToolCallPart, id=CallId(call_id), name=name, arguments=args)
                )
                names[call_id] = name
            transcript = append(
                transcript,
                build(path, Message, role="assistant", parts=tuple(parts_list)),
                path,
            )
        else:
            raise fail(
                f"unknown role {role!r} (expected system, developer, user, assistant or tool)",
                (*path, "role"),
            )
    return flush(transcript)
