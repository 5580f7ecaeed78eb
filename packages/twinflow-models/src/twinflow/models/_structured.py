"""Structured output: the schema on every request, pydantic on every answer, every attempt kept.

Both adapters implement vocab's `StructuredOutputAdapter` seam (`validate`) and add `generate`,
which makes the requests itself. A failed validation (bad JSON included) is re-asked with the
schema still in the body and the validation error given back as a user message; `max_attempts`
counts every attempt, the first included. A re-ask also samples differently (`retry_settings`):
at temperature 0 the same conversation gives the same answer, so without that a retry could
only repeat the failure. Every request carries a `max_tokens` derived from the schema
(`_budget`), so no request runs to the client's timeout because of the schema's shape; a reply
cut there is refused and re-asked like any other. Transport failures are not caught here at
all, so a connection refused, a timeout or any HTTP error status leaves at once, unretried
(ADR 0030).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Generic, TypeVar

from pydantic import BaseModel, JsonValue

from twinflow.models._budget import max_tokens_for
from twinflow.models._preflight import Decoder, GrammarCheck, PreflightReport, preflight
from twinflow.models._servers import (
    DEFAULT_OLLAMA_URL,
    OnChunk,
    SentSchema,
    Server,
    ollama_server,
    openai_server,
)
from twinflow.models._wire import Dialect

# The one validate-and-re-ask loop (validate_with_reask and its helpers) is shared with
# twinflow.agent, which this package may not import.
from twinflow.vocab import (
    Message,
    ModelSettings,
    Reask,
    SentRequest,
    StructuredResult,
    Transcript,
    check_max_attempts,
    parametrized,
    reask_message,
    validate_with_reask,
)

if TYPE_CHECKING:
    from twinflow.kernel import Transport

__all__ = [
    "RETRY_TEMPERATURE_STEP",
    "LocalStructuredResult",
    "OllamaStructuredOutput",
    "OpenAICompatibleStructuredOutput",
    "retry_settings",
]

M = TypeVar("M", bound=BaseModel)

_DEFAULT_SETTINGS = ModelSettings(temperature=0)

RETRY_TEMPERATURE_STEP = 0.4
"""How much each re-ask raises the temperature over the caller's (capped at `_MAX_TEMPERATURE`)."""
_MAX_TEMPERATURE = 1.0


def retry_settings(base: ModelSettings, number: int, max_tokens: int) -> ModelSettings:
    """The sampling settings of attempt `number` (1 for the first).

    The first attempt uses the caller's settings. Re-ask `n` (attempt `n + 1`) raises the
    temperature by `n * RETRY_TEMPERATURE_STEP` over the caller's (0 when unset), capped at 1.0,
    and moves the seed to the caller's (0 when unset) plus `n`: the error in the conversation
    alone rarely moves a small model off a greedy answer. `max_tokens` is the caller's when set,
    else `max_tokens` (the schema's budget).
    """
    tokens = base.max_tokens if base.max_tokens is not None else max_tokens
    if number <= 1:
        return base.model_copy(update={"max_tokens": tokens})
    retry = number - 1
    temperature = min(_MAX_TEMPERATURE, (base.temperature or 0.0) + retry * RETRY_TEMPERATURE_STEP)
    return ModelSettings(
        temperature=max(temperature, base.temperature or 0.0),
        max_tokens=tokens,
        seed=(base.seed or 0) + retry,
    )


class LocalStructuredResult(StructuredResult[M], Generic[M]):
    """A structured result that also carries the schema pre-flight report of its requests."""

    preflight: PreflightReport
    """What the server's decoder would not enforce of the schema, and any rewrite made to it."""


