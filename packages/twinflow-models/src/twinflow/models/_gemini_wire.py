"""Gemini's `generateContent` wire: transcripts to `contents` and `parts`, and replies back.

A conversation is `contents` (role `user` or `model`, each a list of `parts`: `text`,
`inlineData`, `fileData`, `functionCall`, `functionResponse`) with the system prompt apart in
`systemInstruction`; tools are `functionDeclarations`, whose `parameters` and the structured
output's `responseSchema` are Gemini's OpenAPI subset of JSON Schema (`gemini_schema`).

A reply is a `GenerateContentResponse`: its first candidate's parts, `finishReason` and
`usageMetadata`. A prompt or candidate withheld for safety (`promptFeedback.blockReason`, a
`finishReason` of `SAFETY`, `RECITATION`, `BLOCKLIST`, `PROHIBITED_CONTENT`, `SPII`, ...) is a
`MalformedResponseError` of reason `refused` naming the reason, never an empty answer. A stream
(`streamGenerateContent?alt=sse`) is server-sent events of the same objects, each carrying the
new parts and the usage so far.

Everything here is a pure function from values to JSON and back: no I/O, so every body can be
checked against the `google-genai` package's own types.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from pydantic import JsonValue

from twinflow.models._errors import MalformedResponseError
from twinflow.models._stream import json_line, sse_data, token_count
from twinflow.models._wire import Reply
from twinflow.vocab import (
    Chunk,
    FinishChunk,
    InvalidValueError,
    MediaPart,
    ModelSettings,
    Part,
    StructuredPart,
    TextDelta,
    TextPart,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallPart,
    ToolCallStart,
    ToolResultPart,
    ToolSpec,
    Transcript,
    Usage,
    UsageChunk,
)
from twinflow.vocab import value_bytes as canonical_bytes
from twinflow.vocab._parts import carried_parts
from twinflow.vocab._protocols import FinishReason

_SCHEMA_KEYS = frozenset(
    {
        "description",
        "enum",
        "format",
        "maxItems",
        "maxLength",
        "maxProperties",
        "maximum",
        "minItems",
        "minLength",
        "minProperties",
        "minimum",
        "pattern",
        "required",
        "title",
    }
)
"""JSON Schema keywords Gemini's `Schema` takes as they are."""

_MAX_SCHEMA_DEPTH = 32
"""How deep `gemini_schema` follows `$ref`s and nesting (a recursive model stops here)."""

_REFUSALS = frozenset(
    {
        "SAFETY",
        "RECITATION",
        "BLOCKLIST",
        "PROHIBITED_CONTENT",
        "SPII",
        "IMAGE_SAFETY",
        "LANGUAGE",
        "OTHER",
    }
)
"""`finishReason`s for which the candidate was withheld, in part or whole."""


def _text(part: Part) -> str:
    if isinstance(part, TextPart):
        return part.text
    if isinstance(part, StructuredPart):
        return canonical_bytes(part.value).decode("utf-8")
    return ""


def _media(part: MediaPart) -> dict[str, Any]:
    if part.uri.startswith("data:"):
        header, _, data = part.uri[5:].partition(",")
        if not header.endswith(";base64"):
            raise InvalidValueError("Gemini takes data: media only base64-encoded")
        return {"inlineData": {"mimeType": part.media_type, "data": data}}
    return {"fileData": {"mimeType": part.media_type, "fileUri": part.uri}}


def _part(part: Part) -> dict[str, Any] | None:
    if isinstance(part, TextPart | StructuredPart):
        return {"text": _text(part)}
    if isinstance(part, MediaPart):
        return _media(part)
    if isinstance(part, ToolCallPart):
        return {"functionCall": {"name": part.name, "args": part.arguments}}
    if isinstance(part, ToolResultPart):
        key = "error" if part.is_error else "result"
        return {"functionResponse": {"name": part.name, "response": {key: part.content}}}
    return None  # reasoning is the model's own scratch space: not sent back


