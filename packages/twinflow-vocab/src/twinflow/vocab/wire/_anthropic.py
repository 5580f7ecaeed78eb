"""Anthropic Messages (`/v1/messages`) to and from transcripts.

The system prompt lives outside `messages`; tool calls are `tool_use` blocks and results are
`tool_result` blocks (with `is_error`) inside a user message. Reasoning is not sent: Anthropic
accepts prior `thinking` only with the signature it issued, which a transcript does not keep;
read back, `thinking` blocks become reasoning parts.

Of the extension part kinds, this wire carries two: a cache hint becomes ``cache_control`` on
the block before it (and ``cache_control`` read back becomes a cache hint after its block), and
a prefill in the final assistant message is sent as that message's text, which the model
continues. Other extension kinds are sent as their declared fallback or refused
(`twinflow.vocab.carried_parts`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from twinflow.vocab._errors import InvalidValueError, PartNotCarriedError
from twinflow.vocab._parts import carried_parts
from twinflow.vocab._values import (
    CacheHintPart,
    CallId,
    MediaPart,
    Message,
    Part,
    PrefillPart,
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
    boolean,
    build,
    fail,
    field,
    json_object,
    obj,
    optional,
    string,
    structured_text,
)

__all__ = ["from_anthropic", "to_anthropic", "to_anthropic_tools"]

_CARRIED = frozenset({"cache_hint", "prefill", "media"})
"""The extension kinds this wire has a form for (and media inside a tool result)."""


def _media_block(p: MediaPart) -> dict[str, Any]:
    if p.media_type.startswith(("audio/", "video/")):
        raise PartNotCarriedError(
            "anthropic", p.kind, f"Messages takes images and PDFs, not {p.media_type}"
        )
    kind = "document" if p.media_type == "application/pdf" else "image"
    if p.uri.startswith("data:"):
        header, _, data = p.uri[5:].partition(",")
        if not header.endswith(";base64"):
            raise InvalidValueError("Anthropic takes data: media only base64-encoded")
        return {
            "type": kind,
            "source": {"type": "base64", "media_type": p.media_type, "data": data},
        }
    return {"type": kind, "source": {"type": "url", "url": p.uri}}


def _block(p: Part) -> dict[str, Any] | None:
    if isinstance(p, TextPart):
        return {"type": "text", "text": p.text}
    if isinstance(p, StructuredPart):
        return {"type": "text", "text": structured_text(p)}
    if isinstance(p, MediaPart):
        return _media_block(p)
    if isinstance(p, ToolCallPart):
        return {"type": "tool_use", "id": p.id, "name": p.name, "input": p.arguments}
    if isinstance(p, ToolResultPart):
        block: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": p.call_id,
            "content": p.content,
        }
        if p.parts:  # carried_parts left text and media: Messages takes both in a result
            block["content"] = [b for b in map(_block, p.parts) if b is not None]
        if p.is_error:  # absent means false, as in Anthropic's own examples
            block["is_error"] = True
        return block
    return None  # reasoning: see the module docstring


def _cache_control(hint: CacheHintPart) -> dict[str, Any]:
    control: dict[str, Any] = {"type": "ephemeral"}
    if hint.ttl is not None:
        control["ttl"] = hint.ttl
    return control


def _blocks(m: Message, index: int, final: bool) -> list[dict[str, Any]]:
    """A message's content blocks, cache hints and a prefill carried."""
    blocks: list[dict[str, Any]] = []
    for p in carried_parts(m.parts, "anthropic", _CARRIED):
        if isinstance(p, CacheHintPart):
            if not blocks:
                raise PartNotCarriedError(
                    "anthropic",
                    p.kind,
                    f"a cache hint marks the block before it, and messages[{index}] has none",
                )
            blocks[-1]["cache_control"] = _cache_control(p)
        elif isinstance(p, PrefillPart):
            if not (final and m.role == "assistant"):
                raise PartNotCarriedError(
                    "anthropic",
                    p.kind,
                    f"a prefill belongs in the final assistant message, not messages[{index}] "
                    f"({m.role})",
                )
            blocks.append({"type": "text", "text": p.text})
        else:
            block = _block(p)
            if block is not None:
                blocks.append(block)
    return blocks


