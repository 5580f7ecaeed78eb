"""A run spec's ``model:``: `ModelSpec`, where the model is served and how to speak to it.

In a spec it is the long form's keys, one model string read through the models package's
provider table, or a list of them (the first model and its fallbacks).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, field_validator, model_validator

from twinflow._base._failures import DEFAULT_FALLBACK_ON, FailureClass
from twinflow.agent._code_record import SpecValue
from twinflow.agent._spec_guards import EMBEDDED, check_headers
from twinflow.kernel._credentials import check_endpoint_url
from twinflow.trace import UserError
from twinflow.vocab import ModelSettings

if TYPE_CHECKING:
    from twinflow.kernel import HttpTransport, Ids, Transport
    from twinflow.models._preflight import GrammarCheck
    from twinflow.vocab import ChatModel

__all__ = ["ModelSpec"]


_MODEL_STRING = {
    "type": "string",
    "description": "PROVIDER:MODEL, PROVIDER:MODEL@URL, embedded, or a server's URL",
}


def model_string_schema(schema: dict[str, Any]) -> None:
    """The published schema takes ``model`` as its keys, one model string, or a list of them
    (the first model and its fallbacks)."""
    keys = {name: schema.pop(name) for name in ("$ref", "allOf") if name in schema}
    one = [keys, _MODEL_STRING]
    schema["anyOf"] = [*one, {"type": "array", "minItems": 1, "items": {"anyOf": one}}]


def _fallbacks_schema(schema: dict[str, Any]) -> None:
    """Each fallback is a model's keys or a model string."""
    items = schema.get("items")
    if isinstance(items, dict) and "$ref" in items:
        schema["items"] = {"anyOf": [items, _MODEL_STRING]}


