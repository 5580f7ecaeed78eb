"""The two servers as strategies: how to build a body and where to post it, and how to read the
answer. The structured-output adapters and the chat models share them, so there is one body
builder per wire format and every structured body goes through it with its schema.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import closing
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pydantic import JsonValue

from twinflow.kernel import check_endpoint_url, redact_url
from twinflow.local_model._digest import body_digest
from twinflow.local_model._errors import MalformedResponseError
from twinflow.local_model._preflight import Decoder
from twinflow.local_model._stream import ollama_chunks, openai_chunks, reply_of
from twinflow.local_model._wire import (
    Dialect,
    Reply,
    check_extra_body,
    ollama_chat_body,
    openai_chat_body,
    openai_response_format,
    outgoing,
    parse_ollama_chat,
    parse_openai_chat,
)
from twinflow.trace import UserError
from twinflow.vocab import (
    Chunk,
    ChunkAssembler,
    Message,
    ModelSettings,
    OutputSchema,
    ToolSpec,
    Transcript,
    WireFormatError,
    digest,
)
from twinflow.vocab import value_bytes as canonical_bytes
from twinflow.vocab.wire import DEFAULT_JSON_LIMITS, JsonLimits, check_json

if TYPE_CHECKING:
    from twinflow.kernel import Transport

DEFAULT_OLLAMA_URL = "http://127.0.0.1:11434"

OnChunk = Callable[[Chunk], None]
"""Shown each raw chunk of a streamed reply as it arrives (for display; the reply is assembled)."""

_DECODERS: dict[str, Decoder] = {
    "llama-cpp-python": "llama-cpp-python",
    "llama.cpp": "llama.cpp",
    # LM Studio serves GGUF models through llama.cpp; vLLM's backends enforce more, so the
    # llama.cpp report can only over-warn there, never under-warn relative to the grammar.
    "lmstudio": "llama.cpp",
    "vllm": "llama.cpp",
}


def endpoint_root(base_url: str) -> str:
    """``base_url`` without a trailing ``/``, checked: http(s), and no credentials in it.

    Raises:
        UserError: Not an http(s) URL, or a URL carrying a key (the message shows it redacted).
    """
    if not base_url.startswith(("http://", "https://")):
        raise UserError(f"base_url must be an http(s) URL, got {redact_url(base_url)!r}")
    return check_endpoint_url(base_url, where="base_url").rstrip("/")


@dataclass(frozen=True)
class SentSchema:
    """An output schema as sent: checked once, its canonical bytes computed once."""

    schema: OutputSchema
    """The schema (after any pre-flight rewrite), its `json_schema` the object put in bodies."""
    encoded: bytes
    """`canonical_bytes(schema.json_schema)`."""

    @classmethod
    def of(cls, name: str, json_schema: dict[str, JsonValue]) -> SentSchema:
        """Check `json_schema` (as `OutputSchema` does) and encode it, once."""
        schema = OutputSchema(name=name, json_schema=json_schema)
        return cls(schema=schema, encoded=canonical_bytes(schema.json_schema))


@dataclass(frozen=True)
class Server:
    """One configured server: its endpoint, model, wire format and decoder."""

    transport: Transport
    url: str
    model: str
    decoder: Decoder
    timeout: float
    dialect: Dialect | None = None
    extra_body: Mapping[str, JsonValue] | None = None
    limits: JsonLimits = DEFAULT_JSON_LIMITS

    def body(
        self,
        messages: Sequence[Message] | Transcript,
        *,
        settings: ModelSettings,
        native_tools: bool,
        tools: Sequence[ToolSpec] = (),
        output: SentSchema | None = None,
    ) -> dict[str, JsonValue]:
        """Build the request body; a given output schema always constrains decoding.

        Its `json_schema` object goes into the body as is (`format` for Ollama, inside
        `response_format` otherwise), at `schema_path`.
        """
        transcript = outgoing(messages, native_tools=native_tools)
        if self.dialect is None:
            return ollama_chat_body(
                model=self.model,
                transcript=transcript,
                settings=settings,
                output_schema=None if output is None else output.schema,
                tools=tools if native_tools else (),
            )
        return openai_chat_body(
            model=self.model,
            transcript=transcript,
            settings=settings,
            response_format=None
            if output is None
            else openai_response_format(
                self.dialect, output.schema.name, output.schema.json_schema
            ),
            tools=tools if native_tools else (),
            extra_body=self.extra_body,
        )

    @property
    def schema_path(self) -> tuple[str, ...]:
        """The keys, from the body down, of the schema `body` puts in: its encoding is reusable."""
        if self.dialect is None:
            return ("format",)
        if self.dialect == "llama-cpp-python":
            return ("response_format", "schema")
        return ("response_format", "json_schema", "schema")

    def request_digest(self, body: dict[str, JsonValue], output: SentSchema | None) -> str:
        """`twinflow.vocab.digest(body)`, the schema's canonical bytes reused from `output`."""
        if output is None:
            return digest(body)
        return body_digest(body, self.schema_path, output.schema.json_schema, output.encoded)

    def post(self, body: dict[str, JsonValue]) -> Reply:
        """Send `body`; transport errors propagate unchanged and are never retried here."""
        answer = self.transport.post_json(self.url, body, timeout=self.timeout)
        try:
            # Before any reader walks it: a hostile body is a typed error, not a RecursionError.
            check_json(answer, (), self.limits, strings=False)
        except WireFormatError as exc:
            raise MalformedResponseError(exc.reason, url=self.url, path=exc.path) from None
        if self.dialect is None:
            return parse_ollama_chat(answer, self.url)
        return parse_openai_chat(answer, self.url)

    def send(self, body: dict[str, JsonValue], on_chunk: OnChunk | None) -> Reply:
        """`post(body)`, or, given `on_chunk`, `stream(body, on_chunk)`."""
        return self.post(body) if on_chunk is None else self.stream(body, on_chunk)

    def stream(self, body: dict[str, JsonValue], on_chunk: OnChunk) -> Reply:
        """Send `body` as a streamed request, show each chunk to `on_chunk`, return the reply.

        The reply is what `post(body)` would have read from the same answer non-streamed: the
        chunks go through vocab's one `ChunkAssembler`. `body` is the non-streamed body (the
        one whose digest names the request); `stream: true` is set on a copy, and, for the
        OpenAI dialects, `stream_options.include_usage` so the token counts come too (servers
        that ignore it, such as llama-cpp-python, report no usage in a stream).

        Raises:
            UserError: The transport cannot stream.
            TransportError: As the transport raised it, unretried.
            MalformedResponseError: The stream is not its wire format, or ended before its finish.
        """
        post_stream = getattr(self.transport, "post_stream", None)
        if post_stream is None:
            raise UserError(
                f"streaming from {self.url} needs a transport with post_stream; "
                f"{type(self.transport).__name__} has none"
            )
        sent: dict[str, JsonValue] = {**body, "stream": True}
        if self.dialect is not None:
            sent["stream_options"] = {"include_usage": True}
        decode = ollama_chunks if self.dialect is None else openai_chunks
        assembler = ChunkAssembler()
        with closing(post_stream(self.url, sent, timeout=self.timeout)) as raw:
            try:
                for chunk in decode(raw, self.url):
                    assembler.feed(chunk)
                    on_chunk(chunk)
                response = assembler.result()
            except WireFormatError as exc:
                raise MalformedResponseError(
                    f"the stream does not form a reply: {exc}", url=self.url, path=""
                ) from None
        return reply_of(response)


def ollama_server(transport: Transport, *, base_url: str, model: str, timeout: float) -> Server:
    """An Ollama server's `/api/chat`."""
    return Server(
        transport=transport,
        url=f"{endpoint_root(base_url)}/api/chat",
        model=model,
        decoder="ollama",
        timeout=timeout,
    )


def openai_server(
    transport: Transport,
    *,
    base_url: str,
    model: str,
    dialect: Dialect,
    timeout: float,
    extra_body: Mapping[str, JsonValue] | None,
    decoder: Decoder | None,
) -> Server:
    """An OpenAI-compatible server's `/v1/chat/completions`, `base_url` being the server root."""
    if dialect not in _DECODERS:
        raise UserError(
            f"unknown dialect {dialect!r}; choose one of {', '.join(sorted(_DECODERS))}"
        )
    if extra_body:
        check_extra_body(extra_body)
    return Server(
        transport=transport,
        url=f"{endpoint_root(base_url)}/v1/chat/completions",
        model=model,
        decoder=decoder or _DECODERS[dialect],
        timeout=timeout,
        dialect=dialect,
        extra_body=dict(extra_body) if extra_body else None,
    )
