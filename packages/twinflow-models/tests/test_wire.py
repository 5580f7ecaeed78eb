"""Wire translation: golden examples copied from provider docs, round trips, Ollama's own types, fuzzing."""

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from ollama._types import ChatRequest
from vocab_strategies import json_values, transcripts

from twinflow.models._anthropic_wire import from_anthropic, to_anthropic, to_anthropic_tools
from twinflow.models._ollama_wire import (
    from_ollama_messages,
    ollama_chat_request,
    to_ollama_messages,
    to_ollama_tools,
)
from twinflow.models._openai_wire import (
    _reply_messages,
    from_openai_messages,
    to_openai_messages,
    to_openai_tools,
)
from twinflow.vocab import (
    CallId,
    MediaPart,
    Message,
    ModelRequest,
    ModelSettings,
    OutputSchema,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    ToolSpec,
    Transcript,
    WireFormatError,
)


def _calls(call_id: str, name: str, args: dict[str, Any], text: str | None = None) -> Message:
    parts: tuple[TextPart | ToolCallPart, ...] = (
        ToolCallPart(id=CallId(call_id), name=name, arguments=args),
    )
    return Message(
        role="assistant", parts=((TextPart(text=text), *parts) if text is not None else parts)
    )


def _result(call_id: str, name: str, content: str, is_error: bool = False) -> Message:
    return Message(
        role="tool",
        parts=(
            ToolResultPart(call_id=CallId(call_id), name=name, content=content, is_error=is_error),
        ),
    )


# Golden payloads: faithful copies of the providers' published examples, one file each under
# fixtures/wire/ (fixtures/wire/README.md names the page or repo+path each was copied from).
WIRE = Path(__file__).parent / "fixtures" / "wire"


def _load(name: str) -> Any:
    return json.loads((WIRE / name).read_text(encoding="utf-8"))


# OpenAI API reference, "Create chat completion", example "Functions": the request's messages
# followed by the response's assistant message, as the guide says to append it.
OPENAI_FUNCTIONS = _load("openai/chat_create_functions.json")
OPENAI_DOC = [
    *OPENAI_FUNCTIONS["request"]["messages"],
    OPENAI_FUNCTIONS["response"]["choices"][0]["message"],
]
OPENAI_EXPECTED = Transcript(
    messages=(
        Message.user("What's the weather like in Boston today?"),
        _calls("call_abc123", "get_current_weather", {"location": "Boston, MA"}),
    )
)
# OpenAI API reference, "Create chat completion", example "Image input".
OPENAI_VISION_DOC = _load("openai/chat_create_image_input.json")["request"]["messages"]

# Ollama docs/api.md, "Chat request (with tools)": the request and its response message.
OLLAMA_TOOLS = _load("ollama/api_chat_with_tools.json")
OLLAMA_DOC = [*OLLAMA_TOOLS["request"]["messages"], OLLAMA_TOOLS["response"]["message"]]
OLLAMA_TOOL = ToolSpec(
    name=OLLAMA_TOOLS["request"]["tools"][0]["function"]["name"],
    description=OLLAMA_TOOLS["request"]["tools"][0]["function"]["description"],
    parameters=OLLAMA_TOOLS["request"]["tools"][0]["function"]["parameters"],
)
# Ollama docs/capabilities/tool-calling.mdx: the follow-up requests carrying tool results.
OLLAMA_SINGLE = _load("ollama/tool_calling_single.json")["messages"]
OLLAMA_PARALLEL = _load("ollama/tool_calling_parallel.json")["messages"]
# Ollama docs/api.md, "Chat request (with images)".
OLLAMA_IMAGE_DOC = _load("ollama/api_chat_with_images.json")["messages"]

# Anthropic "How to implement tool use": the user's question and tool (from the request
# examples), the tool_use response, and each published tool_result message.
ANTHROPIC_REQUEST = _load("anthropic/request_with_tool.json")
ANTHROPIC_RESPONSE = _load("anthropic/tool_use_response.json")
ANTHROPIC_RESULTS = _load("anthropic/tool_results.json")
ANTHROPIC_SYSTEM = _load("anthropic/system_prompt_request.json")


