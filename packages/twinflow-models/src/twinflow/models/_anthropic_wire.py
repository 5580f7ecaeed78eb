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

import json
from collections.abc import Iterable, Iterator
from typing import Any

from twinflow.models._errors import MalformedResponseError
from twinflow.models._read import (
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
from twinflow.models._stream import json_line, sse_data, token_count
from twinflow.vocab import (
    CacheHintPart,
    CallId,
    Chunk,
    FinishChunk,
    InvalidValueError,
    MediaPart,
    Message,
    Part,
    PartNotCarriedError,
    PrefillPart,
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
    UsageChunk,
)
from twinflow.vocab._parts import carried_parts
from twinflow.vocab._protocols import FinishReason

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
        transcript = append(transcript, _read_system(system), ("system",))
    names: dict[str, str] = {}
    for i, item in enumerate(field(root, "messages", (), arr)):
        for message in _read_message(item, ("messages", i), names):
            transcript = append(transcript, message, ("messages", i))
    return transcript


def _read_system(system: object) -> Message:
    """The system prompt: a string, or text blocks (each may carry a cache hint)."""
    if isinstance(system, str):
        return Message(role="system", parts=(TextPart(text=system),))
    blocks: list[Part] = []
    for i, b in enumerate(arr(system, ("system",))):
        block = obj(b, ("system", i))
        blocks.append(TextPart(text=field(block, "text", ("system", i), string)))
        _read_cache_hint(block, ("system", i), blocks)
    return Message(role="system", parts=tuple(blocks))


def _read_message(item: object, path: Path, names: dict[str, str]) -> list[Message]:
    """One Messages message as transcript messages: its tool results first (a tool message),
    then its other blocks. `names` maps each call id seen so far to its tool's name."""
    m = obj(item, path)
    role = field(m, "role", path, string)
    if role not in ("user", "assistant"):
        raise fail(f"unknown role {role!r} (expected user or assistant)", (*path, "role"))
    content = field(m, "content", path, lambda v, p: v)
    if isinstance(content, str):
        return [Message(role=role, parts=(TextPart(text=content),))]
    results: list[ToolResultPart] = []
    others: list[Part] = []
    for j, block in enumerate(arr(content, (*path, "content"))):
        bpath = (*path, "content", j)
        b = obj(block, bpath)
        part = _read_block(b, bpath, names)
        if isinstance(part, ToolResultPart):
            results.append(part)
        elif part is not None:
            others.append(part)
            _read_cache_hint(b, bpath, others)
    messages: list[Message] = []
    if results:
        messages.append(Message(role="tool", parts=tuple(results)))
    if others or not results:
        messages.append(build(path, Message, role=role, parts=tuple(others)))
    return messages


def _read_block(b: dict[str, Any], bpath: Path, names: dict[str, str]) -> Part | None:
    """One content block as a part (None for redacted thinking, which carries nothing kept)."""
    kind = field(b, "type", bpath, string)
    if kind == "text":
        return TextPart(text=field(b, "text", bpath, string))
    if kind == "thinking":
        return ReasoningPart(text=field(b, "thinking", bpath, string))
    if kind == "redacted_thinking":
        return None
    if kind in ("image", "document"):
        return _media(b, bpath)
    if kind == "tool_use":
        call_id = field(b, "id", bpath, string)
        name = field(b, "name", bpath, string)
        args = field(b, "input", bpath, json_object)
        names[call_id] = name
        return build(bpath, ToolCallPart, id=CallId(call_id), name=name, arguments=args)
    if kind == "tool_result":
        call_id = field(b, "tool_use_id", bpath, string)
        if call_id not in names:
            raise fail(
                f"tool_result for {call_id!r}, which no earlier tool_use made",
                (*bpath, "tool_use_id"),
            )
        return build(
            bpath,
            ToolResultPart,
            call_id=CallId(call_id),
            name=names[call_id],
            content=_result_content(b.get("content", ""), (*bpath, "content")),
            is_error=optional(b, "is_error", bpath, boolean) or False,
        )
    raise fail(f"unsupported content block type {kind!r}", (*bpath, "type"))


def anthropic_finish(stop_reason: object, has_calls: bool) -> FinishReason:
    """Map a Messages `stop_reason` to a finish reason."""
    if has_calls or stop_reason == "tool_use":
        return "tool_calls"
    if stop_reason == "max_tokens":
        return "length"
    if stop_reason in ("end_turn", "stop_sequence", "pause_turn", None):
        return "stop"
    return "error"


def anthropic_chunks(chunks: Iterable[bytes], url: str) -> Iterator[Chunk]:
    """Decode an Anthropic Messages event stream (`message_start` ... `message_stop`).

    Text, thinking and `input_json_delta` deltas become their chunks (a `tool_use` block a
    call start, its end a call end); the usage of `message_start` and `message_delta` a usage
    chunk each; `message_stop` the finish chunk. Pings and signatures carry nothing kept.

    Raises:
        MalformedResponseError: An event is not a Messages stream event, names a block that
            never started, or is an `error` event.
    """
    stream = _AnthropicStream(url)
    for number, data in enumerate(sse_data(chunks, url)):
        event = json_line(data, url, number, "event")
        yield from stream.read(event, number)
        if stream.stopped:
            return


class _AnthropicStream:
    """What a Messages stream has said so far: its blocks, calls, stop reason and model."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.blocks: dict[int, str] = {}
        self.calls = 0
        self.reason: object = None
        self.model_name = ""
        self.stopped = False

    def read(self, event: dict[str, Any], number: int) -> Iterator[Chunk]:
        """The chunks of one event."""
        kind = event.get("type")
        if kind == "message_start":
            yield from self._message_start(event, number)
        elif kind == "content_block_start":
            yield from self._block_start(event, number)
        elif kind in ("content_block_delta", "content_block_stop"):
            yield from self._block_event(event, number, str(kind))
        elif kind == "message_delta":
            delta = event.get("delta")
            if isinstance(delta, dict) and "stop_reason" in delta:
                self.reason = delta["stop_reason"]
            yield from _anthropic_usage(event.get("usage"))
        elif kind == "message_stop":
            self.stopped = True
            yield FinishChunk(
                reason=anthropic_finish(self.reason, self.calls > 0), model_name=self.model_name
            )
        elif kind == "error":
            raise MalformedResponseError(
                f"the server reported an error in event {number}: {str(event.get('error'))[:300]}",
                url=self.url,
                path="/error",
            )
        # "ping", and event types added later, carry nothing this client keeps.

    def _message_start(self, event: dict[str, Any], number: int) -> Iterator[Chunk]:
        message = event.get("message")
        if not isinstance(message, dict):
            raise MalformedResponseError(
                f"event {number}: message_start without a message", url=self.url, path="/message"
            )
        if isinstance(message.get("model"), str):
            self.model_name = message["model"]
        yield from _anthropic_usage(message.get("usage"))

    def _block_start(self, event: dict[str, Any], number: int) -> Iterator[Chunk]:
        index, block = event.get("index"), event.get("content_block")
        if token_count(index) is None or not isinstance(block, dict):
            raise MalformedResponseError(
                f"event {number}: content_block_start needs an index and a content_block",
                url=self.url,
                path="/content_block",
            )
        assert isinstance(index, int)
        block_type = str(block.get("type"))
        self.blocks[index] = block_type
        if block_type == "text" and block.get("text"):
            yield TextDelta(text=str(block["text"]))
        elif block_type == "thinking" and block.get("thinking"):
            yield ReasoningDelta(text=str(block["thinking"]))
        elif block_type == "tool_use":
            call_id, name = block.get("id"), block.get("name")
            if not isinstance(call_id, str) or not isinstance(name, str):
                raise MalformedResponseError(
                    f"event {number}: a tool_use block needs an id and a name",
                    url=self.url,
                    path="/content_block",
                )
            self.calls += 1
            yield ToolCallStart(index=index, id=call_id, name=name)
            start_input = block.get("input")
            if start_input:
                yield ToolCallDelta(index=index, arguments=json.dumps(start_input))
        elif block_type not in ("text", "thinking", "redacted_thinking"):
            raise MalformedResponseError(
                f"event {number}: unsupported content block type {block_type!r}",
                url=self.url,
                path="/content_block/type",
            )

    def _block_event(self, event: dict[str, Any], number: int, kind: str) -> Iterator[Chunk]:
        index = event.get("index")
        if not isinstance(index, int) or index not in self.blocks:
            raise MalformedResponseError(
                f"event {number}: {kind} for content block {index!r}, which never started",
                url=self.url,
                path="/index",
            )
        if kind == "content_block_stop":
            if self.blocks[index] == "tool_use":
                yield ToolCallEnd(index=index)
            return
        delta = event.get("delta")
        delta = delta if isinstance(delta, dict) else {}
        delta_type = delta.get("type")
        if delta_type == "text_delta" and delta.get("text"):
            yield TextDelta(text=str(delta["text"]))
        elif delta_type == "thinking_delta" and delta.get("thinking"):
            yield ReasoningDelta(text=str(delta["thinking"]))
        elif delta_type == "input_json_delta" and delta.get("partial_json"):
            yield ToolCallDelta(index=index, arguments=str(delta["partial_json"]))


def _anthropic_usage(usage: object) -> Iterator[Chunk]:
    if isinstance(usage, dict):
        yield UsageChunk(
            input_tokens=token_count(usage.get("input_tokens")),
            output_tokens=token_count(usage.get("output_tokens")),
        )
