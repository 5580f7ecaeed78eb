"""The provider table and `open_model`, which turns a model's name into a `ChatModel`.

A name is one of::

    embedded                      the bundled SmolLM2 on llama-cpp-python, started here
    http://host:8080/v1           an OpenAI-compatible server at that URL (`/v1` optional)
    openai:gpt-4o-mini            PROVIDER:MODEL, the provider's default URL
    vllm:NAME@http://host:8000    PROVIDER:MODEL@URL, another URL for the provider

The same table turns a run spec's string (`model: openai:gpt-4o-mini`) into its long form
(`PROVIDERS.spec_fields`) and a spec's `kind` (its wire format) into its client
(`PROVIDERS.chat`), so the spec, `open_model` and `twinflow models` read one table. Adding a
provider is a module with its chat model and one row of `PROVIDERS`. Nothing here touches the
network at import: `open_model` opens the transport (the kernel's, which reads the
key once from the row's variable and scrubs it from its errors) and, for `embedded`, starts
the server; the returned model's `close()` stops both.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Literal, Protocol, Self

from pydantic import JsonValue

from twinflow._base._failures import FailureClass
from twinflow._base._suggest import did_you_mean
from twinflow.kernel import HttpTransport, SystemIds
from twinflow.kernel._credentials import KeyHeader
from twinflow.models._anthropic import DEFAULT_ANTHROPIC_URL, AnthropicChatModel
from twinflow.models._embedded import embedded_server
from twinflow.models._errors import ModelSetupError
from twinflow.models._fallback import FallbackChatModel
from twinflow.models._gemini import DEFAULT_GEMINI_URL, GeminiChatModel
from twinflow.models._grammar import llama_cpp_grammar_check
from twinflow.models._ollama import DEFAULT_OLLAMA_URL, OllamaChatModel
from twinflow.models._openai import OpenAICompatibleChatModel
from twinflow.models._openai_wire import Dialect
from twinflow.models._preflight import GrammarCheck
from twinflow.models._servers import ChatMode, OnChunk, Target
from twinflow.vocab import ChatModel, ModelRequest, ModelResponse

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


Wire = Literal["openai-compatible", "ollama", "anthropic", "gemini"]
"""A wire format: a run spec's `model.kind`; one client speaks each."""


class Client(Protocol):
    """A provider's chat-model class, as the table uses it."""

    key_header: KeyHeader
    """The header its API takes a key in."""
    required_headers: Mapping[str, str]
    """Headers every request needs besides the key."""
    modes: tuple[ChatMode, ...]
    """The modes it speaks."""
    default_mode: ChatMode
    """A run spec's mode when it names none."""

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
    wire: Wire
    """The wire format it speaks (a run spec's `model.kind`)."""
    client: Client
    """The chat-model class that speaks the provider's wire format."""
    mode: ChatMode
    """How tool calls and structured output travel by default (`native`: the server's own
    tool calling and schema; `structured-action`: every reply constrained to an action)."""
    structured: str
    """How an output schema travels (`twinflow models` shows it)."""
    dialect: Dialect = "llama.cpp"
    """How an OpenAI-compatible server takes a schema."""

    @property
    def native_tools(self) -> bool:
        """Whether its client can use the server's own tool calling."""
        return "native" in self.client.modes

    @property
    def streaming(self) -> bool:
        """Whether its client streams replies."""
        return callable(getattr(self.client, "stream", None))


_OPENAI = OpenAICompatibleChatModel
_OAI: Wire = "openai-compatible"
_FORMAT = "response_format json_schema, decoder-enforced"


class ProviderTable(dict[str, Provider]):
    """The provider rows by name, and what a run spec reads from them: a model string's long
    form (`spec_fields`), the client of a wire format (`client`) and its chat model (`chat`)."""

    def spec_fields(self, name: str) -> dict[str, JsonValue]:
        """A run spec's model string as the long form's keys (`kind`, `url`, `name`, `mode`,
        `dialect`, `api_key_env`): the row's defaults, and the model and URL it names.

        Raises:
            ModelSetupError: An unknown provider or a malformed string (reason `name`).
        """
        if name == EMBEDDED:
            return {"url": EMBEDDED}
        row, model, url = _parse(name)
        fields: dict[str, JsonValue] = {
            "kind": row.wire,
            "url": url,
            "name": model,
            "mode": row.mode,
            "dialect": row.dialect,
        }
        if row.key_env is not None:
            fields["api_key_env"] = row.key_env
        return fields

    def client(self, wire: str) -> Client:
        """The chat-model class speaking `wire` (a run spec's `model.kind`).

        Raises:
            ModelSetupError: No row speaks `wire` (reason `name`).
        """
        for row in self.values():
            if row.wire == wire:
                return row.client
        raise ModelSetupError(f"no provider speaks the {wire!r} wire format", reason="name")

    def chat(
        self,
        wire: str,
        transport: Transport,
        *,
        model: str,
        url: str,
        dialect: Dialect,
        mode: ChatMode,
        ids: Ids,
        timeout: float,
        max_tokens: int | None = None,
        grammar_check: GrammarCheck | None = None,
    ) -> OpenedModel:
        """The chat model speaking `wire` to `model` at `url`, on `transport` (a run spec's
        model: `grammar_check` is a llama-cpp-python server's own converter)."""
        target = Target(
            model=model,
            url=url,
            dialect=dialect,
            mode=mode,
            ids=ids,
            timeout=timeout,
            max_tokens=max_tokens,
            grammar_check=grammar_check,
        )
        return self.client(wire).opened(transport, target)

    @staticmethod
    def fallback(
        models: Sequence[tuple[str, ChatModel]], fallback_on: Sequence[FailureClass]
    ) -> FallbackChatModel:
        """The labelled `models` asked in order, moving on for a class in `fallback_on` (a run
        spec's `model.fallbacks`); each switch is kept for the agent to record."""
        return FallbackChatModel(models, fallback_on)