class _StructuredOutput:
    """Shared engine of the two adapters."""

    def __init__(
        self,
        server: Server,
        *,
        max_attempts: int,
        settings: ModelSettings,
        strict: bool,
        grammar_check: GrammarCheck | None = None,
    ) -> None:
        self._server = server
        self._max_attempts = check_max_attempts(max_attempts)
        self._settings = settings
        self._strict = strict
        self._grammar_check = grammar_check
        self._sent: dict[type[BaseModel], tuple[PreflightReport, SentSchema, int]] = {}

    @property
    def max_attempts(self) -> int:
        """Total attempts allowed per output, the first included."""
        return self._max_attempts

    def preflight(self, output_type: type[BaseModel]) -> PreflightReport:
        """The pre-flight report for `output_type` against this server's decoder.

        Raises:
            UnenforcedSchemaError: In strict mode, when the decoder would not enforce the schema.
        """
        return self._prepared(output_type)[0]

    def _prepared(self, output_type: type[BaseModel]) -> tuple[PreflightReport, SentSchema, int]:
        # A model class's schema does not change: compile, check and encode it once per class.
        found = self._sent.get(output_type)
        if found is None:
            report = preflight(
                output_type,
                self._server.decoder,
                strict=self._strict,
                grammar_check=self._grammar_check,
            )
            found = (
                report,
                SentSchema.of(output_type.__name__, report.sent_schema),
                max_tokens_for(report.sent_schema),
            )
            self._sent[output_type] = found
        return found

    def validate(self, emission: str, output_type: type[M], reask: Reask) -> StructuredResult[M]:
        """Validate an emission made elsewhere, re-asking through `reask` (the vocab seam).

        Raises:
            StructuredOutputError: No emission validated within `max_attempts`.
        """
        return validate_with_reask(emission, output_type, reask, max_attempts=self._max_attempts)

    def generate(
        self,
        messages: Transcript | Sequence[Message],
        output_type: type[M],
        *,
        on_chunk: OnChunk | None = None,
    ) -> LocalStructuredResult[M]:
        """Ask the server for an `output_type`, the schema constraining every request.

        Args:
            messages: The conversation (a transcript or messages), ending with the question.
            output_type: The pydantic model the answer must validate as.
            on_chunk: Stream every request and show it each raw chunk; the assembled reply
                is validated, and re-asked, exactly as a non-streamed one.

        Returns:
            The validated output, every attempt (request digest, raw emission, error), and the
            pre-flight report.

        Raises:
            UnenforcedSchemaError: Strict mode, before any request.
            StructuredOutputError: No reply validated within `max_attempts`.
            TransportError: Any transport failure, unretried and unwrapped.
            MalformedResponseError: The server's answer is not its wire format.
        """
        report, sent, budget = self._prepared(output_type)
        conversation = list(messages.messages if isinstance(messages, Transcript) else messages)
        requests: list[SentRequest] = []

        def ask() -> str:
            settings = retry_settings(self._settings, len(requests) + 1, budget)
            body = self._server.body(
                conversation,
                settings=settings,
                native_tools=False,
                output=sent,
            )
            digest = self._server.request_digest(body, sent)
            reply = self._server.send(body, on_chunk)
            requests.append(SentRequest(digest, settings, reply.finish_reason == "length"))
            emission = reply.content or ""
            conversation.append(Message.assistant(emission))
            return emission

        def reask(error: str) -> str:
            conversation.append(Message.user(reask_message(error)))
            return ask()

        result = validate_with_reask(
            ask(), output_type, reask, max_attempts=self._max_attempts, requests=requests
        )
        return parametrized(LocalStructuredResult, output_type)(
            output=result.output, attempts=result.attempts, preflight=report
        )


class OllamaStructuredOutput(_StructuredOutput):
    """Structured output from Ollama: `POST /api/chat`, `stream: false`, `format` = the schema.

    Args:
        transport: The kernel transport that carries every request.
        model: The Ollama model name, e.g. `llama3.2`.
        base_url: The server root.
        max_attempts: Total attempts per output, the first included.
        settings: Sampling settings; temperature 0 unless given.
        strict: Refuse schemas the decoder would not fully enforce, before any request.
        timeout: Seconds allowed per request.
    """

    def __init__(
        self,
        transport: Transport,
        *,
        model: str,
        base_url: str = DEFAULT_OLLAMA_URL,
        max_attempts: int = 3,
        settings: ModelSettings = _DEFAULT_SETTINGS,
        strict: bool = False,
        timeout: float = 120.0,
    ) -> None:
        """Configure the adapter; nothing is sent until `generate`."""
        super().__init__(
            ollama_server(transport, base_url=base_url, model=model, timeout=timeout),
            max_attempts=max_attempts,
            settings=settings,
            strict=strict,
        )


class OpenAICompatibleStructuredOutput(_StructuredOutput):
    """Structured output from an OpenAI-compatible server, in that server's dialect.

    Args:
        transport: The kernel transport that carries every request.
        base_url: The server root (the client appends `/v1/chat/completions`).
        model: The model name the server expects.
        dialect: How the server takes a schema (see `Dialect`).
        extra_body: Engine-specific fields (vLLM `guided_json`, llama.cpp `grammar`) sent as
            given in every request; they may not replace the messages or the schema.
        decoder: The grammar converter to pre-flight against; derived from the dialect if None.
        max_attempts: Total attempts per output, the first included.
        settings: Sampling settings of the first attempt; temperature 0 unless given (re-asks
            change them, see `retry_settings`); `max_tokens` derived from the schema unless given.
        strict: Refuse schemas the decoder would not fully enforce, before any request.
        timeout: Seconds allowed per request.
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
        extra_body: Mapping[str, JsonValue] | None = None,
        decoder: Decoder | None = None,
        max_attempts: int = 3,
        settings: ModelSettings = _DEFAULT_SETTINGS,
        strict: bool = False,
        timeout: float = 120.0,
        grammar_check: GrammarCheck | None = None,
    ) -> None:
        """Configure the adapter; nothing is sent until `generate`."""
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
            max_attempts=max_attempts,
            settings=settings,
            strict=strict,
            grammar_check=grammar_check,
        )
