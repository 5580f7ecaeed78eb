"""`GeminiChatModel`: a `ChatModel` (and `StreamingChatModel`) on Gemini's `generateContent`.

The wire mapping (contents and parts, function declarations and calls, `responseSchema`, the
reply, its safety blocks and its server-sent events) is `_gemini_wire`'s; this module is the
server that uses it and the chat model on that server. The key travels in the transport's
`x-goog-api-key` header, never in a body or URL, so no recording or trace holds it.

Gemini's function calls carry no id a result must echo, so call ids come from the injected
`Ids` (or derive from the request digest), as for the OpenAI-compatible servers.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, ClassVar
from urllib.parse import quote

from pydantic import JsonValue

from twinflow.kernel._credentials import KeyHeader
from twinflow.models._chat import ChatModelBase
from twinflow.models._gemini_wire import gemini_body, gemini_chunks, parse_gemini
from twinflow.models._servers import (
    ChatMode,
    OnChunk,
    SentSchema,
    Server,
    Target,
    endpoint_root,
    stream_reply,
)
from twinflow.models._stream import reply_of
from twinflow.models._wire import Reply
from twinflow.trace import UserError
from twinflow.vocab import Chunk, InvalidValueError, ModelSettings, ToolSpec, Transcript
from twinflow.vocab._wire import JsonLimits

if TYPE_CHECKING:
    from twinflow.kernel import Ids, Transport

DEFAULT_GEMINI_URL = "https://generativelanguage.googleapis.com"
"""The Gemini API's root; the client appends `/v1beta/models/MODEL:generateContent`."""


@dataclass(frozen=True, kw_only=True)
class GeminiServer(Server):
    """Gemini's `generateContent`: the schema goes in `generationConfig.responseSchema`, in
    Gemini's subset (so the schema sent is converted, and its digest is of the body)."""

    stream_url: str

    def _build(
        self,
        transcript: Transcript,
        settings: ModelSettings,
        tools: Sequence[ToolSpec],
        output: SentSchema | None,
    ) -> dict[str, JsonValue]:
        try:
            return gemini_body(
                transcript, settings, tools, None if output is None else output.schema.json_schema
            )
        except InvalidValueError as exc:
            raise UserError(f"this conversation cannot be sent to Gemini: {exc}") from None

    @property
    def schema_path(self) -> tuple[str, ...]:
        """Where the converted schema sits (digests are of the whole body: see `request_digest`)."""
        return ("generationConfig", "responseSchema")

    def request_digest(self, body: dict[str, JsonValue], output: SentSchema | None) -> str:
        """The digest of the body as sent: the schema in it is Gemini's, not `output`'s."""
        return super().request_digest(body, None)

    def _parse(self, answer: JsonValue) -> Reply:
        return parse_gemini(answer, self.url)

    def _decode(self, raw: Iterable[bytes]) -> Iterator[Chunk]:
        return gemini_chunks(raw, self.stream_url)

    def stream(self, body: dict[str, JsonValue], on_chunk: OnChunk) -> Reply:
        """Post `body` to `streamGenerateContent?alt=sse` (the same body: Gemini streams by URL)."""
        response = stream_reply(
            self.transport, self.stream_url, body, self.timeout, self._decode, on_chunk
        )
        return reply_of(response)


def gemini_server(
    transport: Transport, *, base_url: str, model: str, timeout: float
) -> GeminiServer:
    """Gemini's `generateContent` for `model`, `base_url` being the API root."""
    root = f"{endpoint_root(base_url)}/v1beta/models/{quote(model, safe='')}"
    return GeminiServer(
        transport=transport,
        url=f"{root}:generateContent",
        stream_url=f"{root}:streamGenerateContent?alt=sse",
        model=model,
        # No decoder of ours: the pre-flight report is the llama.cpp converter's, a warning.
        decoder="llama.cpp",
        timeout=timeout,
    )


class GeminiChatModel(ChatModelBase):
    """A `ChatModel` on Gemini's `generateContent` (native function calling, or
    structured-action mode with every reply constrained by `responseSchema`).

    Args:
        transport: The kernel transport; it carries `x-goog-api-key`.
        model: The model name, e.g. `gemini-2.5-flash`.
        base_url: The API root (a loopback server in tests, a gateway, or the real API).
        mode: `native` (the default) or `structured-action`.
        max_attempts: Structured-action mode: total attempts per step, the first included.
        ids: Source of tool-call ids; without it ids derive from the request digest.
        timeout: Seconds allowed per request.
        limits: Bounds on a reply's nesting and its texts.
    """

    key_header: ClassVar[KeyHeader] = KeyHeader("x-goog-api-key")
    """The header the Gemini API takes its key in: ``x-goog-api-key: <key>``."""
    required_headers: ClassVar[Mapping[str, str]] = MappingProxyType({})
    """Headers every request needs besides the key: none."""
    default_mode: ClassVar[ChatMode] = "native"
    """A run spec's mode when it names none: Gemini's own function calling."""

    def __init__(
        self,
        transport: Transport,
        *,
        model: str,
        base_url: str = DEFAULT_GEMINI_URL,
        mode: ChatMode = "native",
        max_attempts: int = 3,
        ids: Ids | None = None,
        timeout: float = 120.0,
        limits: JsonLimits | None = None,
    ) -> None:
        """Configure the model; nothing is sent until `request`."""
        super().__init__(
            gemini_server(transport, base_url=base_url, model=model, timeout=timeout),
            mode=mode,
            max_attempts=max_attempts,
            ids=ids,
            strict=False,
            limits=limits,
        )

    @classmethod
    def opened(cls, transport: Transport, target: Target) -> GeminiChatModel:
        """The model `open_model` makes for a Gemini row."""
        return cls(
            transport,
            model=target.model,
            base_url=target.url,
            mode=target.mode,
            ids=target.ids,
            timeout=target.timeout,
        )
