"""Decoding the two streaming wire formats into vocab's raw chunks.

OpenAI-compatible servers stream server-sent events (`data: {chat.completion.chunk}` lines,
ended by `data: [DONE]`); Ollama streams newline-delimited JSON, one `/api/chat` object per
line, the last with `done: true`. Both decoders turn the transport's byte chunks (cut anywhere)
into `twinflow.vocab` chunks; `ChunkAssembler` alone builds the reply out of them, and
`reply_of` reads it as the `Reply` a non-streamed answer parses to.

Both decoders are bounded (a line longer than `MAX_LINE_BYTES` is refused) and total: anything
that is not the documented format raises `MalformedResponseError` naming the URL and the line.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from pydantic import JsonValue

from twinflow.models._errors import MalformedResponseError
from twinflow.models._wire import Reply, _finish
from twinflow.vocab import (
    Chunk,
    FinishChunk,
    FinishReason,
    ModelResponse,
    ReasoningDelta,
    TextDelta,
    TextPart,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    UsageChunk,
)

__all__ = [
    "MAX_LINE_BYTES",
    "anthropic_chunks",
    "anthropic_finish",
    "lines",
    "ollama_chunks",
    "openai_chunks",
    "reply_of",
]

MAX_LINE_BYTES = 4 * 1024 * 1024
"""The longest line (one SSE field or one NDJSON object) a decoder accepts."""


def lines(chunks: Iterable[bytes], url: str, limit: int = MAX_LINE_BYTES) -> Iterator[bytes]:
    """The lines of a byte stream cut anywhere, without their `\n` or `\r\n`.

    A last line without a newline is yielded too. Linear in the bytes read, however small the
    chunks: a line is gathered in one growing buffer, and each byte is searched once.

    Raises:
        MalformedResponseError: A line is longer than `limit` bytes.
    """
    pending = bytearray()
    for chunk in chunks:
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            pending += chunk[start:end]
            yield bytes(pending).removesuffix(b"\r")
            pending.clear()
            start = end + 1
        pending += chunk[start:]
        if len(pending) > limit:
            raise MalformedResponseError(
                f"a stream line passed {limit} bytes without ending", url=url, path=""
            )
    if pending:
        yield bytes(pending).removesuffix(b"\r")


def _json_line(line: bytes, url: str, number: int, what: str) -> dict[str, Any]:
    try:
        value = json.loads(line)
    except (ValueError, RecursionError) as exc:
        raise MalformedResponseError(
            f"{what} {number} is not JSON ({exc}); it starts {line[:80]!r}", url=url, path=""
        ) from None
    if not isinstance(value, dict):
        raise MalformedResponseError(
            f"{what} {number} is {type(value).__name__}, not a JSON object", url=url, path=""
        )
    if "error" in value:
        raise MalformedResponseError(
            f"the server reported an error in {what} {number}: {str(value['error'])[:300]}",
            url=url,
            path="/error",
        )
    return value


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _sse_data(chunks: Iterable[bytes], url: str) -> Iterator[bytes]:
    """The `data` of each server-sent event (multi-line data joined with `\\n`).

    Raises:
        MalformedResponseError: The answer opens with a JSON document, not an event: the server
            did not stream (SSE would ignore such a line, and the reply would be "empty").
    """
    data: list[bytes] = []
    seen = False
    for line in lines(chunks, url):
        if not seen and line.lstrip()[:1] in (b"{", b"["):
            raise MalformedResponseError(
                "the server answered a JSON document, not server-sent events: it does not "
                "stream this request; ask without streaming (`twinflow run --quiet`)",
                url=url,
                path="",
            )
        seen = seen or bool(line)
        if not line:
            if data:
                yield b"\n".join(data)
                data = []
        elif line.startswith(b"data:"):
            data.append(line[5:].removeprefix(b" "))
        # Comments (":"), and the event, id and retry fields carry nothing a chat client uses.
    if data:
        yield b"\n".join(data)


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
    for number, data in enumerate(_sse_data(chunks, url)):
        if data.strip() == b"[DONE]":
            finished = True
            break
        event = _json_line(data, url, number, "event")
        if isinstance(event.get("model"), str) and event["model"]:
            model_name = event["model"]
        usage = event.get("usage")
        if isinstance(usage, dict):
            yield UsageChunk(
                input_tokens=_count(usage.get("prompt_tokens")),
                output_tokens=_count(usage.get("completion_tokens")),
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
        yield FinishChunk(reason=_finish(reason, bool(started)), model_name=model_name)


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
        if not isinstance(function, dict) or _count(index) is None:
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
        event = _json_line(line, url, number, "line")
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
                input_tokens=_count(event.get("prompt_eval_count")) or 0,
                output_tokens=_count(event.get("eval_count")) or 0,
            )
            model = event.get("model")
            yield FinishChunk(
                reason=_finish(event.get("done_reason"), calls > 0),
                model_name=model if isinstance(model, str) else "",
            )
            return


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
    blocks: dict[int, str] = {}
    calls = 0
    reason: object = None
    model_name = ""
    for number, data in enumerate(_sse_data(chunks, url)):
        event = _json_line(data, url, number, "event")
        kind = event.get("type")
        if kind == "message_start":
            message = event.get("message")
            if not isinstance(message, dict):
                raise MalformedResponseError(
                    f"event {number}: message_start without a message", url=url, path="/message"
                )
            if isinstance(message.get("model"), str):
                model_name = message["model"]
            yield from _anthropic_usage(message.get("usage"))
        elif kind == "content_block_start":
            index, block = event.get("index"), event.get("content_block")
            if _count(index) is None or not isinstance(block, dict):
                raise MalformedResponseError(
                    f"event {number}: content_block_start needs an index and a content_block",
                    url=url,
                    path="/content_block",
                )
            assert isinstance(index, int)
            block_type = str(block.get("type"))
            blocks[index] = block_type
            if block_type == "text" and block.get("text"):
                yield TextDelta(text=str(block["text"]))
            elif block_type == "thinking" and block.get("thinking"):
                yield ReasoningDelta(text=str(block["thinking"]))
            elif block_type == "tool_use":
                call_id, name = block.get("id"), block.get("name")
                if not isinstance(call_id, str) or not isinstance(name, str):
                    raise MalformedResponseError(
                        f"event {number}: a tool_use block needs an id and a name",
                        url=url,
                        path="/content_block",
                    )
                calls += 1
                yield ToolCallStart(index=index, id=call_id, name=name)
                start_input = block.get("input")
                if start_input:
                    yield ToolCallDelta(index=index, arguments=json.dumps(start_input))
            elif block_type not in ("text", "thinking", "redacted_thinking"):
                raise MalformedResponseError(
                    f"event {number}: unsupported content block type {block_type!r}",
                    url=url,
                    path="/content_block/type",
                )
        elif kind in ("content_block_delta", "content_block_stop"):
            index = event.get("index")
            if not isinstance(index, int) or index not in blocks:
                raise MalformedResponseError(
                    f"event {number}: {kind} for content block {index!r}, which never started",
                    url=url,
                    path="/index",
                )
            if kind == "content_block_stop":
                if blocks[index] == "tool_use":
                    yield ToolCallEnd(index=index)
                continue
            delta = event.get("delta")
            delta = delta if isinstance(delta, dict) else {}
            delta_type = delta.get("type")
            if delta_type == "text_delta" and delta.get("text"):
                yield TextDelta(text=str(delta["text"]))
            elif delta_type == "thinking_delta" and delta.get("thinking"):
                yield ReasoningDelta(text=str(delta["thinking"]))
            elif delta_type == "input_json_delta" and delta.get("partial_json"):
                yield ToolCallDelta(index=index, arguments=str(delta["partial_json"]))
        elif kind == "message_delta":
            delta = event.get("delta")
            if isinstance(delta, dict) and "stop_reason" in delta:
                reason = delta["stop_reason"]
            yield from _anthropic_usage(event.get("usage"))
        elif kind == "message_stop":
            yield FinishChunk(reason=anthropic_finish(reason, calls > 0), model_name=model_name)
            return
        elif kind == "error":
            raise MalformedResponseError(
                f"the server reported an error in event {number}: {str(event.get('error'))[:300]}",
                url=url,
                path="/error",
            )
        # "ping", and event types added later, carry nothing this client keeps.


def _anthropic_usage(usage: object) -> Iterator[Chunk]:
    if isinstance(usage, dict):
        yield UsageChunk(
            input_tokens=_count(usage.get("input_tokens")),
            output_tokens=_count(usage.get("output_tokens")),
        )


def reply_of(response: ModelResponse) -> Reply:
    """Read an assembled reply as the `Reply` its non-streamed answer parses to."""
    message = response.message
    text = [p.text for p in message.parts if isinstance(p, TextPart)]
    return Reply(
        content="".join(text) if text else None,
        tool_calls=tuple((c.name, c.arguments) for c in message.tool_calls),
        finish_reason=response.finish_reason,
        usage=response.usage,
        model_name=response.model_name,
    )
