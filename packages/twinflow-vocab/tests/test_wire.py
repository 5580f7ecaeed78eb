"""Wire translation: golden examples from provider docs, round trips, Ollama's own types, fuzzing."""

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from ollama._types import ChatRequest
from vocab_strategies import json_values, transcripts

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
from twinflow.vocab.wire import (
    from_anthropic,
    from_ollama_messages,
    from_openai_messages,
    ollama_chat_request,
    to_anthropic,
    to_anthropic_tools,
    to_ollama_messages,
    to_ollama_tools,
    to_openai_messages,
    to_openai_tools,
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


# OpenAI function-calling guide (platform.openai.com/docs/guides/function-calling): the
# conversation after one get_weather call, as the guide appends it to `messages`.
OPENAI_DOC = [
    {"role": "user", "content": "What's the weather like in Paris today?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_12345xyz",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"location":"Paris, France"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_12345xyz", "content": "25"},
]
OPENAI_EXPECTED = Transcript(
    messages=(
        Message.user("What's the weather like in Paris today?"),
        _calls("call_12345xyz", "get_weather", {"location": "Paris, France"}),
        _result("call_12345xyz", "get_weather", "25"),
    )
)

# OpenAI vision guide: text plus an image_url part in one user message.
OPENAI_VISION_DOC = [
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "What's in this image?"},
            {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,/9j/4AAQSkZJRg=="}},
        ],
    }
]

# Ollama API docs (docs/api.md, "Chat request (with tools)" and its response), with the tool
# result message as the tool-calling docs send it back (`tool_name`).
OLLAMA_DOC = [
    {"role": "user", "content": "What is the weather today in Paris?"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "function": {
                    "name": "get_current_weather",
                    "arguments": {"format": "celsius", "location": "Paris, FR"},
                }
            }
        ],
    },
    {"role": "tool", "content": "22 degrees celsius", "tool_name": "get_current_weather"},
]
OLLAMA_TOOL = ToolSpec(
    name="get_current_weather",
    description="Get the current weather for a location",
    parameters={
        "type": "object",
        "properties": {
            "location": {
                "type": "string",
                "description": "The location to get the weather for, e.g. San Francisco, CA",
            },
            "format": {
                "type": "string",
                "description": "The format to return the weather in, e.g. 'celsius' or 'fahrenheit'",
                "enum": ["celsius", "fahrenheit"],
            },
        },
        "required": ["location", "format"],
    },
)
# Ollama API docs, "Chat request (with images)" (image data shortened).
OLLAMA_IMAGE_DOC = [
    {
        "role": "user",
        "content": "what is in this image?",
        "images": ["iVBORw0KGgoAAAANSUhEUgAAAG0AAABmCAYAAADBPx+V"],
    }
]

