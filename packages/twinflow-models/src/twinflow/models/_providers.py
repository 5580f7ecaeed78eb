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
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from twinflow.kernel import HttpTransport, SystemIds
from twinflow.models._anthropic import DEFAULT_ANTHROPIC_URL, AnthropicChatModel
from twinflow.models._chat import ChatMode
from twinflow.models._embedded import embedded_server
from twinflow.models._errors import ModelSetupError
from twinflow.models._grammar import llama_cpp_grammar_check
from twinflow.models._ollama import DEFAULT_OLLAMA_URL, OllamaChatModel
from twinflow.models._openai import OpenAICompatibleChatModel
from twinflow.models._openai_wire import Dialect

if TYPE_CHECKING:
    from twinflow.kernel import Ids, Transport

Wire = Literal["openai", "ollama", "anthropic"]

OpenedModel = OpenAICompatibleChatModel | OllamaChatModel | AnthropicChatModel
"""What `open_model` returns: a `ChatModel` that streams and closes."""


@dataclass(frozen=True)
class Provider:
    """One row of the provider table."""

    name: str
    """The prefix of a model name (`openai` in `openai:gpt-4o-mini`)."""
    url: str | None
    """The server root when the name gives none (None: the name must give one)."""
    key_env: str | None
    """The environment variable holding the API key (None: no key is sent)."""
    wire: Wire
    """The wire format: which chat model speaks to the server."""
    mode: ChatMode
    """How tool calls and structured output travel by default (`native`: the server's own
    tool calling and schema; `structured-action`: every reply constrained to an action)."""
    dialect: Dialect = "llama.cpp"
    """How an OpenAI-compatible server takes a schema."""


PROVIDERS: dict[str, Provider] = {
    row.name: row
    for row in (
        Provider("openai", "https://api.openai.com", "OPENAI_API_KEY", "openai", "native"),
        Provider("anthropic", DEFAULT_ANTHROPIC_URL, "ANTHROPIC_API_KEY", "anthropic", "native"),
        Provider("ollama", DEFAULT_OLLAMA_URL, None, "ollama", "structured-action"),
        Provider("vllm", None, None, "openai", "structured-action", "vllm"),
        Provider("llama.cpp", None, None, "openai", "structured-action", "llama.cpp"),
        Provider("lmstudio", None, None, "openai", "structured-action", "lmstudio"),
    )
}
"""The providers `open_model` knows, by the prefix of a model name."""

_URL = Provider("url", None, None, "openai", "structured-action", "llama-cpp-python")
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


def _client(
    row: Provider,
    model: str,
    url: str,
    transport: Transport,
    *,
    ids: Ids,
    mode: ChatMode | None,
    timeout: float,
) -> OpenedModel:
    if row.wire == "anthropic":
        # Anthropic issues its own tool-call ids (a result must name the one it issued).
        return AnthropicChatModel(transport, model=model, base_url=url, timeout=timeout)
    if row.wire == "ollama":
        return OllamaChatModel(
            transport, model=model, base_url=url, mode=mode or row.mode, ids=ids, timeout=timeout
        )
    return OpenAICompatibleChatModel(
        transport,
        base_url=url.removesuffix("/").removesuffix("/v1"),
        model=model,
        dialect=row.dialect,
        mode=mode or row.mode,
        ids=ids,
        timeout=timeout,
        # llama-cpp-python's own converter decides what its server enforces (ADR 0033).
        grammar_check=llama_cpp_grammar_check() if row.dialect == "llama-cpp-python" else None,
    )


_CLIENTS: dict[Wire, type[OpenedModel]] = {
    "openai": OpenAICompatibleChatModel,
    "ollama": OllamaChatModel,
    "anthropic": AnthropicChatModel,
}


def open_model(
    name: str,
    *,
    mode: ChatMode | None = None,
    ids: Ids | None = None,
    timeout: float = 120.0,
    log_dir: Path | None = None,
    on_progress: Callable[[str], None] = print,
) -> OpenedModel:
    """The chat model `name` names, on a new kernel transport (see the module docstring).

    Args:
        name: `embedded`, an http(s) URL, or `PROVIDER:MODEL[@URL]` (a `PROVIDERS` row).
        mode: `native` or `structured-action`; the provider's default if None (Anthropic
            speaks `native` only).
        ids: Source of tool-call ids (`SystemIds()` if None).
        timeout: Seconds allowed per request.
        log_dir: Where the embedded server logs (a temporary directory if None).
        on_progress: Told when the embedded model starts loading.

    Returns:
        The model; its `close()` closes the transport and stops the embedded server.

    Raises:
        ModelSetupError: An unknown or malformed name, or the embedded extra is missing.
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
        client = _CLIENTS[row.wire]
        transport = stack.enter_context(
            HttpTransport(
                api_key_env=row.key_env,
                key_header=client.key_header,
                headers=client.required_headers,
            )
        )
        chat = _client(
            row, model, url, transport, ids=ids or SystemIds(), mode=mode, timeout=timeout
        )
    except BaseException:
        stack.close()
        raise
    chat._owned.enter_context(stack)  # closed by chat.close()
    return chat