def _plain(blocks: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    """One unmarked text block as the plain string Anthropic's examples use; else the blocks."""
    if len(blocks) == 1 and blocks[0]["type"] == "text" and "cache_control" not in blocks[0]:
        return str(blocks[0]["text"])
    return blocks


def to_anthropic(transcript: Transcript) -> dict[str, Any]:
    """Translate a transcript to `{"system": ..., "messages": [...]}` for `/v1/messages`.

    One leading system message becomes `system` (a string, or text blocks if it has several
    parts or a cache hint); tool messages become user messages of `tool_result` blocks
    (`is_error` only when true); a message that is one text part is sent as a plain string.

    Raises:
        InvalidValueError: A system message other than the first message (Anthropic has one
            system prompt), or media it cannot carry.
        PartNotCarriedError: A part of an extension kind with no fallback, a cache hint with
            no block before it, or a prefill outside the final assistant message.
    """
    out: dict[str, Any] = {}
    messages: list[dict[str, Any]] = []
    last = len(transcript) - 1
    for i, m in enumerate(transcript.messages):
        if m.role == "system":
            if i != 0:
                raise InvalidValueError(
                    f"messages[{i}]: Anthropic has one system prompt, before the messages"
                )
            out["system"] = _plain([b for b in _blocks(m, i, i == last) if b["type"] == "text"])
            continue
        messages.append(
            {
                "role": "assistant" if m.role == "assistant" else "user",
                "content": _plain(_blocks(m, i, i == last)),
            }
        )
    out["messages"] = messages
    return out


def to_anthropic_tools(tools: Iterable[ToolSpec]) -> list[dict[str, Any]]:
    """Translate tool specs to Messages `tools` (`input_schema`)."""
    return [
        {"name": t.name, "description": t.description, "input_schema": t.parameters} for t in tools
    ]


def _result_content(value: object, path: Path) -> str:
    """Tool result content as text: a string, or text blocks and plain-text documents (one per line)."""
    if isinstance(value, str):
        return value
    texts = []
    for i, item in enumerate(arr(value, path)):
        ipath = (*path, i)
        o = obj(item, ipath)
        kind = field(o, "type", ipath, string)
        if kind == "text":
            texts.append(field(o, "text", ipath, string))
        elif kind == "document" and field(o, "source", ipath, obj).get("type") == "text":
            texts.append(field(o["source"], "data", (*ipath, "source"), string))
        else:
            raise fail(
                "only text tool_result content (text blocks, text documents) can be read",
                (*ipath, "type"),
            )
    return "\n".join(texts)


def _media(o: dict[str, Any], path: Path) -> MediaPart:
    source = field(o, "source", path, obj)
    spath = (*path, "source")
    kind = field(source, "type", spath, string)
    if kind == "base64":
        media_type = field(source, "media_type", spath, string)
        data = field(source, "data", spath, string)
        return build(path, MediaPart, media_type=media_type, uri=f"data:{media_type};base64,{data}")
    if kind == "url":
        url = field(source, "url", spath, string)
        fallback = "application/pdf" if o.get("type") == "document" else "image/*"
        return build(path, MediaPart, media_type=fallback, uri=url)
    raise fail(f"unsupported media source type {kind!r} (expected base64 or url)", (*spath, "type"))


def _read_cache_hint(block: dict[str, Any], path: Path, into: list[Part]) -> None:
    """A block's ``cache_control``, read as a cache hint after it."""
    control = block.get("cache_control")
    if control is None:
        return
    cpath = (*path, "cache_control")
    if field(obj(control, cpath), "type", cpath, string) != "ephemeral":
        raise fail("cache_control type must be 'ephemeral'", (*cpath, "type"))
    ttl = optional(control, "ttl", cpath, string)
    into.append(build(cpath, CacheHintPart, ttl=ttl))


def from_anthropic(payload: object) -> Transcript:
    """Translate a Messages request (`{"system"?, "messages"}`) to a transcript.

    A user message's `tool_result` blocks become a tool message (names recovered from the
    calls), followed by a user message for any other blocks.

    Raises:
        WireFormatError: The payload is not a Messages request, or a result answers no earlier
            `tool_use`; `.path` points at the offending part.
    """
    root = obj(payload, ())
    transcript = Transcript()
    system = root.get("system")
    if system is not None:
        if isinstance(system, str):
            parts: tuple[Part, ...] = (TextPart(text=system),)
        else:
            blocks: list[Part] = []
            for i, b in enumerate(arr(system, ("system",))):
                block = obj(b, ("system", i))
                blocks.append(TextPart(text=field(block, "text", ("system", i), string)))
                _read_cache_hint(block, ("system", i), blocks)
            parts = tuple(blocks)
        transcript = append(transcript, Message(role="system", parts=parts), ("system",))
    names: dict[str, str] = {}
    for i, item in enumerate(field(root, "messages", (), arr)):
        path: Path = ("messages", i)
        m = obj(item, path)
        role = field(m, "role", path, string)
        if role not in ("user", "assistant"):
            raise fail(f"unknown role {role!r} (expected user or assistant)", (*path, "role"))
        content = field(m, "content", path, lambda v, p: v)
        if isinstance(content, str):
            transcript = append(
                transcript, Message(role=role, parts=(TextPart(text=content),)), path
            )
            continue
        results: list[ToolResultPart] = []
        others: list[Part] = []
        for j, block in enumerate(arr(content, (*path, "content"))):
            bpath = (*path, "content", j)
            b = obj(block, bpath)
            kind = field(b, "type", bpath, string)
            if kind == "text":
                others.append(TextPart(text=field(b, "text", bpath, string)))
            elif kind == "thinking":
                others.append(ReasoningPart(text=field(b, "thinking", bpath, string)))
            elif kind == "redacted_thinking":
                continue
            elif kind in ("image", "document"):
                others.append(_media(b, bpath))
            elif kind == "tool_use":
                call_id = field(b, "id", bpath, string)
                name = field(b, "name", bpath, string)
                args = field(b, "input", bpath, json_object)
                others.append(
                    build(bpath, ToolCallPart, id=CallId(call_id), name=name, arguments=args)
                )
                names[call_id] = name
            elif kind == "tool_result":
                call_id = field(b, "tool_use_id", bpath, string)
                if call_id not in names:
                    raise fail(
                        f"tool_result for {call_id!r}, which no earlier tool_use made",
                        (*bpath, "tool_use_id"),
                    )
                text = _result_content(b.get("content", ""), (*bpath, "content"))
                is_error = optional(b, "is_error", bpath, boolean) or False
                results.append(
                    build(
                        bpath,
                        ToolResultPart,
                        call_id=CallId(call_id),
                        name=names[call_id],
                        content=text,
                        is_error=is_error,
                    )
                )
            else:
                raise fail(f"unsupported content block type {kind!r}", (*bpath, "type"))
            if kind != "tool_result":
                _read_cache_hint(b, bpath, others)
        if results:
            transcript = append(transcript, Message(role="tool", parts=tuple(results)), path)
        if others or not results:
            transcript = append(
                transcript,
                build(path, Message, role=role, parts=tuple(others)),
                path,
            )
    return transcript
