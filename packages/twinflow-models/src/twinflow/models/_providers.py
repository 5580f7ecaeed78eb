"""The provider table and `open_model`, which turns a model's name into a `ChatModel`.

A name is one of::

    embedded                      the bundled SmolLM2 on llama-cpp-python, started here
    http://host:8080/v1           an OpenAI-compatible server at that URL (`/v1` optional)
    openai:gpt-4o-mini            PROVIDER:MODEL, the provider's default URL
    vllm:NAME@http://host:8000    PROVIDER:MODEL@URL, another URL for the provider

Adding a provider is a module with its chat model and one row of `PROVIDERS`. Nothing here
touches the network at import: `open_model` opens the transport (the kernel's, which reads the
key once from the row's variable and scrubs it from its errors) and, for `embedded`, starts
the server; the returned model's `close()` stops both.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Protocol, Self

from twinflow.kernel import HttpTransport, KeyHeader, SystemIds
from twinflow.models._anthropic import DEFAULT_ANTHROPIC_URL, AnthropicChatModel
from twinflow.models._embedded import embedded_server
from twinflow.models._errors import ModelSetupError
from twinflow.models._ollama import DEFAULT_OLLAMA_URL, OllamaChatModel
from twinflow.models._openai import OpenAICompatibleChatModel
from twinflow.models._openai_wire import Dialect
from twinflow.models._servers import ChatMode, OnChunk, Target
from twinflow.vocab import ModelRequest, ModelResponse

if TYPE_CHECKING:
    from twinflow.kernel import Ids, Transport


class OpenedModel(Protocol):
    """What `open_model` returns: a `ChatModel` that streams and closes what it was given."""

    def request(self, request: ModelRequest) -> ModelResponse:
        """Send one request and return the model's reply."""
        ...

    def stream(self, request: ModelRequest, on_chunk: OnChunk) -> ModelResponse:
        """Send one request streamed, showing each chunk to `on_chunk`."""
        ...

    def own(self, resource: AbstractContextManager[object]) -> None:
        """Close `resource` when the model closes."""
        ...

    def close(self) -> None:
        """Release what was opened for the model."""
        ...

    def __enter__(self) -> Self:
        """Use the model in a `with` block."""
        ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Close the model."""
        ...


class Client(Protocol):
    """A provider's chat-model class, as the table uses it."""

    key_header: KeyHeader
    """The header its API takes a key in."""
    required_headers: Mapping[str, str]
    """Headers every request needs besides the key."""

    def opened(self, transport: Transport, target: Target) -> OpenedModel:
        """The model for `target`, speaking through `transport`."""
        ...


@dataclass(frozen=True)
class Provider:
    """One row of the provider table."""

    name: str
    """The prefix of a model name (`openai` in `openai:gpt-4o-mini`)."""
    url: str | None
    """The server root when the name gives none (None: the name must give one)."""
    key_env: str | None
    """The environment variable holding the API key (None: no key is sent)."""
    client: Client
    """The chat-model class that speaks the provider's wire format."""
    mode: ChatMode
    """How tool calls and structured output travel by default (`native`: the server's own
    tool calling and schema; `structured-action`: every reply constrained to an action)."""
    dialect: Dialect = "llama.cpp"
    """How an OpenAI-compatible server takes a schema."""


_OPENAI = OpenAICompatibleChatModel
PROVIDERS: dict[str, Provider] = {
    row.name: row
    for row in (
        Provider("openai", "https://api.openai.com", "OPENAI_API_KEY", _OPENAI, "native"),
        Provider(
            "anthropic", DEFAULT_ANTHROPIC_URL, "ANTHROPIC_API_KEY", AnthropicChatModel, "native"
        ),
        Provider("ollama", DEFAULT_OLLAMA_URL, None, OllamaChatModel, "structured-action"),
        Provider("vllm", None, None, _OPENAI, "structured-action", "vllm"),
        Provider("llama.cpp", None, None, _OPENAI, "structured-action", "llama.cpp"),
        Provider("lmstudio", None, None, _OPENAI, "structured-action", "lmstudio"),
    )
}
"""The providers `open_model` knows, by the prefix of a model name."""

_URL = Provider("url", None, None, _OPENAI, "structured-action", "llama-cpp-python")
"""A bare URL: an OpenAI-compatible server, taking a schema as llama-cpp-python does (the
embedded server's, and a run spec's default)."""

EMBEDDED = "embedded"
"""The name of the bundled SmolLM2 model, started on a free loopback port."""


def _parse(name: str) -> tuple[Provider, str, str]:
    """The row, the model name and the URL a model name means."""
    if name.startswith(("http://", "https://")):
        return _URL, "local", name
    prefix, colon, rest = name.partition(":")
    row = PROVIDERS.get(prefix)
    if not colon or row is None or not rest:
        known = ", ".join(f"{p}:MODEL" for p in PROVIDERS)
        raise ModelSetupError(
            f"model {name!r}: expected {EMBEDDED!r}, an http(s) URL, or one of {known} "
            "(PROVIDER:MODEL@URL for another URL)",
            reason="name",
        )
    model, at, url = rest.partition("@")
    if not at and row.url is None:
        raise ModelSetupError(
            f"model {name!r}: {prefix} has no default URL; name the server, e.g. "
            f"{prefix}:{model}@http://127.0.0.1:8000",
            reason="name",
        )
    return row, model, url if at else str(row.url)


def open_model(
    name: str,
    *,
    mode: ChatMode | None = None,
    ids: Ids | None = None,
    timeout: float = 120.0,
    log_dir: Path | None = None,
    on_progress: Callable[[str], None] | None = None,
) -> OpenedModel:
    """The chat model `name` names, on a new kernel transport (see the module docstring).

    Args:
        name: `embedded`, an http(s) URL, or `PROVIDER:MODEL[@URL]` (a `PROVIDERS` row).
        mode: `native` or `structured-action`; the provider's default if None (Anthropic
            speaks `native` only).
        ids: Source of tool-call ids (`SystemIds()` if None).
        timeout: Seconds allowed per request.
        log_dir: Where the embedded server logs (a temporary directory if None).
        on_progress: Told when the embedded model starts loading (standard error if None).

    Returns:
        The model (an `OpenAICompatibleChatModel`, `OllamaChatModel` or `AnthropicChatModel`);
        its `close()` closes the transport and stops the embedded server.

    Raises:
        ModelSetupError: An unknown or malformed name, a mode the provider does not speak, or
            the embedded extra is missing.
        UserError: The row's key variable is unset.
        LaunchError: The embedded server did not start in time.
    """
    stack = contextlib.ExitStack()
    try:
        if name == EMBEDDED:
            url = stack.enter_context(embedded_server(log_dir, on_progress=on_progress))
            row, model = _URL, "local"
        else:
            row, model, url = _parse(name)
        transport = stack.enter_context(
            HttpTransport(
                api_key_env=row.key_env,
                key_header=row.client.key_header,
                headers=row.client.required_headers,
            )
        )
        target = Target(
            model=model,
            url=url,
            dialect=row.dialect,
            mode=mode or row.mode,
            ids=ids or SystemIds(),
            timeout=timeout,
        )
        chat = row.client.opened(transport, target)
    except BaseException:
        stack.close()
        raise
    chat.own(stack)
    return chat
