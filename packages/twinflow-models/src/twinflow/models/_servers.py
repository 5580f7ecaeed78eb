"""A server as a strategy: how to build a body and where to post it, and how to read the answer.

Each provider's module subclasses `Server` with its wire format; the chat models' one engine
(`_chat`) drives any of them, so there is one body builder per wire format and every
structured body goes through it with its schema.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import closing
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from pydantic import JsonValue

from twinflow.kernel._credentials import check_endpoint_url, redact_url
from twinflow.models._digest import body_digest
from twinflow.models._errors import MalformedResponseError
from twinflow.models._openai_wire import Dialect
from twinflow.models._preflight import Decoder, GrammarCheck
from twinflow.models._stream import reply_of
from twinflow.models._wire import Reply, outgoing
from twinflow.trace import UserError
from twinflow.vocab import (
    Chunk,
    Message,
    ModelResponse,
    ModelSettings,
    OutputSchema,
    ToolSpec,
    Transcript,
    WireFormatError,
    digest,
)
from twinflow.vocab import value_bytes as canonical_bytes
from twinflow.vocab._stream import ChunkAssembler
from twinflow.vocab._wire import DEFAULT_JSON_LIMITS, JsonLimits, check_json

if TYPE_CHECKING:
    from twinflow.kernel import Ids, Transport

OnChunk = Callable[[Chunk], None]
"""Shown each raw chunk of a streamed reply as it arrives (for display; the reply is assembled)."""


ChatMode = Literal["native", "structured-action"]
"""`native`: the server's own tool calling; `structured-action`: tool calls as constrained JSON."""


@dataclass(frozen=True)
class Target:
    """What `open_model` asks a provider's client for: which model, where, and how."""

    model: str
    """The model name the server expects."""
    url: str
    """The server root (an OpenAI-compatible one may end in `/v1`)."""
    dialect: Dialect
    """How an OpenAI-compatible server takes a schema (the row's)."""
    mode: ChatMode
    """`native` or `structured-action`."""
    ids: Ids
    """Source of tool-call ids."""
    timeout: float
    """Seconds allowed per request."""
    max_tokens: int | None = None
    """`max_tokens` when a request's settings name none (None: the client's default)."""
    grammar_check: GrammarCheck | None = None
    """A llama-cpp-python server's own converter, run by pre-flight (that dialect only)."""


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


@dataclass(frozen=True, kw_only=True)
class Server(ABC):
    """One configured server: its endpoint, model and decoder; a provider's module subclasses it
    with its wire format (`_build`, `schema_path`, `_parse`, `_decode`)."""

    transport: Transport
    url: str
    model: str
    decoder: Decoder
    timeout: float
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

        Its `json_schema` object goes into the body as is, at `schema_path`.
        """
        transcript = outgoing(messages, native_tools=native_tools)
        return self._build(transcript, settings, tools if native_tools else (), output)

    @abstractmethod
    def _build(
        self,
        transcript: Transcript,
        settings: ModelSettings,
        tools: Sequence[ToolSpec],
        output: SentSchema | None,
    ) -> dict[str, JsonValue]:
        """The provider's request body for one request."""

    @property
    @abstractmethod
    def schema_path(self) -> tuple[str, ...]:
        """The keys, from the body down, of the schema `body` puts in: its encoding is reusable."""

    @abstractmethod
    def _parse(self, answer: JsonValue) -> Reply:
        """The reply a non-streamed answer body carries."""

    @abstractmethod
    def _decode(self, raw: Iterable[bytes]) -> Iterator[Chunk]:
        """The chunks a streamed answer's raw lines carry."""

    def _stream_fields(self) -> dict[str, JsonValue]:
        """Fields a streamed body carries besides `stream: true`."""
        return {}

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
        return self._parse(answer)

    def send(self, body: dict[str, JsonValue], on_chunk: OnChunk | None) -> Reply:
        """`post(body)`, or, given `on_chunk`, `stream(body, on_chunk)`."""
        return self.post(body) if on_chunk is None else self.stream(body, on_chunk)

    def stream(self, body: dict[str, JsonValue], on_chunk: OnChunk) -> Reply:
        """Send `body` as a streamed request, show each chunk to `on_chunk`, return the reply.

        The reply is what `post(body)` would have read from the same answer non-streamed: the
        chunks go through vocab's one `ChunkAssembler`. `body` is the non-streamed body (the
        one whose digest names the request); `stream: true` is set on a copy, with the
        provider's `_stream_fields`.

        Raises:
            UserError: The transport cannot stream.
            TransportError: As the transport raised it, unretried.
            MalformedResponseError: The stream is not its wire format, or ended before its finish.
        """
        response = stream_reply(
            self.transport,
            self.url,
            {**body, "stream": True, **self._stream_fields()},
            self.timeout,
            self._decode,
            on_chunk,
        )
        return reply_of(response)


def stream_reply(
    transport: Transport,
    url: str,
    body: dict[str, JsonValue],
    timeout: float,
    decode: Callable[[Iterable[bytes]], Iterator[Chunk]],
    on_chunk: OnChunk,
) -> ModelResponse:
    """Post a streamed `body`, show each decoded chunk to `on_chunk`, and assemble the reply.

    Raises:
        UserError: The transport cannot stream.
        MalformedResponseError: The stream is not its wire format, or ended before its finish.
    """
    post_stream = getattr(transport, "post_stream", None)
    if post_stream is None:
        raise UserError(
            f"streaming from {url} needs a transport with post_stream; "
            f"{type(transport).__name__} has none"
        )
    assembler = ChunkAssembler()
    with closing(post_stream(url, body, timeout=timeout)) as raw:
        try:
            for chunk in decode(raw):
                assembler.feed(chunk)
                on_chunk(chunk)
            return assembler.result()
        except WireFormatError as exc:
            raise MalformedResponseError(
                f"the stream does not form a reply: {exc}", url=url, path=""
            ) from None