def _anthropic_round(result: str) -> dict[str, Any]:
    """The docs' conversation: question, the tool_use response, then the named tool_result."""
    return {
        "messages": [
            *ANTHROPIC_REQUEST["messages"],
            {"role": ANTHROPIC_RESPONSE["role"], "content": ANTHROPIC_RESPONSE["content"]},
            ANTHROPIC_RESULTS[result],
        ]
    }


ANTHROPIC_DOC = _anthropic_round("successful")
ANTHROPIC_EXPECTED = Transcript(
    messages=(
        Message.user("What's the weather like in San Francisco?"),
        _calls(
            "toolu_01A09q90qw90lq917835lq9",
            "get_weather",
            {"location": "San Francisco, CA", "unit": "celsius"},
            text="I'll check the current weather in San Francisco for you.",
        ),
        _result("toolu_01A09q90qw90lq917835lq9", "get_weather", "15 degrees"),
    )
)


def _parsed_arguments(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI messages with each call's `arguments` JSON text parsed (its spacing is not data)."""
    out = []
    for m in messages:
        m = dict(m)
        if m.get("tool_calls"):
            m["tool_calls"] = [
                {
                    **c,
                    "function": {
                        **c["function"],
                        "arguments": json.loads(c["function"]["arguments"]),
                    },
                }
                for c in m["tool_calls"]
            ]
        out.append(m)
    return out


def _as_ollama_writes(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The docs' messages in the form we write: `content` always present, calls without the
    optional `type` and `function.index` (the form docs/api.md's own responses show)."""
    out = []
    for m in messages:
        m = {
            "role": m["role"],
            "content": m.get("content", ""),
            **{k: v for k, v in m.items() if k not in ("role", "content")},
        }
        if "tool_calls" in m:
            m["tool_calls"] = [
                {"function": {k: v for k, v in c["function"].items() if k != "index"}}
                for c in m["tool_calls"]
            ]
        out.append(m)
    return out


def test_openai_golden_both_ways() -> None:
    """The OpenAI reference's Functions example reads to the expected transcript and writes back the same JSON."""
    assert OPENAI_EXPECTED == from_openai_messages(OPENAI_DOC)
    written = to_openai_messages(OPENAI_EXPECTED)
    assert _parsed_arguments(OPENAI_DOC) == _parsed_arguments(written)
    # the docs' arguments text is pretty-printed; we send the canonical form of the same value
    assert '{"location":"Boston, MA"}' == written[1]["tool_calls"][0]["function"]["arguments"]
    spec = OPENAI_FUNCTIONS["request"]["tools"][0]["function"]
    tool = ToolSpec(
        name=spec["name"], description=spec["description"], parameters=spec["parameters"]
    )
    assert OPENAI_FUNCTIONS["request"]["tools"] == to_openai_tools([tool])


def test_openai_tool_message_answers_the_golden_call() -> None:
    """A `tool` message in the guide's documented shape answers the reference example's call by id."""
    tool_message = {"role": "tool", "tool_call_id": "call_abc123", "content": "22"}
    expected = OPENAI_EXPECTED.append(_result("call_abc123", "get_current_weather", "22"))
    assert expected == from_openai_messages([*OPENAI_DOC, tool_message])
    assert tool_message == to_openai_messages(expected)[-1]


def test_openai_vision_golden() -> None:
    """The OpenAI reference's Image input example reads to text plus a URL image, and writes back identically."""
    t = from_openai_messages(OPENAI_VISION_DOC)
    url = OPENAI_VISION_DOC[0]["content"][1]["image_url"]["url"]
    expected = Message(
        role="user",
        parts=(TextPart(text="What's in this image?"), MediaPart(media_type="image/*", uri=url)),
    )
    assert (expected,) == t.messages
    assert OPENAI_VISION_DOC == to_openai_messages(t)


def test_ollama_golden_both_ways() -> None:
    """Ollama's api.md tool request and response read with assigned ids and write back identically."""
    expected = Transcript(
        messages=(
            Message.user("What is the weather today in Paris?"),
            _calls(
                "call_1_0", "get_current_weather", {"format": "celsius", "location": "Paris, FR"}
            ),
        )
    )
    assert expected == from_ollama_messages(OLLAMA_DOC)
    assert OLLAMA_DOC == to_ollama_messages(expected)


def test_ollama_golden_request_is_rebuilt_exactly() -> None:
    """The body built from api.md's tool request is that request, and validates as ollama's ChatRequest."""
    request = OLLAMA_TOOLS["request"]
    body = ollama_chat_request(
        ModelRequest(transcript=from_ollama_messages(request["messages"]), tools=(OLLAMA_TOOL,)),
        model=request["model"],
    )
    assert request == body
    assert "get_current_weather" == ChatRequest(**body).tools[0].function.name  # type: ignore[index,union-attr]  # ollama's optional fields, set in this body


def test_ollama_tool_calling_single_golden() -> None:
    """The tool-calling docs' single-result request reads to call and result, and writes back the same messages."""
    expected = Transcript(
        messages=(
            Message.user("What is the temperature in New York?"),
            _calls("call_1_0", "get_temperature", {"city": "New York"}),
            _result("call_1_0", "get_temperature", "22°C"),
        )
    )
    assert expected == from_ollama_messages(OLLAMA_SINGLE)
    assert _as_ollama_writes(OLLAMA_SINGLE) == to_ollama_messages(expected)
    assert len(OLLAMA_SINGLE) == len(
        ChatRequest(model="qwen3", messages=to_ollama_messages(expected)).messages or []
    )


def test_ollama_tool_calling_parallel_golden() -> None:
    """The parallel example's four results match its four calls in order (same tool twice), and write back."""
    calls = [("get_temperature", "New York"), ("get_conditions", "New York"),
             ("get_temperature", "London"), ("get_conditions", "London")]  # fmt: skip
    results = ["22°C", "Partly cloudy", "15°C", "Rainy"]
    expected = Transcript(
        messages=(
            Message.user(
                "What are the current weather conditions and temperature in New York and London?"
            ),
            Message(
                role="assistant",
                parts=tuple(
                    ToolCallPart(id=CallId(f"call_1_{i}"), name=name, arguments={"city": city})
                    for i, (name, city) in enumerate(calls)
                ),
            ),
            Message(
                role="tool",
                parts=tuple(
                    ToolResultPart(call_id=CallId(f"call_1_{i}"), name=name, content=content)
                    for i, ((name, _), content) in enumerate(zip(calls, results, strict=True))
                ),
            ),
        )
    )
    assert expected == from_ollama_messages(OLLAMA_PARALLEL)
    assert _as_ollama_writes(OLLAMA_PARALLEL) == to_ollama_messages(expected)


def test_ollama_image_golden() -> None:
    """The api.md image example reads as a PNG data: URI and writes back as the same bare base64."""
    t = from_ollama_messages(OLLAMA_IMAGE_DOC)
    data = OLLAMA_IMAGE_DOC[0]["images"][0]
    expected = Message(
        role="user",
        parts=(
            TextPart(text="what is in this image?"),
            MediaPart(media_type="image/png", uri="data:image/png;base64," + data),
        ),
    )
    assert (expected,) == t.messages
    assert OLLAMA_IMAGE_DOC == to_ollama_messages(t)


def test_anthropic_golden_both_ways() -> None:
    """Anthropic's tool-use round (question, tool_use response, tool_result) reads as expected and writes back identically."""
    assert ANTHROPIC_EXPECTED == from_anthropic(ANTHROPIC_DOC)
    assert ANTHROPIC_DOC == to_anthropic(ANTHROPIC_EXPECTED)
    tool = ANTHROPIC_REQUEST["tool"]
    spec = ToolSpec(
        name=tool["name"], description=tool["description"], parameters=tool["input_schema"]
    )
    assert [tool] == to_anthropic_tools([spec])


@pytest.mark.parametrize("example", ["tool_execution_error", "invalid_tool_name"])
def test_anthropic_error_results_golden(example: str) -> None:
    """The docs' is_error tool results read as error results and write back identically."""
    doc = _anthropic_round(example)
    block = ANTHROPIC_RESULTS[example]["content"][0]
    expected = ANTHROPIC_EXPECTED.model_copy(
        update={
            "messages": (
                *ANTHROPIC_EXPECTED.messages[:2],
                _result(block["tool_use_id"], "get_weather", block["content"], is_error=True),
            )
        }
    )
    assert expected == from_anthropic(doc)
    assert doc == to_anthropic(expected)


@pytest.mark.parametrize(
    ("example", "content"),
    [("empty", ""), ("with_documents", "The weather is\n15 degrees")],
)
def test_anthropic_result_content_forms_golden(example: str, content: str) -> None:
    """The docs' empty and text-document tool results read as text results."""
    result = from_anthropic(_anthropic_round(example)).messages[-1].tool_results[0]
    assert content == result.content


def test_anthropic_result_with_image_is_refused_at_its_path() -> None:
    """An image inside a tool_result (a result is text here) raises WireFormatError at the image block."""
    with pytest.raises(WireFormatError) as info:
        from_anthropic(_anthropic_round("with_images"))
    assert "/messages/2/content/0/content/1/type" == info.value.path


def test_anthropic_system_prompt_golden() -> None:
    """The system-prompts page's request reads with `system` as the first message and writes back the same."""
    doc = {k: ANTHROPIC_SYSTEM[k] for k in ("system", "messages")}
    expected = Transcript(
        messages=(
            Message.system("You are a seasoned data scientist at a Fortune 500 company."),
            Message.user("Analyze this dataset for anomalies: <dataset>{{DATASET}}</dataset>"),
        )
    )
    assert expected == from_anthropic(doc)
    assert doc == to_anthropic(expected)


def test_anthropic_thinking_is_read() -> None:
    """A thinking block in an assistant turn reads as reasoning; redacted thinking is skipped."""
    payload = {
        "messages": [
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "Let me think.", "signature": "EqQBCgIYAhIM"},
                    {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"},
                    {"type": "text", "text": "Done."},
                ],
            }
        ]
    }
    expected = Message(
        role="assistant", parts=(ReasoningPart(text="Let me think."), TextPart(text="Done."))
    )
    assert (expected,) == from_anthropic(payload).messages


def test_tools_translate() -> None:
    """Tool specs become each provider's tool declaration."""
    expected_ollama = [
        {
            "type": "function",
            "function": {
                "name": OLLAMA_TOOL.name,
                "description": OLLAMA_TOOL.description,
                "parameters": OLLAMA_TOOL.parameters,
            },
        }
    ]
    assert expected_ollama == to_ollama_tools([OLLAMA_TOOL])
    assert expected_ollama == to_openai_tools([OLLAMA_TOOL])
    expected_anthropic = [
        {
            "name": OLLAMA_TOOL.name,
            "description": OLLAMA_TOOL.description,
            "input_schema": OLLAMA_TOOL.parameters,
        }
    ]
    assert expected_anthropic == to_anthropic_tools([OLLAMA_TOOL])


def _ollama_ids(t: Transcript) -> Transcript:
    """Rename call ids to the ones reading Ollama assigns (`call_<message>_<index>`)."""
    rename: dict[str, str] = {}
    messages = []
    for i, m in enumerate(t.messages):
        parts = []
        k = 0
        for p in m.parts:
            if isinstance(p, ToolCallPart):
                rename[p.id] = f"call_{i}_{k}"
                p = p.model_copy(update={"id": CallId(rename[p.id])})
                k += 1
            elif isinstance(p, ToolResultPart):
                p = p.model_copy(update={"call_id": CallId(rename[p.call_id])})
            parts.append(p)
        messages.append(m.model_copy(update={"parts": tuple(parts)}))
    return Transcript(messages=tuple(messages))


def _expressible(t: Transcript, *, is_error: bool, media: bool = True) -> bool:
    for m in t.messages:
        texts = [p for p in m.parts if isinstance(p, TextPart)]
        if len(texts) > 1 or (m.role != "assistant" and not texts):
            return False
        if not is_error and any(p.is_error for p in m.tool_results):
            return False
        if not media and any(isinstance(p, MediaPart) for p in m.parts):
            return False
    return True


def _data_media_only(t: Transcript) -> Transcript:
    """Drop media referenced by URL: its media type does not travel on OpenAI or Anthropic."""
    return Transcript(
        messages=tuple(
            m.model_copy(
                update={
                    "parts": tuple(
                        p
                        for p in m.parts
                        if not isinstance(p, MediaPart) or p.uri.startswith("data:")
                    )
                }
            )
            for m in t.messages
        )
    )


@given(transcripts(structured=False))
def test_openai_round_trip(t: Transcript) -> None:
    """Transcripts OpenAI can express (no error flags, data: media) round-trip to equal values."""
    t = _data_media_only(t)
    if _expressible(t, is_error=False):
        assert t == from_openai_messages(to_openai_messages(t))


def _read_or_refusal(read: Any, message: Any) -> Any:
    try:
        return tuple(read([message]))
    except WireFormatError as exc:
        return (str(exc), exc.path)


_BAD_ASSISTANT = [
    {"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "{"}}]},
    {"role": "assistant", "tool_calls": [{"id": "c", "function": {"arguments": "{}"}}]},
    {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "[]"}}]},
    {"role": "assistant", "tool_calls": "no"},
    {"role": "assistant", "content": 7},
    {"role": "assistant", "reasoning_content": 1},
    {"role": "tool", "tool_call_id": "c", "content": "x"},
    {"role": "robot"},
]


