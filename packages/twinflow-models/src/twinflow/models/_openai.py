"""`OpenAICompatibleChatModel`: a `ChatModel` (and `StreamingChatModel`) on an OpenAI-compatible
`/v1/chat/completions`: llama.cpp's and llama-cpp-python's servers, vLLM, LM Studio, and
OpenAI's own API.

The wire mapping (messages, tools, the request body, `response_format` in each dialect, the
reply and its server-sent events) is `_openai_wire`'s; this module is the server that uses it
and the chat model on that server.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pydantic import JsonValue

from twinflow.models._chat import ChatModelBase
from twinflow.models._errors import ModelSetupError
from twinflow.models._openai_wire import (
    Dialect,
    check_extra_body,
    openai_chat_body,
    openai_chunks,
    openai_response_format,
    parse_openai_chat,
)
from twinflow.models._preflight import Decoder, GrammarCheck
from twinflow.models._servers import ChatMode, SentSchema, Server, Target, endpoint_root
from twinflow.models._wire import Reply
from twinflow.vocab import Chunk, ModelSettings, ToolSpec, Transcript
from twinflow.vocab._wire import JsonLimits

if TYPE_CHECKING:
    from twinflow.kernel import Ids, Transport

_DECODERS: dict[str, Decoder] = {
    "llama-cpp-python": "llama-cpp-python",
    "llama.cpp": "llama.cpp",
    # LM Studio serves GGUF models through llama.cpp; vLLM's backends enforce more, so the
    # llama.cpp report can only over-warn there, never under-warn relative to the grammar.
    "lmstudio": "llama.cpp",
    "vllm": "llama.cpp",
}


@dataclass(frozen=True, kw_only=True)
class OpenAIServer(Server):
    """An OpenAI-compatible `/v1/chat/completions`: the schema goes in `response_format`, the
    dialect's way."""

    dialect: Dialect
    extra_body: Mapping[str, JsonValue] | None = None

    def _build(
        self,
        transcript: Transcript,
        settings: ModelSettings,
        tools: Sequence[ToolSpec],
        output: SentSchema | None,
    ) -> dict[str, JsonValue]:
        return openai_chat_body(
            model=self.model,
            transcript=transcript,
            settings=settings,
            response_format=None
            if output is None
            else openai_response_format(
                self.dialect, output.schema.name, output.schema.json_schema
            ),
            tools=tools,
            extra_body=self.extra_body,
        )

    @property
    def schema_path(self) -> tuple[str, ...]:
        """Inside `response_format`, where the dialect puts it."""
        if self.dialect == "llama-cpp-python":
            return ("response_format", "schema")
        return ("response_format", "json_schema", "schema")

    def _parse(self, answer: JsonValue) -> Reply:
        return parse_openai_chat(answer, self.url)

    def _decode(self, raw: Iterable[bytes]) -> Iterator[Chunk]:
        return openai_chunks(raw, self.url)

    def _stream_fields(self) -> dict[str, JsonValue]:
        # So the token counts come too (servers that ignore it, such as llama-cpp-python,
        # report no usage in a stream).
        return {"stream_options": {"include_usage": True}}


def openai_server(
    transport: Transport,
    *,
    base_url: str,
    model: str,
    dialect: Dialect,
    timeout: float,
    extra_body: Mapping[str, JsonValue] | None,
    decoder: Decoder | None,
) -> OpenAIServer:
    """An OpenAI-compatible server's `/v1/chat/completions`, `base_url` being the server root."""
    if dialect not in _DECODERS:
        raise ModelSetupError(
            f"unknown dialect {dialect!r}; choose one of {', '.join(sorted(_DECODERS))}",
            reason="dialect",
        )
    if extra_body:
        check_extra_body(extra_body)
    return OpenAIServer(
        transport=transport,
        url=f"{endpoint_root(base_url)}/v1/chat/completions",
        model=model,
        decoder=decoder or _DECODERS[dialect],
        timeout=timeout,
        dialect=dialect,
        extra_body=dict(extra_body) if extra_body else None,
    )


class OpenAICompatibleChatModel(ChatModelBase):
    """A `ChatModel` on an OpenAI-compatible `/v1/chat/completions`.

    Args:
        transport: The kernel transport that carries every request.
        base_url: The server root (the client appends `/v1/chat/completions`).
        model: The model name the server expects.
        dialect: How the server takes a schema (see `Dialect`).
        mode: `native` (the server's `tools`/`tool_calls`) or `structured-action`.
        extra_body: Engine-specific fields sent as given; they may not replace owned fields.
        decoder: The grammar converter to pre-flight against; derived from the dialect if None.
        max_attempts: Structured-action mode: total attempts per step, the first included.
        ids: Source of tool-call ids; without it ids derive from the request digest.
        strict: Refuse schemas the decoder would not fully enforce.
        timeout: Seconds allowed per request.
        limits: Bounds on a reply's nesting and its texts (default `DEFAULT_JSON_LIMITS`:
            depth 64, 1 MiB); past them a reply is a typed error, re-asked in
            structured-action mode.
        grammar_check: The decoder's own converter, run in-process by pre-flight (the CLI
            supplies llama-cpp-python's); without it pre-flight uses its keyword rules.
    """

    def __init__(
        self,
        transport: Transport,
        *,
        base_url: str,
        model: str = "local",
        dialect: Dialect,
        mode: ChatMode = "structured-action",
        extra_body: Mapping[str, JsonValue] | None = None,
        decoder: Decoder | None = None,
        max_attempts: int = 3,
        ids: Ids | None = None,
        strict: bool = False,
        timeout: float = 120.0,
        limits: JsonLimits | None = None,
        grammar_check: GrammarCheck | None = None,
    ) -> None:
        """Configure the model; nothing is sent until `request`."""
        super().__init__(
            openai_server(
                transport,
                base_url=base_url,
                model=model,
                dialect=dialect,
                timeout=timeout,
                extra_body=extra_body,
                decoder=decoder,
            ),
            mode=mode,
            max_attempts=max_attempts,
            ids=ids,
            strict=strict,
            limits=limits,
            grammar_check=grammar_check,
        )

    @classmethod
    def opened(cls, transport: Transport, target: Target) -> OpenAICompatibleChatModel:
        """The model `open_model` makes for an OpenAI-compatible row (a trailing `/v1` of the
        URL dropped: this client appends `/v1/chat/completions` to the server root)."""
        return cls(
            transport,
            base_url=target.url.removesuffix("/").removesuffix("/v1"),
            model=target.model,
            dialect=target.dialect,
            mode=target.mode,
            ids=target.ids,
            timeout=target.timeout,
            # llama-cpp-python's own converter decides what its server enforces (ADR 0033).
            grammar_check=target.grammar_check if target.dialect == "llama-cpp-python" else None,
        )
