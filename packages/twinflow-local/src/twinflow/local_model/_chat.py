"""`ChatModel` adapters for Ollama and OpenAI-compatible servers.

Two modes. `native`: plain text, the server's own tool calling when tools are offered, and the
output schema (if any) constraining the reply. `structured-action`: every reply is constrained to
a union schema (call one offered tool with its arguments, or give the final answer) and parsed
into a tool call or a final message, so the loop runs on any server that constrains decoding,
with or without native tool calling. Call ids are derived from the request digest and the call's
index (or taken from injected `Ids`), never random (ADR 0032).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, ClassVar, Literal

from pydantic import JsonValue

from twinflow.kernel import KeyHeader
from twinflow.local_model._budget import max_tokens_for
from twinflow.local_model._errors import MalformedResponseError
from twinflow.local_model._preflight import Decoder, GrammarCheck, preflight
from twinflow.local_model._servers import (
    DEFAULT_OLLAMA_URL,
    OnChunk,
    SentSchema,
    Server,
    ollama_server,
    openai_server,
)
from twinflow.local_model._structured import retry_settings
from twinflow.local_model._wire import Dialect, Reply
from twinflow.trace import CanonicalError, UserError
from twinflow.vocab import (
    Attempt,
    CallId,
    Message,
    ModelRequest,
    ModelResponse,
    OutputSchema,
    Part,
    StructuredOutputError,
    StructuredPart,
    TextPart,
    ToolCallPart,
    ToolSpec,
    Usage,
    WireFormatError,
    check_max_attempts,
    reask_message,
)
from twinflow.vocab import value_bytes as canonical_bytes
from twinflow.vocab.wire import DEFAULT_JSON_LIMITS, JsonLimits, read_json_text

if TYPE_CHECKING:
    from twinflow.kernel import Ids, Transport

__all__ = [
    "ChatMode",
    "OllamaChatModel",
    "OpenAICompatibleChatModel",
    "action_instructions",
    "action_schema",
]

JsonSchema = dict[str, JsonValue]

_SENT_CACHE_SIZE = 64

ChatMode = Literal["native", "structured-action"]
"""`native`: the server's own tool calling; `structured-action`: tool calls as constrained JSON."""


def _merge_defs(
    target: dict[str, JsonValue], schema: Mapping[str, JsonValue], where: str
) -> dict[str, JsonValue]:
    """Move `$defs` of a nested schema to the root, where its `#/$defs/...` references point."""
    inner = dict(schema)
    defs = inner.pop("$defs", None)
    if isinstance(defs, dict):
        for name, definition in defs.items():
            if name in target and target[name] != definition:
                raise UserError(
                    f"{where} defines $defs/{name} differently from another tool or the output "
                    "schema; rename one of the definitions"
                )
            target[name] = definition
    return inner


def action_schema(
    tools: Sequence[ToolSpec], output_schema: OutputSchema | None
) -> dict[str, JsonValue]:
    """The union schema of one structured-action step.

    One branch per tool, `{"action": "call_tool", "tool": <name>, "arguments": <its schema>}`,
    and one final branch, `{"action": "final", "answer": <string>}` or, with an output schema,
    `{"action": "final", "output": <that schema>}`. Nested `$defs` are hoisted to the root.

    Args:
        tools: The tools offered at this step.
        output_schema: The schema of the final answer, if it is structured.

    Returns:
        A JSON Schema with an `anyOf` of the branches.
    """
    defs: dict[str, JsonValue] = {}
    branches: list[JsonValue] = []
    for tool in tools:
        arguments = _merge_defs(defs, tool.parameters, f"tool {tool.name!r}")
        branches.append(
            {
                "type": "object",
                "properties": {
                    "action": {"const": "call_tool"},
                    "tool": {"const": tool.name},
                    "arguments": arguments,
                },
                "required": ["action", "tool", "arguments"],
                "additionalProperties": False,
            }
        )
    if output_schema is None:
        final: dict[str, JsonValue] = {
            "properties": {"action": {"const": "final"}, "answer": {"type": "string"}},
            "required": ["action", "answer"],
        }
    else:
        output = _merge_defs(
            defs, output_schema.json_schema, f"output schema {output_schema.name!r}"
        )
        final = {
            "properties": {"action": {"const": "final"}, "output": output},
            "required": ["action", "output"],
        }
    branches.append({"type": "object", **final, "additionalProperties": False})
    schema: dict[str, JsonValue] = {"anyOf": branches}
    if defs:
        schema["$defs"] = defs
    return schema