@given(transcripts(structured=False), st.sampled_from(_BAD_ASSISTANT))
def test_a_reply_message_reads_as_in_a_transcript(t: Transcript, bad: dict[str, Any]) -> None:
    """A reply's one message, read alone, is what reading it as a transcript gives (or the
    same refusal at the same place): any message OpenAI can express, and broken ones."""
    for message in [*to_openai_messages(_data_media_only(t)), bad]:
        expected = _read_or_refusal(lambda ms: from_openai_messages(ms).messages, message)
        assert expected == _read_or_refusal(_reply_messages, message)


@given(transcripts(structured=False, media=False))
def test_ollama_round_trip(t: Transcript) -> None:
    """Transcripts Ollama can express round-trip to equal values, ids renamed as Ollama assigns them."""
    t = _ollama_ids(t)
    empty_beside_others = any(
        len(m.parts) > 1 and any(isinstance(p, TextPart) and not p.text for p in m.parts)
        for m in t.messages
    )
    if _expressible(t, is_error=False) and not empty_beside_others:
        assert t == from_ollama_messages(to_ollama_messages(t))


@given(transcripts(reasoning=False, structured=False))
def test_anthropic_round_trip(t: Transcript) -> None:
    """Transcripts Anthropic can express (images and PDFs by data: URI) round-trip to equal values, error flags included."""
    t = _data_media_only(t)
    media = [p for m in t.messages for p in m.parts if isinstance(p, MediaPart)]
    if any(p.media_type.startswith("audio/") for p in media):
        return  # Messages takes no audio: test_audio_is_input_audio_on_openai_and_refused_by_anthropic
    if _expressible(t, is_error=True):
        assert t == from_anthropic(to_anthropic(t))