PROVIDERS = ProviderTable(
    (row.name, row)
    for row in (
        Provider(
            "openai", "https://api.openai.com", "OPENAI_API_KEY", _OAI, _OPENAI, "native", _FORMAT
        ),
        Provider(
            "anthropic",
            DEFAULT_ANTHROPIC_URL,
            "ANTHROPIC_API_KEY",
            "anthropic",
            AnthropicChatModel,
            "native",
            "schema in the system prompt, validated and re-asked",
        ),
        Provider(
            "gemini",
            DEFAULT_GEMINI_URL,
            "GEMINI_API_KEY",
            "gemini",
            GeminiChatModel,
            "native",
            "responseSchema (Gemini's schema subset), validated and re-asked",
        ),
        Provider(
            "ollama",
            DEFAULT_OLLAMA_URL,
            None,
            "ollama",
            OllamaChatModel,
            "structured-action",
            "format, decoder-enforced",
        ),
        Provider("vllm", None, None, _OAI, _OPENAI, "structured-action", _FORMAT, "vllm"),
        Provider("llama.cpp", None, None, _OAI, _OPENAI, "structured-action", _FORMAT, "llama.cpp"),
        Provider("lmstudio", None, None, _OAI, _OPENAI, "structured-action", _FORMAT, "lmstudio"),
    )
)
"""The providers `open_model`, a run spec's `model:` and `twinflow models` know, by the
prefix of a model name."""

_URL = Provider("url", None, None, _OAI, _OPENAI, "structured-action", _FORMAT, "llama-cpp-python")
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
    if colon and row is None and prefix:
        raise ModelSetupError(
            f"model {name!r}: unknown provider {prefix!r}{did_you_mean(prefix, PROVIDERS)} "
            f"(`twinflow models` lists them: {', '.join(PROVIDERS)})",
            reason="name",
        )
    if not colon or row is None or not rest or rest.startswith("@"):
        known = ", ".join(f"{p}:MODEL" for p in PROVIDERS)
        raise ModelSetupError(
            f"model {name!r}: expected {EMBEDDED!r}, an http(s) URL, or one of {known} "
            "(PROVIDER:MODEL@URL for another URL)",
            reason="name",
        )
    model, at, url = rest.partition("@")
    if at and not url.startswith(("http://", "https://")):
        raise ModelSetupError(
            f"model {name!r}: after @ comes the server's http(s) URL, got {url!r}",
            reason="name",
        )
    if not at and row.url is None:
        raise ModelSetupError(
            f"model {name!r}: {prefix} has no default URL; name the server, e.g. "
            f"{f'{prefix}:{model}@http://127.0.0.1:8000'!r}",
            reason="name",
        )
    return row, model, url if at else str(row.url)


def open_model(
    name: str | Sequence[str],
    *,
    mode: ChatMode | None = None,
    ids: Ids | None = None,
    timeout: float = 120.0,
    log_dir: Path | None = None,
    on_progress: Callable[[str], None] | None = None,
) -> OpenedModel:
    """The chat model `name` names, on a new kernel transport (see the module docstring).

    Args:
        name: `embedded`, an http(s) URL, or `PROVIDER:MODEL[@URL]` (a `PROVIDERS` row); or a
            list of them, asked in order when one is busy or away (a fallback list: each switch
            is recorded by the agent as a `model_fell_back` event).
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
    if not isinstance(name, str):
        return _fallbacks(
            list(name),
            mode=mode,
            ids=ids,
            timeout=timeout,
            log_dir=log_dir,
            on_progress=on_progress,
        )
    stack = contextlib.ExitStack()
    try:
        if name == EMBEDDED:
            url = stack.enter_context(embedded_server(log_dir, on_progress=on_progress))
            row, model = _URL, "local"
        else:
            row, model, url = _parse(name)
        chat = _connect(stack, row, model, url, mode=mode, ids=ids, timeout=timeout)
    except BaseException:
        stack.close()
        raise
    chat.own(stack)
    return chat


def _connect(
    stack: contextlib.ExitStack,
    row: Provider,
    model: str,
    url: str,
    *,
    mode: ChatMode | None,
    ids: Ids | None,
    timeout: float,
) -> OpenedModel:
    """The row's chat model for ``model`` at ``url``, on a new transport entered on ``stack``."""
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
        grammar_check=(llama_cpp_grammar_check() if row.dialect == "llama-cpp-python" else None),
    )
    return row.client.opened(transport, target)


def _fallbacks(
    names: list[str],
    *,
    mode: ChatMode | None,
    ids: Ids | None,
    timeout: float,
    log_dir: Path | None,
    on_progress: Callable[[str], None] | None,
) -> OpenedModel:
    """`open_model` of a list: each model opened, asked in order (`FallbackChatModel`)."""
    chain: list[tuple[str, OpenedModel]] = []
    try:
        for one in names:
            model = open_model(
                one, mode=mode, ids=ids, timeout=timeout, log_dir=log_dir, on_progress=on_progress
            )
            chain.append((one, model))
        return FallbackChatModel(chain)
    except BaseException:
        for _, model in chain:
            model.close()
        raise
