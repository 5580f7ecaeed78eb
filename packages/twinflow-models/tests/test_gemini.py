"""`GeminiChatModel`: bodies held against google-genai's own types, replies built with them,
and a recorded exchange with a scripted `generateContent` server on loopback."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from google.genai import types as genai
from pydantic import BaseModel, JsonValue

from twinflow.kernel import CountingIds, LoopbackResponse, LoopbackServer
from twinflow.kernel._loopback import LoopbackRequest
from twinflow.models import MalformedResponseError, open_model
from twinflow.models._gemini import GeminiChatModel
from twinflow.models._gemini_wire import gemini_body, gemini_chunks, parse_gemini
from twinflow.vocab import (
    Message,
    ModelRequest,
    ModelSettings,
    OutputSchema,
    ToolCallPart,
    ToolResultPart,
    ToolSpec,
    Transcript,
    assemble,
)

STREAMS = Path(__file__).parent / "fixtures" / "streams"
PLAIN: dict[str, Any] = json.loads((STREAMS / "gemini_plain.json").read_text())
KEY = "AIza-gemini-test-0123456789"
URL = "http://127.0.0.1:9/v1beta/models/m:generateContent"

ADD = ToolSpec(
    name="add",
    description="Add two integers.",
    parameters={
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
    },
)


class Sum(BaseModel):
    total: int
    note: str | None = None


def conversation() -> Transcript:
    """A system prompt, a question, a call and its result: every kind of part Gemini carries."""
    call = ToolCallPart(id="c1", name="add", arguments={"a": 2, "b": 3})
    return Transcript(
        messages=(
            Message.system("You add numbers."),
            Message.user("add 2 and 3"),
            Message(role="assistant", parts=(call,)),
            Message(
                role="tool",
                parts=(ToolResultPart(call_id="c1", name="add", content="5"),),
            ),
        )
    )


def test_a_body_is_what_google_genai_types_accept_and_give_back() -> None:
    """contents, systemInstruction, tools and generationConfig each round-trip google-genai's types."""
    schema = OutputSchema(name="Sum", json_schema=Sum.model_json_schema())
    body: dict[str, Any] = gemini_body(
        conversation(),
        ModelSettings(temperature=0, max_tokens=64, seed=7),
        [ADD],
        schema.json_schema,
    )
    checked = {
        "contents": [genai.Content.model_validate(c) for c in body["contents"]],
        "systemInstruction": genai.Content.model_validate(body["systemInstruction"]),
        "tools": [genai.Tool.model_validate(t) for t in body["tools"]],
        "generationConfig": genai.GenerationConfig.model_validate(body["generationConfig"]),
    }

    def dumped(value: Any) -> Any:
        if isinstance(value, list):
            return [dumped(v) for v in value]
        return value.model_dump(mode="json", by_alias=True, exclude_none=True)

    assert body == {key: dumped(value) for key, value in checked.items()}
    assert ["user", "model", "user"] == [c["role"] for c in body["contents"]]


def test_the_response_schema_is_gemini_s_subset() -> None:
    """A pydantic model's schema: refs inlined, Optional as nullable, types upper-case, ordered."""
    body: dict[str, Any] = gemini_body(
        Transcript(messages=(Message.user("x"),)), ModelSettings(), [], Sum.model_json_schema()
    )
    config = body["generationConfig"]
    assert (
        "application/json",
        {
            "type": "OBJECT",
            "title": "Sum",
            "properties": {
                "total": {"type": "INTEGER", "title": "Total"},
                "note": {"type": "STRING", "nullable": True, "title": "Note"},
            },
            "propertyOrdering": ["total", "note"],
            "required": ["total"],
        },
    ) == (config["responseMimeType"], config["responseSchema"])


def sdk_answer(
    *parts: genai.Part, finish: genai.FinishReason = genai.FinishReason.STOP
) -> JsonValue:
    """A GenerateContentResponse built with google-genai's types, as the wire carries it."""
    answer = genai.GenerateContentResponse(
        candidates=[
            genai.Candidate(
                content=genai.Content(role="model", parts=list(parts)), finish_reason=finish
            )
        ],
        usage_metadata=genai.GenerateContentResponseUsageMetadata(
            prompt_token_count=12, candidates_token_count=4, total_token_count=16
        ),
        model_version="gemini-2.5-flash",
    )
    dumped: JsonValue = answer.model_dump(mode="json", by_alias=True, exclude_none=True)
    return dumped


