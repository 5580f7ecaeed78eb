"""`AnthropicChatModel`: a `ChatModel` (and `StreamingChatModel`) on Anthropic's Messages API.

Messages, the system prompt, tools and tool results (with `is_error`) are translated by
`_anthropic_wire`, the one translation of that format in twinflow;
a streamed reply is decoded into vocab chunks and built by vocab's one assembler. A
non-streamed reply goes through the same assembler too (one chunk per part), so both read as
the same value: adjacent text blocks join into one text part either way.

The API key and the `anthropic-version` header travel on the transport, never in a body, so
no recording or trace holds them. Where they go is this client's (`key_header`,
`required_headers`); the transport reads the key once from the variable named and scrubs it
from its errors::

    transport = HttpTransport(
        allow_network=True,
        api_key_env="ANTHROPIC_API_KEY",
        key_header=AnthropicChatModel.key_header,
        headers=AnthropicChatModel.required_headers,
    )
    model = AnthropicChatModel(transport, model="claude-sonnet-4-5")

Anthropic's tool-call ids are kept (a tool result must name the id the API issued). Messages
has no decoder-side schema constraint here: an output schema is stated in the system prompt,
and the answer is validated (and re-asked) by the structured-output adapter, as always.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from contextlib import AbstractContextManager
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import JsonValue

from twinflow.kernel._credentials import KeyHeader
from twinflow.kernel._ports import Closing
from twinflow.models._anthropic_wire import (
    anthropic_chunks,
    anthropic_finish,
    from_anthropic,
    to_anthropic,
    to_anthropic_tools,
)
from twinflow.models._errors import MalformedResponseError, ModelSetupError
from twinflow.models._servers import ChatMode, OnChunk, Target, endpoint_root, stream_reply
from twinflow.trace import UserError
from twinflow.vocab import (
    Message,
    ModelRequest,
    ModelResponse,
    Transcript,
    Usage,
    WireFormatError,
    assemble,
)
from twinflow.vocab import value_bytes as canonical_bytes
from twinflow.vocab._stream import response_chunks

if TYPE_CHECKING:
    from twinflow.kernel import Transport


DEFAULT_ANTHROPIC_URL = "https://api.anthropic.com"
"""The Messages API's root; the client appends `/v1/messages`."""

ANTHROPIC_VERSION = "2023-06-01"
"""The `anthropic-version` header value this client's wire format follows."""


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


