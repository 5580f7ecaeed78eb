"""The one engine of the OpenAI-compatible and Ollama chat models (`ChatModelBase`).

Two modes. `native`: plain text, the server's own tool calling when tools are offered, and the
output schema (if any) constraining the reply. `structured-action`: every reply is constrained to
a union schema (call one offered tool with its arguments, or give the final answer) and parsed
into a tool call or a final message, so the loop runs on any server that constrains decoding,
with or without native tool calling. Call ids are derived from the request digest and the call's
index (or taken from injected `Ids`), never random (ADR 0032).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from types import MappingProxyType
from typing import TYPE_CHECKING, ClassVar, TypeVar

from pydantic import BaseModel, JsonValue

from twinflow.kernel._credentials import KeyHeader
from twinflow.kernel._ports import Closing
from twinflow.models._action import (
    action_schema,
    non_canonical,
    parse_action,
    with_instructions,
)
from twinflow.models._budget import max_tokens_for
from twinflow.models._errors import InputRefused, MalformedResponseError, ModelSetupError
from twinflow.models._preflight import GrammarCheck, PreflightReport, preflight
from twinflow.models._servers import ChatMode, OnChunk, SentSchema, Server
from twinflow.models._wire import Reply
from twinflow.vocab import (
    Attempt,
    CallId,
    Message,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    OutputSchema,
    Part,
    StructuredOutputError,
    StructuredPart,
    StructuredResult,
    TextPart,
    ToolCallPart,
    Transcript,
    Usage,
    WireFormatError,
)
from twinflow.vocab._reask import (
    SentRequest,
    check_max_attempts,
    reask_message,
    validate_with_reask,
)
from twinflow.vocab._wire import DEFAULT_JSON_LIMITS, JsonLimits, read_json_text

if TYPE_CHECKING:
    from twinflow.kernel import Ids


JsonSchema = dict[str, JsonValue]

_SENT_CACHE_SIZE = 64

M = TypeVar("M", bound=BaseModel)

_GENERATE_SETTINGS = ModelSettings(temperature=0)

RETRY_TEMPERATURE_STEP = 0.4
"""How much each re-ask raises the temperature over the caller's (capped at `_MAX_TEMPERATURE`)."""
_MAX_TEMPERATURE = 1.0


