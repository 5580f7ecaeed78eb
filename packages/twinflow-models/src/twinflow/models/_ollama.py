"""`OllamaChatModel`: a `ChatModel` (and `StreamingChatModel`) on Ollama's `/api/chat`.

The wire mapping (messages, tools, the request body, the reply and its NDJSON stream) is
`_ollama_wire`'s; this module is the server that uses it and the chat model on that server.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pydantic import JsonValue

from twinflow.models._chat import ChatModelBase
from twinflow.models._ollama_wire import ollama_chat_body, ollama_chunks, parse_ollama_chat
from twinflow.models._servers import ChatMode, SentSchema, Server, Target, endpoint_root
from twinflow.models._wire import Reply
from twinflow.vocab import Chunk, ModelSettings, ToolSpec, Transcript
from twinflow.vocab._wire import JsonLimits

if TYPE_CHECKING:
    from twinflow.kernel import Ids, Transport

DEFAULT_OLLAMA_URL = "http://127.0.0.1:11434"
"""Where `ollama serve` listens by default."""


@dataclass(frozen=True, kw_only=True)
class OllamaServer(Server):
    """An Ollama server's `/api/chat`: the schema goes in `format`."""

    def _build(
        self,
        transcript: Transcript,
        settings: ModelSettings,
        tools: Sequence[ToolSpec],
        output: SentSchema | None,
    ) -> dict[str, JsonValue]:
        return ollama_chat_body(
            model=self.model,
            transcript=transcript,
            settings=settings,
            output_schema=None if output is None else output.schema,
            tools=tools,
        )

    @property
    def schema_path(self) -> tuple[str, ...]:
        """The schema is the body's `format`."""
        return ("format",)

    def _parse(self, answer: JsonValue) -> Reply:
        return parse_ollama_chat(answer, self.url)

    def _decode(self, raw: Iterable[bytes]) -> Iterator[Chunk]:
        return ollama_chunks(raw, self.url)


def ollama_server(
    transport: Transport, *, base_url: str, model: str, timeout: float
) -> OllamaServer:
    """An Ollama server's `/api/chat`, `base_url` being the server root."""
    return OllamaServer(
        transport=transport,
        url=f"{endpoint_root(base_url)}/api/chat",
        model=model,
        decoder="ollama",
        timeout=timeout,
    )


class OllamaChatModel(ChatModelBase):
    """A `ChatModel` on Ollama's `/api/chat` (native `tools`, or structured-action mode).

    Args:
        transport: The kernel transport that carries every request.
        model: The Ollama model name.
        base_url: The server root.
        mode: `native` or `structured-action`.
        max_attempts: Structured-action mode: total attempts per step, the first included.
        ids: Source of tool-call ids; without it ids derive from the request digest.
        strict: Refuse schemas the decoder would not fully enforce.
        timeout: Seconds allowed per request.
        limits: Bounds on a reply's nesting and its texts (default `DEFAULT_JSON_LIMITS`:
            depth 64, 1 MiB); past them a reply is a typed error, re-asked in
            structured-action mode.
    """

    def __init__(
        self,
        transport: Transport,
        *,
        model: str,
        base_url: str = DEFAULT_OLLAMA_URL,
        mode: ChatMode = "structured-action",
        max_attempts: int = 3,
        ids: Ids | None = None,
        strict: bool = False,
        timeout: float = 120.0,
        limits: JsonLimits | None = None,
    ) -> None:
        """Configure the model; nothing is sent until `request`."""
        super().__init__(
            ollama_server(transport, base_url=base_url, model=model, timeout=timeout),
            mode=mode,
            max_attempts=max_attempts,
            ids=ids,
            strict=strict,
            limits=limits,
        )

    @classmethod
    def opened(cls, transport: Transport, target: Target) -> OllamaChatModel:
        """The model `open_model` makes for an Ollama row."""
        return cls(
            transport,
            model=target.model,
            base_url=target.url,
            mode=target.mode,
            ids=target.ids,
            timeout=target.timeout,
        )
