"""Ollama's wire format, held against the official `ollama` package's own types and its docs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from ollama._types import ChatRequest, ChatResponse, Options
from ollama._types import Message as OllamaMessage
from ollama._types import Tool as OllamaTool
from pydantic import JsonValue

from twinflow.models._ollama_wire import ollama_chat_body, parse_ollama_chat
from twinflow.models._wire import outgoing
from twinflow.vocab import (
    CallId,
    Message,
    ModelSettings,
    ReasoningPart,
    StructuredPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    ToolSpec,
    Transcript,
)

URL = "http://127.0.0.1:11434/api/chat"
RECORDED: dict[str, JsonValue] = json.loads(
    (Path(__file__).parent / "fixtures" / "ollama_docs_chat_responses.json").read_text()
)

WEATHER = ToolSpec(
    name="get_current_weather",
    description="Get the current weather for a location",
    parameters={
        "type": "object",
        "properties": {
            "location": {"type": "string", "description": "The location"},
            "format": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        },
        "required": ["location", "format"],
    },
)

CONVERSATION = Transcript(
    messages=(
        Message.system("Be brief."),
        Message.user("Weather in Paris?"),
        Message(
            role="assistant",
            parts=(
                ReasoningPart(text="I should call the tool."),
                TextPart(text="Checking."),
                ToolCallPart(
                    id=CallId("c1"),
                    name="get_current_weather",
                    arguments={"location": "Paris", "format": "celsius"},
                ),
            ),
        ),
        Message(
            role="tool",
            parts=(
                ToolResultPart(call_id=CallId("c1"), name="get_current_weather", content="18C"),
            ),
        ),
        Message(role="assistant", parts=(StructuredPart(schema_name="W", value={"t": 18}),)),
    )
)


def assert_valid_ollama_chat_request(body: dict[str, Any]) -> None:
    """Every field of the body is one `ollama.ChatRequest` knows, with a value it accepts."""
    ChatRequest.model_validate(body)
    assert set() == set(body) - set(ChatRequest.model_fields)
    for message in body["messages"]:
        expected = OllamaMessage.model_validate(message).model_dump(exclude_none=True)
        assert expected == message
    if "options" in body:
        assert body["options"] == Options.model_validate(body["options"]).model_dump(
            exclude_none=True
        )
    for tool in body.get("tools", []):
        dumped = OllamaTool.model_validate(tool).model_dump(exclude_none=True, by_alias=True)
        assert tool == dumped


@pytest.mark.parametrize("native_tools", [True, False])
def test_chat_bodies_validate_against_the_ollama_package_types(native_tools: bool) -> None:
    """Plain, tool-calling and structured bodies are all valid `ollama.ChatRequest`s."""
    transcript = outgoing(CONVERSATION.messages, native_tools=native_tools)
    schema: dict[str, JsonValue] = {
        "type": "object",
        "properties": {"age": {"type": "integer"}, "available": {"type": "boolean"}},
        "required": ["age", "available"],
    }
    for body in (
        ollama_chat_body(model="llama3.2", transcript=transcript, settings=ModelSettings()),
        ollama_chat_body(
            model="llama3.2",
            transcript=transcript,
            settings=ModelSettings(temperature=0, max_tokens=64, seed=7),
            format_schema=schema,
        ),
        ollama_chat_body(
            model="llama3.2", transcript=transcript, settings=ModelSettings(), tools=(WEATHER,)
        ),
    ):
        assert_valid_ollama_chat_request(body)


def test_native_tool_messages_use_tool_name_and_object_arguments() -> None:
    """Ollama's tool calls carry dict arguments, tool results `tool_name`; reasoning stays home."""
    messages = ollama_chat_body(
        model="m",
        transcript=outgoing(CONVERSATION.messages, native_tools=True),
        settings=ModelSettings(),
    )["messages"]
    assert messages[2] == {
        "role": "assistant",
        "content": "Checking.",
        "tool_calls": [
            {
                "function": {
                    "name": "get_current_weather",
                    "arguments": {"location": "Paris", "format": "celsius"},
                }
            }
        ],
    }
    assert messages[3] == {"role": "tool", "content": "18C", "tool_name": "get_current_weather"}
    assert messages[4] == {"role": "assistant", "content": '{"t":18}'}


def test_structured_body_sets_format_stream_false_and_options() -> None:
    """The schema travels in `format`, streaming is off, sampling goes in `options`."""
    body = ollama_chat_body(
        model="m",
        transcript=Transcript(),
        settings=ModelSettings(temperature=0, max_tokens=32),
        format_schema={"type": "object"},
    )
    assert body == {
        "model": "m",
        "messages": [],
        "stream": False,
        "options": {"temperature": 0, "num_predict": 32},
        "format": {"type": "object"},
    }


@pytest.mark.parametrize(
    "name",
    ["structured", "tools", "no_streaming", "with_images", "load"],
)
def test_recorded_responses_from_the_ollama_docs_parse(name: str) -> None:
    """Each documented response is a valid `ollama.ChatResponse` and parses here to the same content."""
    recorded = RECORDED[name]
    official = ChatResponse.model_validate(recorded)
    reply = parse_ollama_chat(recorded, URL)
    assert (official.message.content or None) == (reply.content or None)
    assert (official.eval_count or 0) == reply.usage.output_tokens
    assert (official.prompt_eval_count or 0) == reply.usage.input_tokens
    assert (official.model or "") == reply.model_name


def test_recorded_tool_call_response_parses_into_name_and_arguments() -> None:
    """The documented tool-call response yields the call with its object arguments."""
    reply = parse_ollama_chat(RECORDED["tools"], URL)
    expected = (("get_current_weather", {"format": "celsius", "location": "Paris, FR"}),)
    assert expected == reply.tool_calls
    assert reply.finish_reason == "tool_calls"


def test_a_transcript_without_reasoning_is_sent_as_it_is() -> None:
    """With native tools and no reasoning, `outgoing` hands back the very transcript (nothing to
    drop, nothing rebuilt); otherwise a transcript goes out exactly as its messages would."""
    plain = Transcript(messages=(Message.user("Hi"), Message.assistant("Hello")))
    assert plain is outgoing(plain, native_tools=True)
    for native_tools in (True, False):
        expected = outgoing(CONVERSATION.messages, native_tools=native_tools)
        assert expected == outgoing(CONVERSATION, native_tools=native_tools)
