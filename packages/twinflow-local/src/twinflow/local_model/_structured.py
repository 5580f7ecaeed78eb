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
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar

from pydantic import BaseModel, JsonValue, ValidationError

from twinflow.local_model._budget import max_tokens_for
from twinflow.local_model._preflight import Decoder, GrammarCheck, PreflightReport, preflight
from twinflow.local_model._servers import (
    DEFAULT_OLLAMA_URL,
    OnChunk,
    SentSchema,
    Server,
    ollama_server,
    openai_server,
)
from twinflow.local_model._wire import Dialect
from twinflow.vocab import (
    Attempt,
    Message,
    ModelSettings,
    Reask,
    StructuredOutputError,
    StructuredResult,
    Transcript,
    UserError,
)

if TYPE_CHECKING:
    from twinflow.kernel import Transport

__all__ = [
    "RETRY_TEMPERATURE_STEP",
    "LocalStructuredResult",
    "OllamaStructuredOutput",
    "OpenAICompatibleStructuredOutput",
    "retry_settings",
    "validation_error_text",
]

M = TypeVar("M", bound=BaseModel)
R = TypeVar("R", bound=BaseModel)

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


def validation_error_text(exc: ValidationError) -> str:
    """Render a pydantic validation error for the model to read: one line per error, no URLs."""
    lines = []
    for error in exc.errors(include_url=False):
        where = "/".join(str(p) for p in error["loc"]) or "(root)"
        lines.append(f"{where}: {error['msg']}")
    return "\n".join(lines)


def reask_message(error: str) -> str:
    """The user message that gives a validation error back to the model."""
    return (
        "Your previous reply was refused by the schema validator:\n"
        f"{error}\n"
        "Reply again with one JSON object that satisfies the schema."
    )


def check_attempts(max_attempts: int) -> int:
    """Refuse a non-positive attempt budget."""
    if isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 1:
        raise UserError(
            f"max_attempts counts every attempt and must be at least 1, got {max_attempts!r}"
        )
    return max_attempts


_PARAMETRIZED: dict[tuple[type[BaseModel], type[BaseModel]], type[BaseModel]] = {}


def _parametrized(generic: type[R], output_type: type[BaseModel]) -> type[R]:
    """``generic[output_type]``, built once per pair (pydantic's own lookup costs ~0.1 ms a call)."""
    key = (generic, output_type)
    found = _PARAMETRIZED.get(key)
    if found is None:
        found = _PARAMETRIZED[key] = generic[output_type]  # type: ignore[index]  # pydantic generic, subscripted at runtime
    return found  # type: ignore[return-value]  # generic[output_type] is a subclass of R


@dataclass(frozen=True)
class SentRequest:
    """What `generate` knows of one request it made, for the attempt its reply becomes."""

    digest: str
    """The request's digest."""
    settings: ModelSettings
    """Its sampling settings."""
    cut: bool
    """The reply stopped at `max_tokens` (finish reason `length`)."""


def validate_with_reask(
    emission: str,
    output_type: type[M],
    reask: Reask,
    *,
    max_attempts: int,
    requests: Sequence[SentRequest] = (),
) -> StructuredResult[M]:
    """Validate `emission`, re-asking on failure until `max_attempts` attempts are spent.

    Args:
        emission: The first raw emission.
        output_type: The pydantic model to validate into.
        reask: Called with the error text; returns the next emission.
        max_attempts: Total attempts allowed, the first included.
        requests: When the caller made the requests, each one so far, read after each reask
            so attempt `n` carries the digest and settings of request `n`.

    Returns:
        The validated output and every attempt.

    Raises:
        StructuredOutputError: No emission validated; `.attempts` holds them all.
    """
    attempts: list[Attempt] = []
    number = 1
    while True:
        sent = requests[number - 1] if len(requests) >= number else None
        request_digest = None if sent is None else sent.digest
        settings = None if sent is None else sent.settings
        try:
            output = output_type.model_validate_json(emission)
        except ValidationError as exc:
            error = validation_error_text(exc)
            if sent is not None and sent.cut:
                error = (
                    f"(root): the reply was cut off at max_tokens={sent.settings.max_tokens} "
                    f"before it ended; give a shorter answer\n{error}"
                )
            attempts.append(
                Attempt(
                    number=number,
                    emission=emission,
                    error=error,
                    request_digest=request_digest,
                    settings=settings,
                )
            )
            if number >= max_attempts:
                raise StructuredOutputError(
                    f"no reply validated as {output_type.__name__} in {max_attempts} attempt(s); "
                    f"last error: {error}. Inspect .attempts, simplify the schema, or use a "
                    "stronger model",
                    attempts=tuple(attempts),
                ) from None
            number += 1
            emission = reask(error)
            continue
        attempts.append(
            Attempt(
                number=number,
                emission=emission,
                error=None,
                request_digest=request_digest,
                settings=settings,
            )
        )
        result_type = _parametrized(StructuredResult, output_type)
        return result_type(output=output, attempts=tuple(attempts))


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
        self._max_attempts = check_attempts(max_attempts)
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
        return _parametrized(LocalStructuredResult, output_type)(
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
