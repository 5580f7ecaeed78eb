"""The Anthropic Messages client against a loopback server playing Anthropic's published
example exchanges: headers, system, tools, tool results with is_error, plain and streamed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from twinflow.kernel import HttpTransport, LoopbackResponse, LoopbackServer, TransportError
from twinflow.kernel._loopback import LoopbackRequest
from twinflow.kernel._replay import RecordingTransport
from twinflow.models import AnthropicChatModel, MalformedResponseError
from twinflow.models._anthropic import ANTHROPIC_VERSION
from twinflow.trace import UserError
from twinflow.vocab import (
    CallId,
    Chunk,
    JsonValue,
    Message,
    ModelRequest,
    ModelSettings,
    OutputSchema,
    ReasoningPart,
    TextDelta,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    ToolSpec,
    Transcript,
    digest,
)

STREAMS = Path(__file__).parent / "fixtures" / "streams"
KEY = "sk-ant-test-key"
KEY_ENV = "TWINFLOW_TEST_ANTHROPIC_KEY"
WEATHER = ToolSpec(
    name="get_weather",
    description="Get the current weather in a given location",
    parameters={
        "type": "object",
        "properties": {"location": {"type": "string"}},
        "required": ["location"],
    },
)
ASK = ModelRequest(
    transcript=Transcript(
        messages=(Message.system("You are a weather bot."), Message.user("Weather in SF?"))
    ),
    tools=(WEATHER,),
)

# The published streams' answers, non-streamed (what `stream: false` returns for them).
PLAIN: dict[str, JsonValue] = json.loads((STREAMS / "anthropic_docs_plain.json").read_text())


class Anthropic:
    """A loopback Messages API: refuses requests without the key and version headers, like
    the real one, and answers with a published example, plain or streamed."""

    def __init__(self, plain: JsonValue, stream: bytes = b"") -> None:
        self.plain = plain
        self.stream = stream
        self.bodies: list[JsonValue] = []
        self.server = LoopbackServer(self.answer)

    def answer(self, request: LoopbackRequest) -> LoopbackResponse:
        headers = {name.lower(): value for name, value in request.headers}
        if headers.get("x-api-key") != KEY or headers.get("anthropic-version") != ANTHROPIC_VERSION:
            error = {
                "type": "error",
                "error": {"type": "authentication_error", "message": "invalid x-api-key"},
            }
            return LoopbackResponse.json_body(error, status=401)
        assert "/v1/messages" == request.path
        body = request.json_value()
        self.bodies.append(body)
        if isinstance(body, dict) and body.get("stream"):
            data = self.stream
            # Sent in pieces of 7 bytes: events and characters are cut anywhere.
            return LoopbackResponse(
                headers=(("Content-Type", "text/event-stream"),),
                stream=lambda: (data[i : i + 7] for i in range(0, len(data), 7)),
            )
        return LoopbackResponse.json_body(self.plain)


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """The key in the environment, where `api_key_env` reads it."""
    monkeypatch.setenv(KEY_ENV, KEY)


def keyed() -> HttpTransport:
    """A transport carrying the key and version headers the way the client names them."""
    return HttpTransport(
        api_key_env=KEY_ENV,
        key_header=AnthropicChatModel.key_header,
        headers=AnthropicChatModel.required_headers,
    )


def model(server: LoopbackServer, transport: object = None) -> AnthropicChatModel:
    """The client on `server`, its transport carrying the key and version headers."""
    return AnthropicChatModel(
        transport or keyed(),  # type: ignore[arg-type]  # a Transport, or a recorder of one
        model="claude-sonnet-4-5",
        base_url=server.url,
    )


def test_the_published_tool_use_exchange_reads_as_a_tool_call_with_anthropics_id() -> None:
    """System, tools and the published tool_use response: text, then the call with its id."""
    api = Anthropic(json.loads((STREAMS / "anthropic_docs_tool_use_response.json").read_text()))
    with api.server:
        reply = model(api.server).request(ASK)
    expected = (
        TextPart(text="I'll check the current weather in San Francisco for you."),
        ToolCallPart(
            id=CallId("toolu_01A09q90qw90lq917835lq9"),
            name="get_weather",
            arguments={"location": "San Francisco, CA", "unit": "celsius"},
        ),
    )
    assert expected == reply.message.parts
    assert ("tool_calls", "claude-sonnet-4-5") == (reply.finish_reason, reply.model_name)
    (body,) = api.bodies
    assert isinstance(body, dict)
    assert "You are a weather bot." == body["system"]
    assert [{"role": "user", "content": "Weather in SF?"}] == body["messages"]
    assert "input_schema" in body["tools"][0]  # type: ignore[index,operator]  # a JSON body
    assert 1024 == body["max_tokens"]


def test_a_failed_tool_result_is_sent_with_is_error() -> None:
    """The next turn carries the result as a tool_result block naming the call, is_error true."""
    call = ToolCallPart(
        id=CallId("toolu_01A09q90qw90lq917835lq9"), name="get_weather", arguments={}
    )
    result = ToolResultPart(
        call_id=call.id, name="get_weather", content="ConnectionError", is_error=True
    )
    request = ModelRequest(
        transcript=Transcript(
            messages=(
                Message.user("Weather in SF?"),
                Message(role="assistant", parts=(call,)),
                Message(role="tool", parts=(result,)),
            )
        ),
        settings=ModelSettings(max_tokens=64, temperature=0),
    )
    api = Anthropic(PLAIN["anthropic_docs_messages.sse"])
    with api.server:
        model(api.server).request(request)
    (body,) = api.bodies
    assert isinstance(body, dict)
    expected = {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": call.id,
                "content": "ConnectionError",
                "is_error": True,
            }
        ],
    }
    assert expected == body["messages"][-1]  # type: ignore[index]  # a JSON body
    assert (64, 0) == (body["max_tokens"], body["temperature"])


@pytest.mark.parametrize("fixture", sorted(PLAIN))
def test_a_published_stream_assembles_to_its_non_streamed_reply(fixture: str) -> None:
    """Each documented event stream, cut in 7-byte pieces, equals its plain reply's value."""
    api = Anthropic(PLAIN[fixture], (STREAMS / fixture).read_bytes())
    shown: list[Chunk] = []
    with api.server:
        client = model(api.server)
        streamed = client.stream(ASK, shown.append)
        plain = client.request(ASK)
    assert digest(plain) == digest(streamed)
    assert streamed.message.text == "".join(c.text for c in shown if isinstance(c, TextDelta))
    streamed_body, plain_body = api.bodies
    assert {**plain_body, "stream": True} == streamed_body  # type: ignore[dict-item]  # bodies are JsonValue; these two are objects