def retry_settings(base: ModelSettings, number: int, max_tokens: int) -> ModelSettings:
    """The sampling settings of attempt `number` (1 for the first).

    The first attempt uses the caller's settings. Re-ask `n` (attempt `n + 1`) raises the
    temperature by `n * RETRY_TEMPERATURE_STEP` over the caller's (0 when unset), capped at 1.0,
    and moves the seed to the caller's (0 when unset) plus `n`: at temperature 0 the same
    conversation gives the same answer, and the error in the conversation alone rarely moves a
    small model off a greedy answer. `max_tokens` is the caller's when set, else `max_tokens`
    (the schema's budget).
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


class ChatModelBase(Closing):
    """The one engine of the OpenAI-compatible and Ollama chat models (a provider's module
    subclasses it with its `Server`)."""

    key_header: ClassVar[KeyHeader] = KeyHeader("Authorization", prefix="Bearer ")
    """The header these APIs take a key in, for `HttpTransport(key_header=...)`: ``Authorization:
    Bearer`` (OpenAI's; an Ollama behind an authenticating proxy takes the same)."""
    required_headers: ClassVar[Mapping[str, str]] = MappingProxyType({})
    """Headers every request needs besides the key: none."""
    modes: ClassVar[tuple[ChatMode, ...]] = ("native", "structured-action")
    """Both: the server's own tool calling, or every reply constrained to an action."""
    default_mode: ClassVar[ChatMode] = "structured-action"
    """A run spec's mode when it names none: the one that works on any server."""

    def __init__(
        self,
        server: Server,
        *,
        mode: ChatMode,
        max_attempts: int,
        ids: Ids | None,
        strict: bool,
        limits: JsonLimits | None = None,
        grammar_check: GrammarCheck | None = None,
    ) -> None:
        if mode not in ("native", "structured-action"):
            raise ModelSetupError(
                f"mode must be 'native' or 'structured-action', got {mode!r}", reason="mode"
            )
        self._owned = contextlib.ExitStack()
        self._limits = limits or DEFAULT_JSON_LIMITS
        self._server = dataclasses.replace(server, limits=self._limits)
        self._mode = mode
        self._max_attempts = check_max_attempts(max_attempts)
        self._ids = ids
        self._strict = strict
        self._grammar_check = grammar_check
        self._sent_cache: dict[str, SentSchema] = {}
        self._by_type: dict[type[BaseModel], tuple[PreflightReport, SentSchema, int]] = {}

    @property
    def mode(self) -> ChatMode:
        """The mode this model was configured with."""
        return self._mode

    def request(self, request: ModelRequest) -> ModelResponse:
        """Send one request and return the assistant's reply.

        Raises:
            StructuredOutputError: Structured-action mode, no reply was a valid action within
                `max_attempts`.
            SchemaError: Strict mode, a schema the decoder would not enforce.
            TransportError: Any transport failure, unretried and unwrapped.
            MalformedResponseError: The server's answer is not its wire format.
        """
        if self._mode == "native":
            return self._native(request, None)
        return self._structured_action(request, None)

    def stream(self, request: ModelRequest, on_chunk: OnChunk) -> ModelResponse:
        """Send one request as a streamed one; `on_chunk` sees each raw chunk as it arrives.

        Returns exactly what `request` returns for the same reply (vocab's `ChunkAssembler`
        builds it, and call ids derive from the non-streamed request body). In
        structured-action mode the chunks are the raw action JSON, re-asks included.

        Raises:
            UserError: The transport cannot stream.
            (and as `request`)
        """
        if self._mode == "native":
            return self._native(request, on_chunk)
        return self._structured_action(request, on_chunk)

    def _call_id(self, request_digest: str, index: int) -> CallId:
        if self._ids is not None:
            return self._ids.call_id()
        return CallId(f"call_{request_digest[:24]}_{index}")

    def _sent(self, name: str, schema: JsonSchema) -> SentSchema:
        """The schema as sent, pre-flighted once per schema (a run offers the same tools and
        output at every step): cached by the schema's JSON text, never by object identity."""
        text = json.dumps([name, schema], sort_keys=True)
        found = self._sent_cache.get(text)
        if found is None:
            sent_schema = preflight(
                schema,
                self._server.decoder,
                strict=self._strict,
                grammar_check=self._grammar_check,
            ).sent_schema
            found = SentSchema.of(name, sent_schema)
            if len(self._sent_cache) >= _SENT_CACHE_SIZE:
                del self._sent_cache[next(iter(self._sent_cache))]
            self._sent_cache[text] = found
        return found

    def _budget(self, schema: SentSchema) -> int:
        """The schema's `max_tokens` budget."""
        return max_tokens_for(schema.schema.json_schema)

    def _native(self, request: ModelRequest, on_chunk: OnChunk | None) -> ModelResponse:
        out = request.output_schema
        sent = None if out is None else self._sent(out.name, out.json_schema)
        body = self._server.body(
            request.transcript,
            settings=request.settings,
            native_tools=True,
            tools=request.tools,
            output=sent,
        )
        request_digest = self._server.request_digest(body, sent)
        reply = self._server.send(body, on_chunk)
        parts: list[Part] = []
        if reply.content and len(reply.content) > self._limits.max_bytes:
            raise MalformedResponseError(
                f"a reply of {len(reply.content)} characters, over the limit of "
                f"{self._limits.max_bytes} (JsonLimits.max_bytes)",
                url=self._server.url,
                path="",
            )
        if reply.content:
            parts.append(self._content_part(reply.content, out, self._limits))
        for index, (name, arguments) in enumerate(reply.tool_calls):
            parts.append(
                ToolCallPart(
                    id=self._call_id(request_digest, index), name=name, arguments=arguments
                )
            )
        return ModelResponse(
            message=Message(role="assistant", parts=tuple(parts)),
            usage=reply.usage,
            finish_reason=reply.finish_reason,
            model_name=reply.model_name,
        )

    @staticmethod
    def _content_part(content: str, out: OutputSchema | None, limits: JsonLimits) -> Part:
        if out is None:
            return TextPart(text=content)
        try:
            value = read_json_text(content, (), limits)
        except WireFormatError:
            # Left as text: the loop's StructuredOutputAdapter re-asks with the error.
            return TextPart(text=content)
        if non_canonical(value, "") is not None:
            # JSON without a canonical form (1e400, NaN, an integer past 2**53-1) is no
            # StructuredPart either: left as text for the adapter to validate and re-ask.
            return TextPart(text=content)
        return StructuredPart(schema_name=out.name, value=value)

    def _structured_action(self, request: ModelRequest, on_chunk: OnChunk | None) -> ModelResponse:
        schema = self._sent("action", action_schema(request.tools, request.output_schema))
        messages = with_instructions(request)
        attempts: list[Attempt] = []
        usage = Usage(input_tokens=0, output_tokens=0)
        budget = self._budget(schema)
        while True:
            # A re-ask samples differently and every request is bounded, as in `generate`.
            settings = retry_settings(request.settings, len(attempts) + 1, budget)
            body = self._server.body(messages, settings=settings, native_tools=False, output=schema)
            request_digest = self._server.request_digest(body, schema)
            reply = self._server.send(body, on_chunk)
            usage = Usage(
                input_tokens=usage.input_tokens + reply.usage.input_tokens,
                output_tokens=usage.output_tokens + reply.usage.output_tokens,
            )
            emission = reply.content or ""
            try:
                action = parse_action(emission, request.tools, request.output_schema, self._limits)
            except InputRefused as exc:
                attempt = _refused_attempt(
                    str(exc), reply, len(attempts) + 1, request_digest, settings
                )
                attempts.append(attempt)
                error = attempt.error or ""
                if len(attempts) >= self._max_attempts:
                    raise StructuredOutputError(
                        f"no reply was a valid action in {self._max_attempts} attempt(s); last "
                        f"error: {error}. Inspect .attempts, or offer fewer or simpler "
                        "tools",
                        attempts=tuple(attempts),
                    ) from None
                messages += [
                    Message.assistant(emission),
                    Message.user(reask_message(error)),
                ]
                continue
            return self._action_response(action, request, request_digest, usage, reply.model_name)

    def _action_response(
        self,
        action: dict[str, JsonValue],
        request: ModelRequest,
        request_digest: str,
        usage: Usage,
        model_name: str,
    ) -> ModelResponse:
        """The reply a valid action stands for: a tool call, or the final answer."""
        if action["action"] == "call_tool":
            arguments = action["arguments"]
            assert isinstance(arguments, dict)  # checked by parse_action
            call = ToolCallPart(
                id=self._call_id(request_digest, 0), name=str(action["tool"]), arguments=arguments
            )
            return ModelResponse(
                message=Message(role="assistant", parts=(call,)),
                usage=usage,
                finish_reason="tool_calls",
                model_name=model_name,
            )
        part: Part
        if request.output_schema is None:
            part = TextPart(text=str(action["answer"]))
        else:
            part = StructuredPart(schema_name=request.output_schema.name, value=action["output"])
        return ModelResponse(
            message=Message(role="assistant", parts=(part,)),
            usage=usage,
            finish_reason="stop",
            model_name=model_name,
        )

    def preflight(self, output_type: type[BaseModel]) -> PreflightReport:
        """The pre-flight report of `output_type`'s schema against this server's decoder.

        Raises:
            SchemaError: Strict mode, when the decoder would not enforce the schema.
        """
        return self._prepared(output_type)[0]

    def _prepared(self, output_type: type[BaseModel]) -> tuple[PreflightReport, SentSchema, int]:
        # A model class's schema does not change: compile, check and encode it once per class.
        found = self._by_type.get(output_type)
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
            self._by_type[output_type] = found
        return found

    def generate(
        self,
        messages: Transcript | Sequence[Message],
        output_type: type[M],
        *,
        settings: ModelSettings = _GENERATE_SETTINGS,
        on_chunk: OnChunk | None = None,
    ) -> StructuredResult[M]:
        """Ask the server for an `output_type`, the schema constraining every request.

        A failed validation (bad JSON included) is re-asked with the schema still in the body
        and the validation error given back as a user message; `max_attempts` counts every
        attempt, the first included, and each re-ask samples differently (`retry_settings`).
        Every request carries a `max_tokens` derived from the schema unless `settings` names
        one; a reply cut there is refused and re-asked like any other. Transport failures
        leave at once, unretried (ADR 0030).

        Args:
            messages: The conversation (a transcript or messages), ending with the question.
            output_type: The pydantic model the answer must validate as.
            settings: Sampling settings of the first attempt (temperature 0 unless given).
            on_chunk: Stream every request and show it each raw chunk; the assembled reply
                is validated, and re-asked, exactly as a non-streamed one.

        Returns:
            The validated output and every attempt (request digest, raw emission, error).

        Raises:
            SchemaError: Strict mode, before any request.
            StructuredOutputError: No reply validated within `max_attempts`.
            TransportError: Any transport failure, unretried and unwrapped.
            MalformedResponseError: The server's answer is not its wire format.
        """
        _, sent, budget = self._prepared(output_type)
        conversation = list(messages.messages if isinstance(messages, Transcript) else messages)
        requests: list[SentRequest] = []

        def ask() -> str:
            attempt_settings = retry_settings(settings, len(requests) + 1, budget)
            body = self._server.body(
                conversation, settings=attempt_settings, native_tools=False, output=sent
            )
            digest = self._server.request_digest(body, sent)
            reply = self._server.send(body, on_chunk)
            requests.append(SentRequest(digest, attempt_settings, reply.finish_reason == "length"))
            emission = reply.content or ""
            conversation.append(Message.assistant(emission))
            return emission

        def reask(error: str) -> str:
            conversation.append(Message.user(reask_message(error)))
            return ask()

        return validate_with_reask(
            ask(), output_type, reask, max_attempts=self._max_attempts, requests=requests
        )

    def own(self, resource: AbstractContextManager[object]) -> None:
        """Close `resource` when this model closes (what `open_model` opened for it)."""
        self._owned.enter_context(resource)

    def close(self) -> None:
        """Release what `open_model` opened for this model (its transport, the embedded
        server); a model built on a caller's transport holds nothing to release."""
        self._owned.close()


def _refused_attempt(
    error: str, reply: Reply, number: int, request_digest: str, settings: ModelSettings
) -> Attempt:
    """The record of a reply that was no valid action, its error saying if it was cut off."""
    if reply.finish_reason == "length":
        error = (
            f"(root): the reply was cut off at max_tokens={settings.max_tokens} "
            f"before it ended; give a shorter answer\n{error}"
        )
    return Attempt(
        number=number,
        emission=reply.content or "",
        error=error,
        request_digest=request_digest,
        settings=settings,
    )