def to_gemini(transcript: Transcript) -> dict[str, Any]:
    """Translate a transcript to `{"systemInstruction"?, "contents": [...]}`.

    System messages join into `systemInstruction`; assistant messages are role `model`; tool
    results are `functionResponse` parts of a user turn (`{"result": ...}`, `{"error": ...}`).

    Raises:
        InvalidValueError: Media Gemini cannot carry (data: not base64).
        PartNotCarriedError: A part of an extension kind with no fallback.
    """
    system: list[dict[str, Any]] = []
    contents: list[dict[str, Any]] = []
    for message in transcript.messages:
        parts = [p for p in map(_part, carried_parts(message.parts, "gemini")) if p is not None]
        if message.role == "system":
            system.extend(p for p in parts if "text" in p)
        elif parts:
            role = "model" if message.role == "assistant" else "user"
            contents.append({"role": role, "parts": parts})
    out: dict[str, Any] = {"contents": contents}
    if system:
        out["systemInstruction"] = {"parts": system}
    return out


def _put_type(kind: JsonValue, out: dict[str, Any]) -> None:
    """Set ``out``'s ``type`` from a JSON Schema ``type``: a list's ``null`` as ``nullable``."""
    if isinstance(kind, list):
        kinds = [k for k in kind if k != "null"]
        if len(kinds) < len(kind):
            out["nullable"] = True
        kind = kinds[0] if len(kinds) == 1 else None
        if len(kinds) > 1:
            out["anyOf"] = [{"type": str(k).upper()} for k in kinds]
    if isinstance(kind, str) and kind != "null":
        out["type"] = kind.upper()


def gemini_schema(schema: JsonValue, defs: dict[str, Any] | None = None, depth: int = 0) -> Any:
    """A JSON Schema as Gemini's `Schema` (its OpenAPI subset): `$ref`s inlined, a type list
    with `null` as `nullable`, `const` as a one-value `enum`, `oneOf` as `anyOf`, and keywords
    it has no field for left out (pydantic still validates every reply against the full one).

    Raises:
        InvalidValueError: A schema nested (or recursive) past 32 levels.
    """
    if depth > _MAX_SCHEMA_DEPTH:
        raise InvalidValueError(
            f"the schema nests past {_MAX_SCHEMA_DEPTH} levels (a recursive model?); "
            "Gemini's responseSchema has no references"
        )
    if not isinstance(schema, dict):
        return {}
    if defs is None:
        found = schema.get("$defs", schema.get("definitions", {}))
        defs = found if isinstance(found, dict) else {}
    ref = schema.get("$ref")
    if isinstance(ref, str):
        target = defs.get(ref.rsplit("/", 1)[-1])
        target = target if isinstance(target, dict) else {}
        merged = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
        return gemini_schema(merged, defs, depth + 1)
    out: dict[str, Any] = {k: v for k, v in schema.items() if k in _SCHEMA_KEYS}
    if "const" in schema:
        out["enum"] = [schema["const"]]
    _put_type(schema.get("type"), out)
    if "enum" in out:
        out["enum"] = [str(v) for v in out["enum"] if v is not None]
        out.setdefault("type", "STRING")
    options = schema.get("anyOf", schema.get("oneOf"))
    if isinstance(options, list):
        kept = [o for o in options if not (isinstance(o, dict) and o.get("type") == "null")]
        if len(kept) < len(options):
            out["nullable"] = True
        converted = [gemini_schema(o, defs, depth + 1) for o in kept]
        if len(converted) == 1:
            out.update(converted[0])
        else:
            out["anyOf"] = converted
    properties = schema.get("properties")
    if isinstance(properties, dict):
        out["properties"] = {
            name: gemini_schema(value, defs, depth + 1) for name, value in properties.items()
        }
        out["propertyOrdering"] = list(properties)
        out.setdefault("type", "OBJECT")
    if "items" in schema:
        out["items"] = gemini_schema(schema["items"], defs, depth + 1)
        out.setdefault("type", "ARRAY")
    return out