class AnthropicChatModel(Closing):
    """A chat model on `POST /v1/messages`, plain or streamed.

    Args:
        transport: The kernel transport; it carries `x-api-key` and `anthropic-version`.
        model: The model name, e.g. `claude-sonnet-4-5`.
        base_url: The API root (a loopback server in tests, a gateway, or the real API).
        max_tokens: `max_tokens` when the request's settings name none (Messages requires it).
        timeout: Seconds allowed per request.
    """

    key_header: ClassVar[KeyHeader] = KeyHeader("x-api-key")
    """The header the Messages API takes its key in, for `HttpTransport(key_header=...)`:
    ``x-api-key: <key>``, not a bearer token."""
    required_headers: ClassVar[Mapping[str, str]] = MappingProxyType(
        {"anthropic-version": ANTHROPIC_VERSION}
    )
    """Headers every request needs besides the key: the API version this client speaks."""
    modes: ClassVar[tuple[ChatMode, ...]] = ("native",)
    """Messages has its own tool calling and no decoder-side schema for an action union."""
    default_mode: ClassVar[ChatMode] = "native"
    """The one it speaks."""

    def __init__(
        self,
        transport: Transport,
        *,
        model: str,
        base_url: str = DEFAULT_ANTHROPIC_URL,
        max_tokens: int = 1024,
        timeout: float = 120.0,
    ) -> None:
        """Configure the model; nothing is sent until `request` or `stream`."""
        if max_tokens < 1:
            raise UserError(f"max_tokens must be at least 1, got {max_tokens}")
        self._owned = contextlib.ExitStack()
        self._transport = transport
        self._model = model
        self._url = f"{endpoint_root(base_url)}/v1/messages"
        self._max_tokens = max_tokens
        self._timeout = timeout

    @classmethod
    def opened(cls, transport: Transport, target: Target) -> AnthropicChatModel:
        """The model `open_model` makes for an Anthropic row (Messages speaks native mode only;
        Anthropic issues its own tool-call ids, which a result must name)."""
        if target.mode != "native":
            raise ModelSetupError(
                f"anthropic:{target.model} speaks native mode only, not {target.mode!r}",
                reason="mode",
            )
        return cls(
            transport,
            model=target.model,
            base_url=target.url,
            max_tokens=target.max_tokens or 1024,
            timeout=target.timeout,
        )

    def body(self, request: ModelRequest) -> dict[str, JsonValue]:
        """The Messages request body for `request` (without `stream`).

        Raises:
            UserError: The transcript cannot be sent to Messages (a system message after the
                first message, media Anthropic cannot carry).
        """
        try:
            translated: dict[str, Any] = to_anthropic(request.transcript)
        except ValueError as exc:
            raise UserError(f"this conversation cannot be sent to Anthropic: {exc}") from None
        settings = request.settings
        body: dict[str, Any] = {
            "model": self._model,
            "max_tokens": settings.max_tokens or self._max_tokens,
            **translated,
        }
        if request.output_schema is not None:
            schema = canonical_bytes(request.output_schema.json_schema).decode("utf-8")
            instruction = f"Reply with one JSON object that satisfies this JSON Schema: {schema}"
            system = body.get("system")
            if system is None:
                body["system"] = instruction
            elif isinstance(system, str):
                body["system"] = f"{system}\n\n{instruction}"
            else:
                body["system"] = [*system, {"type": "text", "text": instruction}]
        if settings.temperature is not None:
            body["temperature"] = settings.temperature
        if request.tools:
            body["tools"] = to_anthropic_tools(request.tools)
        return body

    def request(self, request: ModelRequest) -> ModelResponse:
        """Send one request and return the assistant's reply.

        Raises:
            TransportError: Any transport failure (401 for a missing or wrong key), unretried.
            MalformedResponseError: The answer is not a Messages response.
        """
        answer = self._transport.post_json(self._url, self.body(request), timeout=self._timeout)
        return self._parse(answer)

    def stream(self, request: ModelRequest, on_chunk: OnChunk) -> ModelResponse:
        """Send one request streamed; `on_chunk` sees each raw chunk as it arrives.

        Returns exactly what `request` returns for the same reply.

        Raises:
            UserError: The transport cannot stream.
            TransportError: Any transport failure, unretried.
            MalformedResponseError: The stream is not a Messages event stream, or was cut.
        """
        return stream_reply(
            self._transport,
            self._url,
            {**self.body(request), "stream": True},
            self._timeout,
            lambda raw: anthropic_chunks(raw, self._url),
            on_chunk,
        )

    def own(self, resource: AbstractContextManager[object]) -> None:
        """Close `resource` when this model closes (what `open_model` opened for it)."""
        self._owned.enter_context(resource)

    def close(self) -> None:
        """Release what `open_model` opened for this model (its transport, the embedded
        server); a model built on a caller's transport holds nothing to release."""
        self._owned.close()

    def _parse(self, answer: JsonValue) -> ModelResponse:
        if not isinstance(answer, dict):
            raise MalformedResponseError("expected a Messages object", url=self._url, path="")
        content = answer.get("content")
        try:
            transcript: Transcript = from_anthropic(
                {"messages": [{"role": "assistant", "content": content}]}
            )
            (message,) = transcript.messages
        except WireFormatError as exc:
            path = exc.path.removeprefix("/messages/0")
            raise MalformedResponseError(
                str(exc).removesuffix(f" (at {exc.path or '/'})"), url=self._url, path=path
            ) from None
        except ValueError:
            raise MalformedResponseError(
                "expected one assistant message's content", url=self._url, path="/content"
            ) from None
        usage = answer.get("usage")
        usage_d = usage if isinstance(usage, dict) else {}
        model = answer.get("model")
        response = ModelResponse(
            message=Message(role="assistant", parts=message.parts),
            usage=Usage(
                input_tokens=_count(usage_d.get("input_tokens")),
                output_tokens=_count(usage_d.get("output_tokens")),
            ),
            finish_reason=anthropic_finish(answer.get("stop_reason"), bool(message.tool_calls)),
            model_name=model if isinstance(model, str) else "",
        )
        try:
            # Through the one assembler, so a plain reply reads as its streamed form does.
            return assemble(response_chunks(response))
        except (UserError, WireFormatError) as exc:
            raise MalformedResponseError(str(exc), url=self._url, path="/content") from None