def action_instructions(tools: Sequence[ToolSpec], output_schema: OutputSchema | None) -> str:
    """The system text that explains the structured-action protocol to the model."""
    final_field = "answer" if output_schema is None else "output"
    lines = [
        "Reply with exactly one JSON object.",
        'To call a tool: {"action": "call_tool", "tool": <tool name>, "arguments": {...}}.',
        f'To give the final answer: {{"action": "final", "{final_field}": ...}}.',
    ]
    if tools:
        lines.append("Tools:")
        lines.extend(f"- {tool.name}: {tool.description}" for tool in tools)
    return "\n".join(lines)


class _ActionRefused(Exception):
    """Internal: an emission that parsed as JSON but is not one of the offered actions."""


def _non_canonical(value: object, where: str) -> str | None:
    """Where a parsed JSON value holds a number with no canonical form (RFC 8785), if anywhere.

    A decoder can emit `1e400` (read as infinity), an integer past 2**53-1, or Python's `NaN`
    and `Infinity`; twinflow's values refuse them, so such a reply is a validation failure to
    re-ask, like any other, rather than an error escaping the request. Whether a number has
    that form is the canonical encoder's to say (one bound for the workspace).
    """
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:
            canonical_bytes(value)
        except CanonicalError:
            return (
                f"{where}: {value} is not a JSON number twinflow keeps: numbers must be finite, "
                "integers within +-(2**53-1)"
            )
        return None
    if isinstance(value, dict):
        items: Sequence[tuple[object, object]] = list(value.items())
    elif isinstance(value, list):
        items = list(enumerate(value))
    else:
        return None
    for key, item in items:
        found = _non_canonical(item, f"{where}/{key}")
        if found is not None:
            return found
    return None


def _parse_action(
    emission: str,
    tools: Sequence[ToolSpec],
    output_schema: OutputSchema | None,
    limits: JsonLimits = DEFAULT_JSON_LIMITS,
) -> dict[str, JsonValue]:
    try:
        value = read_json_text(emission, (), limits, what="the reply")
    except WireFormatError as exc:
        # Not JSON, too long, too deep: a malformed emission, re-asked like any other.
        raise _ActionRefused(f"(root): {exc}") from None
    if not isinstance(value, dict):
        raise _ActionRefused("(root): expected a JSON object")
    action = value.get("action")
    if action == "call_tool":
        names = [t.name for t in tools]
        if value.get("tool") not in names:
            raise _ActionRefused(f"tool: must be one of {names}, got {value.get('tool')!r}")
        if not isinstance(value.get("arguments"), dict):
            raise _ActionRefused("arguments: expected a JSON object")
        problem = _non_canonical(value["arguments"], "arguments")
        if problem is not None:
            raise _ActionRefused(problem)
        return value
    if action == "final":
        key = "answer" if output_schema is None else "output"
        if key not in value:
            raise _ActionRefused(f"{key}: missing")
        if output_schema is None and not isinstance(value[key], str):
            raise _ActionRefused("answer: expected a string")
        problem = _non_canonical(value[key], key)
        if problem is not None:
            raise _ActionRefused(problem)
        return value
    raise _ActionRefused(f"action: expected 'call_tool' or 'final', got {action!r}")