def to_gemini_tools(tools: Iterable[ToolSpec]) -> list[dict[str, Any]]:
    """Tool specs as one `functionDeclarations` tool (parameters in Gemini's schema)."""
    declarations = [
        {
            "name": t.name,
            "description": t.description,
            "parameters": gemini_schema(t.parameters),
        }
        for t in tools
    ]
    return [{"functionDeclarations": declarations}] if declarations else []


def gemini_body(
    transcript: Transcript,
    settings: ModelSettings,
    tools: Sequence[ToolSpec],
    response_schema: dict[str, JsonValue] | None,
) -> dict[str, JsonValue]:
    """The `generateContent` body: contents, tools, and `generationConfig` (sampling settings,
    and for structured output `responseMimeType: application/json` with `responseSchema`).

    Raises:
        UserError: The conversation cannot be sent to Gemini (as `to_gemini`).
    """
    body: dict[str, Any] = to_gemini(transcript)
    config: dict[str, Any] = {}
    if settings.temperature is not None:
        config["temperature"] = settings.temperature
    if settings.max_tokens is not None:
        config["maxOutputTokens"] = settings.max_tokens
    if settings.seed is not None:
        config["seed"] = settings.seed
    if response_schema is not None:
        config["responseMimeType"] = "application/json"
        config["responseSchema"] = gemini_schema(response_schema)
    if tools:
        body["tools"] = to_gemini_tools(tools)
    if config:
        body["generationConfig"] = config
    return body


def _refused(reason: object, url: str, path: str, what: str) -> MalformedResponseError:
    return MalformedResponseError(
        f"Gemini withheld the {what} ({reason}): a safety or policy block, not an answer",
        url=url,
        path=path,
        reason="refused",
    )


def _finish(reason: object, has_calls: bool) -> FinishReason:
    if has_calls:
        return "tool_calls"
    if reason == "MAX_TOKENS":
        return "length"
    if reason in ("STOP", None, "FINISH_REASON_UNSPECIFIED"):
        return "stop"
    return "error"


def _usage(answer: dict[str, Any]) -> tuple[int | None, int | None]:
    usage = answer.get("usageMetadata")
    if not isinstance(usage, dict):
        return None, None
    output = token_count(usage.get("candidatesTokenCount"))
    thoughts = token_count(usage.get("thoughtsTokenCount"))
    if output is not None and thoughts is not None:
        output += thoughts
    return token_count(usage.get("promptTokenCount")), output


def _candidate(answer: object, url: str, streamed: bool) -> tuple[dict[str, Any], list[Any]]:
    """The first candidate and its parts (refusals raised, shapes checked)."""
    if not isinstance(answer, dict):
        raise MalformedResponseError("expected a GenerateContentResponse", url=url, path="")
    feedback = answer.get("promptFeedback")
    if isinstance(feedback, dict) and feedback.get("blockReason") not in (None, "", 0, False):
        raise _refused(feedback["blockReason"], url, "/promptFeedback/blockReason", "prompt")
    candidates = answer.get("candidates")
    if candidates is None and streamed:
        return {}, []  # a stream's usage-only event
    if not isinstance(candidates, list) or not candidates or not isinstance(candidates[0], dict):
        raise MalformedResponseError("expected at least one candidate", url=url, path="/candidates")
    candidate: dict[str, Any] = candidates[0]
    reason = candidate.get("finishReason")
    if reason is not None and not isinstance(reason, str):
        raise MalformedResponseError(
            "finishReason must be a string", url=url, path="/candidates/0/finishReason"
        )
    if reason in _REFUSALS:
        raise _refused(reason, url, "/candidates/0/finishReason", "answer")
    content = candidate.get("content")
    if content is None and (streamed or reason is not None):
        return candidate, []
    if not isinstance(content, dict):
        raise MalformedResponseError(
            "expected the candidate's content", url=url, path="/candidates/0/content"
        )
    parts = content.get("parts", [] if streamed else None)
    if not isinstance(parts, list) or (not parts and not streamed):
        raise MalformedResponseError(
            "the candidate has no parts: no text and no function call",
            url=url,
            path="/candidates/0/content/parts",
        )
    return candidate, parts