def test_a_reply_built_with_google_genai_types_reads_back() -> None:
    """Text and a function call from the SDK's own response type: the reply, usage and model."""
    answer = sdk_answer(
        genai.Part(text="Adding."),
        genai.Part(function_call=genai.FunctionCall(name="add", args={"a": 2, "b": 3})),
    )
    reply = parse_gemini(answer, URL)
    assert ("Adding.", (("add", {"a": 2, "b": 3}),), "tool_calls", 12, 4, "gemini-2.5-flash") == (
        reply.content,
        reply.tool_calls,
        reply.finish_reason,
        reply.usage.input_tokens,
        reply.usage.output_tokens,
        reply.model_name,
    )


@pytest.mark.parametrize("name", ["gemini_text.sse", "gemini_function_call.sse"])
def test_each_stream_assembles_to_its_plain_answer(name: str) -> None:
    """Cut at every byte: the streamed chunks assemble to the reply the plain answer parses to."""
    data = (STREAMS / name).read_bytes()
    plain = parse_gemini(PLAIN[name], URL)
    for cut in range(len(data) + 1):
        response = assemble(list(gemini_chunks([data[:cut], data[cut:]], URL)))
        text = "".join(p.text for p in response.message.parts if hasattr(p, "text")) or None
        calls = tuple((c.name, c.arguments) for c in response.message.tool_calls)
        assert (plain.content, plain.tool_calls, plain.finish_reason, plain.usage) == (
            text,
            calls,
            response.finish_reason,
            response.usage,
        )


@pytest.mark.parametrize(
    ("answer", "path"),
    [
        (
            {"promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": {"promptTokenCount": 9}},
            "/promptFeedback/blockReason",
        ),
        ({"candidates": [{"finishReason": "SAFETY", "index": 0}]}, "/candidates/0/finishReason"),
        (
            {"candidates": [{"content": {"parts": [{"text": "Once upon"}]}, "finishReason": "RECITATION"}]},
            "/candidates/0/finishReason",
        ),
    ],
)  # fmt: skip
def test_a_blocked_prompt_or_candidate_is_a_typed_refusal(answer: JsonValue, path: str) -> None:
    """promptFeedback.blockReason or a SAFETY/RECITATION finish: reason `refused`, never an empty answer."""
    with pytest.raises(MalformedResponseError) as caught:
        parse_gemini(answer, URL)
    assert ("refused", path) == (caught.value.reason, caught.value.path)


def test_a_blocked_candidate_in_a_stream_is_a_typed_refusal() -> None:
    """A stream whose last event says SAFETY refuses the reply, whatever text came before."""
    events = [
        {"candidates": [{"content": {"parts": [{"text": "Sure"}], "role": "model"}}]},
        {"candidates": [{"finishReason": "SAFETY"}]},
    ]
    data = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events)
    with pytest.raises(MalformedResponseError) as caught:
        list(gemini_chunks([data], URL))
    assert "refused" == caught.value.reason


@pytest.mark.parametrize(
    "answer",
    [
        {"candidates": [{"content": {"role": "model", "parts": []}, "finishReason": "STOP"}]},
        {"candidates": [{"content": {"role": "model"}, "finishReason": "STOP"}]},
        {"candidates": []},
        {"candidates": [{"content": {"parts": [{"functionCall": {"args": {}}}]}}]},
        {"candidates": [{"content": {"parts": [{"text": "x"}]}, "finishReason": ["SAFETY"]}]},
    ],
)
def test_empty_parts_or_no_candidate_is_malformed(answer: JsonValue) -> None:
    """No parts, no candidate, a nameless call: reason `malformed`, pointing into the candidate."""
    with pytest.raises(MalformedResponseError) as caught:
        parse_gemini(answer, URL)
    assert ("malformed", True) == (
        caught.value.reason,
        caught.value.path.startswith("/candidates"),
    )


