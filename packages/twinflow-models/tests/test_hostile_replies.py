"""A hostile model server: deep nesting, giant strings and numbers are typed errors or re-asks."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import JsonValue

from twinflow.kernel import MockTransport
from twinflow.models import MalformedResponseError, OpenAICompatibleChatModel
from twinflow.trace import UserError
from twinflow.vocab import (
    Message,
    ModelRequest,
    StructuredOutputError,
    TextPart,
    ToolSpec,
    Transcript,
)
from twinflow.vocab._wire import JsonLimits

ADD = ToolSpec(
    name="add",
    description="Add two integers.",
    parameters={"type": "object", "properties": {"a": {"type": "integer"}}},
)
ASK = ModelRequest(transcript=Transcript(messages=(Message.user("2+3?"),)), tools=(ADD,))
DEEP = "[" * 5000 + "]" * 5000
FINAL = '{"action": "final", "answer": "five"}'


def answer(content: str | None, arguments: str | None = None) -> JsonValue:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if arguments is not None:
        call = {"name": "add", "arguments": arguments}
        message["tool_calls"] = [{"id": "c1", "type": "function", "function": call}]
    return {
        "model": "hostile",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1},
    }


def model(answers: list[JsonValue], mode: str, **kwargs: Any) -> OpenAICompatibleChatModel:
    script = list(answers)
    return OpenAICompatibleChatModel(
        MockTransport(lambda _url, _body: script.pop(0)),
        base_url="http://127.0.0.1:9",
        dialect="llama.cpp",
        mode=mode,  # type: ignore[arg-type]  # the two modes are parametrised as strings
        **kwargs,
    )


@pytest.mark.parametrize(
    ("emission", "reason"),
    [
        (DEEP, "nests deeper than the limit of 64 levels"),
        (
            '{"action": "final", "answer": "x", "n": ' + "1" * 5000 + "}",
            "not JSON twinflow accepts",
        ),
        ('{"action": "call_tool", "tool": "add", "arguments": {"a": 1e400}}', "finite"),
    ],
)
def test_a_hostile_emission_is_reasked_not_a_crash(emission: str, reason: str) -> None:
    """Structured-action mode re-asks with the reason, then takes the next valid reply."""
    chat = model([answer(emission), answer(FINAL)], "structured-action")
    response = chat.request(ASK)
    assert (TextPart(text="five"),) == response.message.parts


def test_only_hostile_emissions_end_in_a_structured_output_error() -> None:
    """Every attempt deep: the typed StructuredOutputError, with each attempt's reason."""
    chat = model([answer(DEEP)] * 3, "structured-action")
    with pytest.raises(StructuredOutputError) as caught:
        chat.request(ASK)
    assert ["(root): the reply nests deeper than the limit of 64 levels (at /)"] * 3 == [
        a.error for a in caught.value.attempts
    ]


@pytest.mark.parametrize("arguments", [DEEP, '{"a": ' + DEEP + "}", '{"a": ' + "9" * 5000 + "}"])
def test_hostile_native_tool_arguments_are_a_malformed_response(arguments: str) -> None:
    """Native mode: deep or unparseable arguments are a MalformedResponseError at their path."""
    chat = model([answer(None, arguments)], "native")
    with pytest.raises(MalformedResponseError) as caught:
        chat.request(ASK)
    assert "/choices/0/message/tool_calls/0/function/arguments" == caught.value.path


def test_a_reply_body_nested_too_deep_is_a_malformed_response() -> None:
    """A decoded body deeper than the limit is refused before any reader walks it."""
    body: JsonValue = []
    for _ in range(900):
        body = [body]
    chat = model([{"choices": body}], "native")
    with pytest.raises(MalformedResponseError) as caught:
        chat.request(ASK)
    assert "nested deeper than the limit of 64 levels" in str(caught.value)


def test_limits_are_configurable() -> None:
    """A smaller max_bytes refuses a longer emission (and re-asks); the default takes it."""
    long_final = '{"action": "final", "answer": "' + "x" * 500 + '"}'
    small = model(
        [answer(long_final), answer(FINAL)], "structured-action", limits=JsonLimits(max_bytes=200)
    )
    assert (TextPart(text="five"),) == small.request(ASK).message.parts
    default = model([answer(long_final)], "structured-action")
    assert (TextPart(text="x" * 500),) == default.request(ASK).message.parts


@pytest.mark.parametrize("url", ["http://u:sk-9@127.0.0.1:9", "http://127.0.0.1:9/?key=sk-9"])
def test_credentials_in_base_url_are_refused(url: str) -> None:
    """A key in the base URL is refused pointing at api_key_env, without repeating it."""
    with pytest.raises(UserError) as caught:
        OpenAICompatibleChatModel(
            MockTransport(lambda _u, _b: {}), base_url=url, dialect="llama.cpp"
        )
    assert ("api_key_env" in str(caught.value), "sk-9" in str(caught.value)) == (True, False)


def test_a_giant_native_reply_is_a_malformed_response() -> None:
    """Native mode cannot re-ask: a text past max_bytes is a typed error."""
    chat = model([answer("x" * 300)], "native", limits=JsonLimits(max_bytes=200))
    with pytest.raises(MalformedResponseError) as caught:
        chat.request(ASK)
    assert "over the limit of 200" in str(caught.value)