def _read_parts(parts: list[Any], url: str) -> Iterator[tuple[str, Any]]:
    """Each part as ("text", str) or ("call", (name, args)); thoughts are skipped."""
    for i, part in enumerate(parts):
        path = f"/candidates/0/content/parts/{i}"
        if not isinstance(part, dict):
            raise MalformedResponseError("expected a part object", url=url, path=path)
        if part.get("thought") is True:
            continue
        if "text" in part:
            if not isinstance(part["text"], str):
                raise MalformedResponseError("text must be a string", url=url, path=f"{path}/text")
            yield "text", part["text"]
        elif "functionCall" in part:
            call = part["functionCall"]
            name = call.get("name") if isinstance(call, dict) else None
            args = call.get("args", {}) if isinstance(call, dict) else None
            if not isinstance(name, str) or not name or not isinstance(args, dict):
                raise MalformedResponseError(
                    "a functionCall needs a name and object args",
                    url=url,
                    path=f"{path}/functionCall",
                )
            yield "call", (name, args)
        # executableCode, inlineData and parts added later carry nothing this client keeps.


def parse_gemini(answer: JsonValue, url: str) -> Reply:
    """The reply a non-streamed `generateContent` answer carries.

    Raises:
        MalformedResponseError: The answer is not a GenerateContentResponse, its candidate has
            no parts (`path` names them), or (reason `refused`) the prompt or answer was blocked.
    """
    candidate, parts = _candidate(answer, url, streamed=False)
    assert isinstance(answer, dict)
    texts: list[str] = []
    calls: list[tuple[str, dict[str, JsonValue]]] = []
    for kind, value in _read_parts(parts, url):
        if kind == "text":
            texts.append(value)
        else:
            calls.append(value)
    if not texts and not calls and candidate.get("finishReason") in (None, "STOP"):
        raise MalformedResponseError(
            "the candidate has no text and no function call",
            url=url,
            path="/candidates/0/content/parts",
        )
    input_tokens, output_tokens = _usage(answer)
    model = answer.get("modelVersion")
    return Reply(
        content="".join(texts) if texts else None,
        tool_calls=tuple(calls),
        finish_reason=_finish(candidate.get("finishReason"), bool(calls)),
        usage=Usage(input_tokens=input_tokens or 0, output_tokens=output_tokens or 0),
        model_name=model if isinstance(model, str) else "",
    )


def gemini_chunks(raw: Iterable[bytes], url: str) -> Iterator[Chunk]:
    """Decode a `streamGenerateContent?alt=sse` stream into vocab chunks.

    Each event's text parts are text deltas and each function call a whole call (start,
    arguments, end); its usage replaces the last; the first `finishReason` ends the reply.

    Raises:
        MalformedResponseError: An event is not a GenerateContentResponse, or (reason
            `refused`) the prompt or answer was blocked.
    """
    calls = 0
    finish: FinishReason | None = None
    model_name = ""
    for number, data in enumerate(sse_data(raw, url)):
        event = json_line(data, url, number, "event")
        candidate, parts = _candidate(event, url, streamed=True)
        for kind, value in _read_parts(parts, url):
            if kind == "text":
                if value:
                    yield TextDelta(text=value)
            else:
                name, args = value
                yield ToolCallStart(index=calls, id=f"call_{calls}", name=name)
                yield ToolCallDelta(index=calls, arguments=json.dumps(args))
                yield ToolCallEnd(index=calls)
                calls += 1
        input_tokens, output_tokens = _usage(event)
        if input_tokens is not None or output_tokens is not None:
            yield UsageChunk(input_tokens=input_tokens, output_tokens=output_tokens)
        if isinstance(event.get("modelVersion"), str):
            model_name = event["modelVersion"]
        reason = candidate.get("finishReason")
        if reason is not None and finish is None:
            finish = _finish(reason, calls > 0)
    if finish is not None:
        yield FinishChunk(reason=finish, model_name=model_name)