class _ChatModel:
    """Shared engine of the two chat models."""

    key_header: ClassVar[KeyHeader] = KeyHeader("Authorization", prefix="Bearer ")
    """The header these APIs take a key in, for `HttpTransport(key_header=...)`: ``Authorization:
    Bearer`` (OpenAI's; an Ollama behind an authenticating proxy takes the same)."""
    required_headers: ClassVar[Mapping[str, str]] = MappingProxyType({})
    """Headers every request needs besides the key: none."""

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
            raise UserError(f"mode must be 'native' or 'structured-action', got {mode!r}")
        self._limits = limits or DEFAULT_JSON_LIMITS
        self._server = dataclasses.replace(server, limits=self._limits)
        self._mode = mode
        self._max_attempts = check_max_attempts(max_attempts)
        self._ids = ids
        self._strict = strict
        self._grammar_check = grammar_check
        self._sent_cache: dict[tuple[int, ...], tuple[tuple[object, ...], SentSchema]] = {}
        self._budgets: dict[int, tuple[SentSchema, int]] = {}

    @property
    def mode(self) -> ChatMode:
        """The mode this model was configured with."""
        return self._mode

    def request(self, request: ModelRequest) -> ModelResponse:
        """Send one request and return the assistant's reply.

        Raises:
            StructuredOutputError: Structured-action mode, no reply was a valid action within
                `max_attempts`.
            UnenforcedSchemaError: Strict mode, a schema the decoder would not enforce.
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

    def _sent(
        self, key: tuple[object, ...], name: str, build: Callable[[], JsonSchema]
    ) -> SentSchema:
        """The schema as sent, pre-flighted and encoded once per key (the objects it came from).

        An agent run offers the same tool specs and output schema at every step; the cache keys
        on their identity and holds them, so an id is never reused while its entry lives.
        """
        ids = tuple(id(k) for k in key)
        found = self._sent_cache.get(ids)
        if found is None:
            sent_schema = preflight(
                build(),
                self._server.decoder,
                strict=self._strict,
                grammar_check=self._grammar_check,
            ).sent_schema
            found = (key, SentSchema.of(name, sent_schema))
            if len(self._sent_cache) >= _SENT_CACHE_SIZE:
                del self._sent_cache[next(iter(self._sent_cache))]
            self._sent_cache[ids] = found
        return found[1]

    def _budget(self, schema: SentSchema) -> int:
        """The schema's `max_tokens` budget, computed once per sent schema."""
        found = self._budgets.get(id(schema))
        if found is None or found[0] is not schema:
            found = (schema, max_tokens_for(schema.schema.json_schema))
            if len(self._budgets) >= _SENT_CACHE_SIZE:
                del self._budgets[next(iter(self._budgets))]
            self._budgets[id(schema)] = found
        return found[1]

    def _native(self, request: ModelRequest, on_chunk: OnChunk | None) -> ModelResponse:
        out = request.output_schema
        sent = None if out is None else self._sent((out,), out.name, lambda: out.json_schema)
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
        if _non_canonical(value, "") is not None:
            # JSON without a canonical form (1e400, NaN, an integer past 2**53-1) is no
            # StructuredPart either: left as text for the adapter to validate and re-ask.
            return TextPart(text=content)
        return StructuredPart(schema_name=out.name, value=value)

    def _structured_action(self, request: ModelRequest, on_chunk: OnChunk | None) -> ModelResponse:
        schema = self._sent(
            (*request.tools, request.output_schema),
            "action",
            lambda: action_schema(request.tools, request.output_schema),
        )
        instructions = action_instructions(request.tools, request.output_schema)
        messages = list(request.transcript.messages)
        if messages and messages[0].role == "system":
            messages[0] = Message.system(f"{instructions}\n\n{messages[0].text}")
        else:
            messages.insert(0, Message.system(instructions))
        attempts: list[Attempt] = []
        input_tokens = output_tokens = 0
        reply: Reply | None = None
        budget = self._budget(schema)
        while True:
            # A re-ask samples differently and every request is bounded, as in `generate`.
            settings = retry_settings(request.settings, len(attempts) + 1, budget)
            body = self._server.body(
                messages,
                settings=settings,
                native_tools=False,
                output=schema,
            )
            request_digest = self._server.request_digest(body, schema)
            reply = self._server.send(body, on_chunk)
            input_tokens += reply.usage.input_tokens
            output_tokens += reply.usage.output_tokens
            emission = reply.content or ""
            try:
                action = _parse_action(emission, request.tools, request.output_schema, self._limits)
            except _ActionRefused as exc:
                error = str(exc)
                if reply.finish_reason == "length":
                    error = (
                        f"(root): the reply was cut off at max_tokens={settings.max_tokens} "
                        f"before it ended; give a shorter answer\n{error}"
                    )
                attempts.append(
                    Attempt(
                        number=len(attempts) + 1,
                        emission=emission,
                        error=error,
                        request_digest=request_digest,
                        settings=settings,
                    )
                )
                if len(attempts) >= self._max_attempts:
                    raise StructuredOutputError(
                        f"no reply was a valid action in {self._max_attempts} attempt(s); last "
                        f"error: {error}. Inspect .attempts, or offer fewer or simpler tools",
                        attempts=tuple(attempts),
                    ) from None
                messages += [Message.assistant(emission), Message.user(reask_message(error))]
                continue
            break
        usage = Usage(input_tokens=input_tokens, output_tokens=output_tokens)
        if action["action"] == "call_tool":
            arguments = action["arguments"]
            assert isinstance(arguments, dict)  # checked by _parse_action
            call = ToolCallPart(
                id=self._call_id(request_digest, 0), name=str(action["tool"]), arguments=arguments
            )
            message = Message(role="assistant", parts=(call,))
            return ModelResponse(
                message=message,
                usage=usage,
                finish_reason="tool_calls",
                model_name=reply.model_name,
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
            model_name=reply.model_name,
        )


class OllamaChatModel(_ChatModel):
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


class OpenAICompatibleChatModel(_ChatModel):
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
