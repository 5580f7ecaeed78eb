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

from collections.abc import Iterable, Iterator
from typing import Any

from twinflow._base._json import loads as received_json
from twinflow.models._errors import MalformedResponseError
from twinflow.models._wire import Reply
from twinflow.vocab import (
    ModelResponse,
    TextPart,
)

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


def json_line(line: bytes, url: str, number: int, what: str) -> dict[str, Any]:
    try:
        value = received_json(line)
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


def token_count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def sse_data(chunks: Iterable[bytes], url: str) -> Iterator[bytes]:
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

        # "ping", and event types added later, carry nothing this client keeps.


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