def test_thinking_is_read_as_reasoning_and_usage_from_both_events() -> None:
    """The thinking stream gives a reasoning part; the basic one its start and delta usage."""
    api = Anthropic(
        PLAIN["anthropic_docs_thinking.sse"], (STREAMS / "anthropic_docs_thinking.sse").read_bytes()
    )
    with api.server:
        reply = model(api.server).stream(ASK, lambda chunk: None)
    assert isinstance(reply.message.parts[0], ReasoningPart)
    api = Anthropic(
        PLAIN["anthropic_docs_messages.sse"], (STREAMS / "anthropic_docs_messages.sse").read_bytes()
    )
    with api.server:
        reply = model(api.server).stream(ASK, lambda chunk: None)
    assert (25, 15) == (reply.usage.input_tokens, reply.usage.output_tokens)


def test_an_output_schema_is_stated_in_the_system_prompt() -> None:
    """Messages has no decoder constraint here: the schema goes into `system`, every request."""
    schema = OutputSchema(
        name="Answer", json_schema={"type": "object", "properties": {"x": {"type": "integer"}}}
    )
    api = Anthropic(PLAIN["anthropic_docs_messages.sse"])
    with api.server:
        model(api.server).request(ASK.model_copy(update={"output_schema": schema}))
    (body,) = api.bodies
    assert isinstance(body, dict)
    system = body["system"]
    assert isinstance(system, str)
    assert system.startswith("You are a weather bot.\n\n")
    assert '{"properties":{"x":{"type":"integer"}},"type":"object"}' in system


def test_a_missing_key_is_the_servers_401_and_the_key_is_never_recorded(tmp_path: Path) -> None:
    """No key: TransportError "status" 401. With it, a recording of the exchange holds no key."""
    api = Anthropic(PLAIN["anthropic_docs_messages.sse"])
    with api.server:
        with pytest.raises(TransportError, check=lambda e: "status" == e.reason) as caught:
            AnthropicChatModel(HttpTransport(), model="m", base_url=api.server.url).request(ASK)
        assert 401 == caught.value.status
        with RecordingTransport(keyed(), tmp_path / "rec.jsonl") as recorder:
            model(api.server, recorder).request(ASK)
    assert KEY.encode() not in (tmp_path / "rec.jsonl").read_bytes()


def test_the_client_names_its_key_header_and_version() -> None:
    """Messages takes the key as `x-api-key: KEY` (no bearer) and wants `anthropic-version`."""
    assert ("x-api-key", "") == (
        AnthropicChatModel.key_header.name,
        AnthropicChatModel.key_header.prefix,
    )
    assert {"anthropic-version": ANTHROPIC_VERSION} == dict(AnthropicChatModel.required_headers)


def test_a_key_in_the_base_url_is_refused_without_repeating_it() -> None:
    """The endpoint check the other clients use: userinfo refused, pointing at api_key_env."""
    with pytest.raises(UserError) as caught:
        AnthropicChatModel(keyed(), model="m", base_url=f"https://u:{KEY}@api.example")
    assert ("api_key_env" in str(caught.value), KEY in str(caught.value)) == (True, False)


@pytest.mark.parametrize(
    ("stream", "words"),
    [
        (
            b'event: error\ndata: {"type": "error", "error": {"type": "overloaded_error"}}\n\n',
            "overloaded",
        ),
        (b'data: {"type": "content_block_delta", "index": 3, "delta": {}}\n\n', "never started"),
        (
            b'data: {"type": "message_start", "message": {"model": "m"}}\n\n'
            b'data: {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}\n\n',
            "without a finish",
        ),
        (
            b'data: {"type": "content_block_start", "index": 0, "content_block": {"type": "server_tool_use"}}\n\n',
            "unsupported content block",
        ),
    ],
)
def test_a_broken_stream_is_a_malformed_response(stream: bytes, words: str) -> None:
    """An error event, a block that never started, a cut stream, an unknown block: refused."""
    api = Anthropic(PLAIN["anthropic_docs_messages.sse"], stream)
    with api.server, pytest.raises(MalformedResponseError) as caught:
        model(api.server).stream(ASK, lambda chunk: None)
    assert words in str(caught.value)