# Anthropic tool-use docs (docs.anthropic.com, "Tool use"): a get_weather round, with the
# is_error variant of the result from "Handling tool use and tool result content blocks".
ANTHROPIC_DOC = {
    "system": "You are a helpful assistant.",
    "messages": [
        {"role": "user", "content": "What's the weather like in San Francisco?"},
        {
            "role": "assistant",
            "content": [
                {
                    "type": "text",
                    "text": "I'll check the current weather in San Francisco for you.",
                },
                {
                    "type": "tool_use",
                    "id": "toolu_01A09q90qw90lq917835lq9",
                    "name": "get_weather",
                    "input": {"location": "San Francisco, CA", "unit": "celsius"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_01A09q90qw90lq917835lq9",
                    "content": "ConnectionError: the weather service API is not available (HTTP 500)",
                    "is_error": True,
                }
            ],
        },
    ],
}
ANTHROPIC_EXPECTED = Transcript(
    messages=(
        Message.system("You are a helpful assistant."),
        Message.user("What's the weather like in San Francisco?"),
        _calls(
            "toolu_01A09q90qw90lq917835lq9",
            "get_weather",
            {"location": "San Francisco, CA", "unit": "celsius"},
            text="I'll check the current weather in San Francisco for you.",
        ),
        _result(
            "toolu_01A09q90qw90lq917835lq9",
            "get_weather",
            "ConnectionError: the weather service API is not available (HTTP 500)",
            is_error=True,
        ),
    )
)


def test_exports() -> None:
    """__all__ of twinflow.vocab.wire is its public names."""
    import twinflow.vocab.wire as module

    expected = {
        "from_anthropic", "from_ollama_messages", "from_openai_messages", "ollama_chat_request",
        "to_anthropic", "to_anthropic_tools", "to_ollama_messages", "to_ollama_tools",
        "to_openai_messages", "to_openai_tools",
    }  # fmt: skip
    assert expected == set(module.__all__)


def test_openai_golden_both_ways() -> None:
    """The OpenAI docs' tool-call conversation reads to the expected transcript and writes back identically."""
    assert OPENAI_EXPECTED == from_openai_messages(OPENAI_DOC)
    assert OPENAI_DOC == to_openai_messages(OPENAI_EXPECTED)


def test_openai_vision_golden() -> None:
    """The OpenAI vision example reads to text plus media, and writes back identically."""
    t = from_openai_messages(OPENAI_VISION_DOC)
    expected = Message(
        role="user",
        parts=(
            TextPart(text="What's in this image?"),
            MediaPart(media_type="image/jpeg", uri="data:image/jpeg;base64,/9j/4AAQSkZJRg=="),
        ),
    )
    assert (expected,) == t.messages
    assert OPENAI_VISION_DOC == to_openai_messages(t)


def test_ollama_golden_both_ways() -> None:
    """The Ollama docs' tool conversation reads with assigned ids and writes back identically."""
    expected = Transcript(
        messages=(
            Message.user("What is the weather today in Paris?"),
            _calls(
                "call_1_0", "get_current_weather", {"format": "celsius", "location": "Paris, FR"}
            ),
            _result("call_1_0", "get_current_weather", "22 degrees celsius"),
        )
    )
    assert expected == from_ollama_messages(OLLAMA_DOC)
    assert OLLAMA_DOC == to_ollama_messages(expected)


def test_ollama_image_golden() -> None:
    """The Ollama image example reads as a PNG data: URI and writes back as bare base64."""
    t = from_ollama_messages(OLLAMA_IMAGE_DOC)
    media = t.messages[0].parts[1]
    assert (
        MediaPart(
            media_type="image/png", uri="data:image/png;base64," + OLLAMA_IMAGE_DOC[0]["images"][0]
        )
        == media
    )  # type: ignore[operator]
    assert OLLAMA_IMAGE_DOC == to_ollama_messages(t)


def test_anthropic_golden() -> None:
    """The Anthropic docs' tool round (error result) reads to the expected transcript and back."""
    assert ANTHROPIC_EXPECTED == from_anthropic(ANTHROPIC_DOC)
    written = to_anthropic(ANTHROPIC_EXPECTED)
    assert (ANTHROPIC_DOC["system"], ANTHROPIC_DOC["messages"][1:]) == (
        written["system"],
        written["messages"][1:],
    )  # type: ignore[index]
    assert ANTHROPIC_EXPECTED == from_anthropic(written)


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
    """Transcripts Anthropic can express (media by data: URI) round-trip to equal values, error flags included."""
    t = _data_media_only(t)
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


def test_ollama_golden_request_validates() -> None:
    """The request body for the docs' tool example validates as ollama's ChatRequest."""
    body = ollama_chat_request(
        ModelRequest(transcript=from_ollama_messages(OLLAMA_DOC[:1]), tools=(OLLAMA_TOOL,)),
        model="llama3.2",
    )
    expected = {
        "model": "llama3.2",
        "messages": OLLAMA_DOC[:1],
        "stream": False,
        "tools": to_ollama_tools([OLLAMA_TOOL]),
    }
    assert expected == body
    assert "get_current_weather" == ChatRequest(**body).tools[0].function.name  # type: ignore[index,union-attr]


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
    (from_ollama_messages, OLLAMA_IMAGE_DOC),
    (from_anthropic, ANTHROPIC_DOC),
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