@given(
    transcripts(media=False),
    st.sampled_from([None, 0.0, 0.7]),
    st.sampled_from([None, 64]),
    st.sampled_from([None, 42]),
)
def test_ollama_request_bodies_validate_against_ollama_types(
    t: Transcript, temperature: float | None, max_tokens: int | None, seed: int | None
) -> None:
    """Every /api/chat body we build validates as ollama's own ChatRequest and keeps its fields."""
    request = ModelRequest(
        transcript=t,
        tools=(OLLAMA_TOOL,),
        output_schema=OutputSchema(
            name="Answer", json_schema={"type": "object", "properties": {"x": {"type": "integer"}}}
        ),
        settings=ModelSettings(temperature=temperature, max_tokens=max_tokens, seed=seed),
    )
    body = ollama_chat_request(request, model="smollm2:135m")
    validated = ChatRequest(**body)
    assert ("smollm2:135m", False, body["format"]) == (
        validated.model,
        validated.stream,
        validated.format,
    )
    assert len(body["messages"]) == len(validated.messages or [])


@pytest.mark.parametrize(
    ("reader", "payload", "path"),
    [
        (from_openai_messages, {"role": "user"}, ""),
        (from_openai_messages, [{"role": "user", "content": 3}], "/0/content"),
        (from_openai_messages, [{"role": "robot", "content": "x"}], "/0/role"),
        (
            from_openai_messages,
            [{"role": "tool", "tool_call_id": "nope", "content": "x"}],
            "/0/tool_call_id",
        ),
        (
            from_openai_messages,
            [
                {
                    "role": "assistant",
                    "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "{oops"}}],
                }
            ],
            "/0/tool_calls/0/function/arguments",
        ),
        (
            from_ollama_messages,
            [{"role": "tool", "content": "x", "tool_name": "f"}],
            "/0/tool_name",
        ),
        (
            from_ollama_messages,
            [{"role": "assistant", "tool_calls": [{"function": {"name": ""}}]}],
            "/0/tool_calls/0",
        ),
        (
            from_anthropic,
            {"messages": [{"role": "user", "content": [{"type": "video"}]}]},
            "/messages/0/content/0/type",
        ),
        (
            from_anthropic,
            {
                "messages": [
                    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "x"}]}
                ]
            },
            "/messages/0/content/0/tool_use_id",
        ),
        (from_anthropic, {"system": 5, "messages": []}, "/system"),
    ],
)
def test_malformed_payloads_name_the_path(reader: Any, payload: object, path: str) -> None:
    """Malformed payloads raise WireFormatError pointing at the offending part."""
    with pytest.raises(WireFormatError) as info:
        reader(payload)
    assert path == info.value.path