class ScriptedGemini:
    """generateContent on loopback: a call to `add` first, then the answer once its result came.

    Refuses a request without `x-goog-api-key: KEY`; streamed requests (by URL) get the
    recorded streams cut into 7-byte pieces.
    """

    def __init__(self) -> None:
        self.seen: list[tuple[str, dict[str, str], Any]] = []

    def __call__(self, request: LoopbackRequest) -> LoopbackResponse:
        headers = {k.lower(): v for k, v in request.headers}
        body = request.json_value()
        self.seen.append((request.path, headers, body))
        if headers.get("x-goog-api-key") != KEY:
            error = {"error": {"code": 403, "message": "no key", "status": "PERMISSION_DENIED"}}
            return LoopbackResponse.json_body(error, status=403)
        assert isinstance(body, dict)
        answered = any("functionResponse" in part for c in body["contents"] for part in c["parts"])
        name = "gemini_text.sse" if answered else "gemini_function_call.sse"
        if "streamGenerateContent" not in request.path:
            return LoopbackResponse.json_body(PLAIN[name])
        data = (STREAMS / name).read_bytes()
        return LoopbackResponse(
            headers=(("Content-Type", "text/event-stream"),),
            stream=lambda: (data[i : i + 7] for i in range(0, len(data), 7)),
        )


RECORDED_FIRST_BODY = {
    "contents": [{"role": "user", "parts": [{"text": "add 2 and 3"}]}],
    "systemInstruction": {"parts": [{"text": "You add numbers."}]},
    "tools": [
        {
            "functionDeclarations": [
                {
                    "name": "add",
                    "description": "Add two integers.",
                    "parameters": {
                        "type": "OBJECT",
                        "properties": {"a": {"type": "INTEGER"}, "b": {"type": "INTEGER"}},
                        "propertyOrdering": ["a", "b"],
                        "required": ["a", "b"],
                    },
                }
            ]
        }
    ],
    "generationConfig": {"temperature": 0.0, "maxOutputTokens": 64},
}
"""The first body of the recorded exchange, as sent (plain and streamed alike)."""


@pytest.mark.parametrize("streamed", [False, True])
def test_a_recorded_exchange_calls_the_tool_then_answers(
    streamed: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """gemini:MODEL@URL: the key in x-goog-api-key, the call, its result sent back, the answer."""
    monkeypatch.setenv("GEMINI_API_KEY", KEY)
    server = ScriptedGemini()
    settings = ModelSettings(temperature=0, max_tokens=64)
    system, user = Message.system("You add numbers."), Message.user("add 2 and 3")
    chunks: list[Any] = []
    with (
        LoopbackServer(server) as loop,
        open_model(f"gemini:gemini-2.5-flash@{loop.url}", ids=CountingIds()) as chat,
    ):
        assert isinstance(chat, GeminiChatModel)

        def ask(*messages: Message) -> Any:
            request = ModelRequest(
                transcript=Transcript(messages=messages), tools=(ADD,), settings=settings
            )
            return chat.stream(request, chunks.append) if streamed else chat.request(request)

        first = ask(system, user)
        (call,) = first.message.tool_calls
        result = Message(
            role="tool", parts=(ToolResultPart(call_id=call.id, name="add", content="5"),)
        )
        second = ask(system, user, first.message, result)
    verb = "streamGenerateContent?alt=sse" if streamed else "generateContent"
    assert [f"/v1beta/models/gemini-2.5-flash:{verb}"] * 2 == [path for path, _, _ in server.seen]
    assert [KEY, KEY] == [headers["x-goog-api-key"] for _, headers, _ in server.seen]
    assert RECORDED_FIRST_BODY == server.seen[0][2]
    assert {"role": "user", "parts": [{"functionResponse": {"name": "add", "response": {"result": "5"}}}]} == server.seen[1][2]["contents"][-1]  # fmt: skip
    assert (("add", {"a": 2, "b": 3}), "The sum of 2 and 3 is 5.", 21, 11) == (
        (call.name, call.arguments),
        second.message.text,
        second.usage.input_tokens,
        second.usage.output_tokens,
    )
    assert streamed == bool(chunks)
    assert all(KEY not in json.dumps(body) for _, _, body in server.seen)