class ModelSpec(SpecValue):
    """Where the model is served and how to speak to it.

    In a spec, ``model:`` may also be one string, read through the models package's provider
    table into these keys: ``openai:gpt-4o-mini``, ``anthropic:claude-sonnet-4-5``,
    ``ollama:qwen2.5:0.5b``, ``vllm:NAME@http://host:8000`` (``PROVIDER:MODEL@URL`` for another
    server), ``embedded`` or a server's URL (`twinflow models` lists the providers)."""

    kind: Literal["openai-compatible", "ollama", "anthropic", "gemini"] = "openai-compatible"
    """The server's API: OpenAI chat-completions, Ollama's /api/chat, Anthropic's Messages, or
    Gemini's generateContent."""
    url: str
    """Base URL of the server (``http://127.0.0.1:8080``, ``http://127.0.0.1:11434``,
    ``https://api.anthropic.com``), or ``embedded`` to start the bundled SmolLM2-135M under
    llama-cpp-python for the run."""
    dialect: Literal["llama-cpp-python", "llama.cpp", "vllm", "lmstudio"] = "llama-cpp-python"
    """How structured output is requested from an OpenAI-compatible server."""
    name: str = "local"
    """The model name sent to the server."""
    mode: Literal["structured-action", "native"] = "structured-action"
    """How tool calls are obtained: constrained decoding of an action union, or native tool
    calling (the only mode of ``kind: anthropic``, and its default)."""
    temperature: float = 0.0
    """Sampling temperature; 0 is the reproducible choice."""
    max_tokens: int = Field(default=256, ge=1)
    """Most tokens one reply may take. Grammar-constrained decoding lets a small model run on
    inside a JSON string until the context is full; this bound stops it (the reply then fails
    validation and is re-asked or recorded as invalid, instead of taking minutes)."""
    timeout: float = Field(default=120.0, gt=0)
    """Seconds to wait for one model response."""
    api_key_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    """The environment variable holding the server's API key, sent in the header the ``kind``'s
    API takes it in (``Authorization: Bearer``; ``x-api-key`` for anthropic). The spec names the
    variable, never the key; a key in ``url`` or ``headers`` is refused."""
    headers: dict[str, str] = Field(default_factory=dict, max_length=64)
    """Extra request headers (a gateway's, ``anthropic-beta``, an ``anthropic-version`` other than
    the client's). They are copied into the run directory with the spec: never a key."""
    fallbacks: tuple[ModelSpec, ...] = Field(
        default=(),
        max_length=8,
        exclude_if=lambda value: not value,
        json_schema_extra=_fallbacks_schema,
    )
    """Models asked in turn when this one fails for a class in ``fallback_on`` (each a model
    string or these keys; ``model: [openai:gpt-4o-mini, anthropic:claude-sonnet-4-5]`` is the
    first with the rest as its fallbacks). Each switch is a ``model_fell_back`` event and
    ``model_responded`` names the model that answered, so replay serves the same switches."""
    fallback_on: tuple[FailureClass, ...] = Field(
        default=DEFAULT_FALLBACK_ON, exclude_if=lambda value: value == DEFAULT_FALLBACK_ON
    )
    """The failure classes that move on to the next model: ``rate_limited`` (429),
    ``overloaded`` (503, 529), ``server_error`` (another 5xx), ``connect``, ``timeout``,
    ``malformed`` (an answer not in the wire format), ``refused`` (a safety block)."""

    def transport(self, connections: int = 1) -> HttpTransport:
        """The real transport for this model: the API key (``api_key_env``) in the header the
        kind's client names (bearer, or Anthropic's ``x-api-key``), with the headers that
        client requires and then the spec's own; it keeps up to ``connections`` idle
        connections to the server (as many as requests in flight, for many runs at once).

        Raises:
            UserError: ``api_key_env`` names an unset variable.
        """
        from twinflow.agent._connect import model_transport

        return model_transport(self, connections)

    def chat_model(
        self, transport: Transport, ids: Ids, grammar_check: GrammarCheck | None = None
    ) -> ChatModel:
        """The models package's client for this model, speaking through ``transport``.

        ``grammar_check`` is the decoder-side schema check of a ``llama-cpp-python`` server
        (pre-flight's; ignored for other dialects).
        """
        from twinflow.agent._connect import model_chat

        return model_chat(self, transport, ids, grammar_check)

    def settings(self, *, seed: int = 0) -> ModelSettings:
        """The settings every request to this model carries (an eval trial's ``seed``)."""
        return ModelSettings(temperature=self.temperature, max_tokens=self.max_tokens, seed=seed)

    def identity(self) -> str:
        """The model as a run records it: the embedded model by its file's name and sha256, a
        server by its endpoint (without credentials) and the model name sent to it."""
        from twinflow.agent._connect import model_identity

        return model_identity(self)

    def serving(
        self, log_dir: Path, on_progress: Callable[[str], None]
    ) -> contextlib.AbstractContextManager[str]:
        """The server's base URL for a ``with`` block: ``url`` as it is, or for ``embedded``
        the URL of the bundled SmolLM2 server, started for the block (its log in ``log_dir``).

        Raises:
            AgentConfigError: ``embedded``, and the demo extra is not installed.
            LaunchError: the embedded server did not start in time.
        """
        from twinflow.agent._connect import model_serving

        return model_serving(self, log_dir, on_progress)

    @model_validator(mode="before")
    @classmethod
    def _from_string(cls, data: Any) -> Any:
        # `model: [first, then, ...]`: the first, with the others as its fallbacks.
        if isinstance(data, list | tuple):
            if not data:
                raise ValueError("a model list names at least one model")
            first = _model_keys(data[0])
            if not isinstance(first, dict) or "fallbacks" in first:
                raise ValueError("a model list's first entry is a model string or a model's keys")
            return {**first, "fallbacks": tuple(data[1:])} if len(data) > 1 else first
        return _model_keys(data)

    @model_validator(mode="after")
    def _fits_the_kind(self) -> ModelSpec:
        from twinflow.models._providers import PROVIDERS

        modes = PROVIDERS.client(self.kind).modes
        if self.mode not in modes:
            raise ValueError(
                f"kind {self.kind} takes mode {' or '.join(modes)} only (the API's own tool "
                f"calling): remove `mode` or set it to {modes[0]}"
            )
        if any(f.fallbacks for f in self.fallbacks) or any(
            f.url == EMBEDDED for f in self.fallbacks
        ):
            raise ValueError(
                "a fallback is a served model without fallbacks of its own (not `embedded`): "
                "list every model in one `model: [...]`"
            )
        if self.kind != "openai-compatible" and self.url == EMBEDDED:
            raise ValueError(
                f"the embedded model speaks the OpenAI-compatible API, not {self.kind}'s: "
                f"give the {self.kind} server's base URL, or drop `kind: {self.kind}`"
            )
        return self

    @field_validator("headers")
    @classmethod
    def _plain_headers(cls, headers: dict[str, str]) -> dict[str, str]:
        return check_headers(headers)

    @field_validator("url")
    @classmethod
    def _no_credentials(cls, url: str) -> str:
        try:
            return url if url == EMBEDDED else check_endpoint_url(url, where="model.url")
        except UserError as exc:
            raise ValueError(str(exc)) from None


def _model_keys(data: Any) -> Any:
    """A model string as the long form's keys (the provider table's row), and a wire's default
    mode when the keys name none (native for Anthropic's Messages, its only mode, and Gemini)."""
    from twinflow.models._providers import PROVIDERS

    if isinstance(data, str):
        try:
            return PROVIDERS.spec_fields(data)
        except UserError as exc:
            raise ValueError(str(exc)) from None
    if isinstance(data, dict) and "mode" not in data:
        kind = data.get("kind")
        if kind in {row.wire for row in PROVIDERS.values()}:
            return {**data, "mode": PROVIDERS.client(str(kind)).default_mode}
    return data