def _mutate(doc: Any, choice: int, replacement: Any) -> Any:
    """Replace the `choice`-th node (pre-order) of `doc` with `replacement`."""
    counter = [choice]

    def walk(node: Any) -> Any:
        if counter[0] == 0:
            counter[0] -= 1
            return replacement
        counter[0] -= 1
        if isinstance(node, dict):
            return {k: walk(v) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    return walk(doc)


READERS = [
    (from_openai_messages, OPENAI_DOC),
    (from_openai_messages, OPENAI_VISION_DOC),
    (from_ollama_messages, OLLAMA_DOC),
    (from_ollama_messages, OLLAMA_PARALLEL),
    (from_ollama_messages, OLLAMA_IMAGE_DOC),
    (from_anthropic, ANTHROPIC_DOC),
    (from_anthropic, _anthropic_round("with_documents")),
    (from_anthropic, ANTHROPIC_SYSTEM),
]


@given(st.sampled_from(READERS), st.integers(min_value=0, max_value=40), json_values)
def test_fuzzed_payloads_raise_only_wire_format_error(
    reader_doc: tuple[Any, Any], choice: int, replacement: Any
) -> None:
    """Golden payloads with any node replaced by random JSON either read or raise WireFormatError."""
    reader, doc = reader_doc
    try:
        result = reader(_mutate(doc, choice, replacement))
    except WireFormatError:
        return
    assert isinstance(result, Transcript)


@given(st.sampled_from([from_openai_messages, from_ollama_messages, from_anthropic]), json_values)
def test_random_json_raises_only_wire_format_error(reader: Any, payload: Any) -> None:
    """Arbitrary JSON either reads or raises WireFormatError, never anything else."""
    try:
        result = reader(payload)
    except WireFormatError:
        return
    assert isinstance(result, Transcript)


def test_deep_tool_arguments_in_a_transcript_are_a_wire_format_error() -> None:
    """OpenAI tool-call arguments nested past the limit: a WireFormatError at the arguments."""
    call = {"name": "f", "arguments": '{"a": ' + "[" * 100 + "]" * 100 + "}"}
    messages = [
        {"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": call}]}
    ]
    with pytest.raises(WireFormatError) as caught:
        from_openai_messages(messages)
    assert "/0/tool_calls/0/function/arguments" == caught.value.path
