"""Streaming clients: both dialects decode to vocab chunks, assemble to the non-streamed reply,
and stream structured output with the same retry rules; golden streams from published docs."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from twinflow.kernel import HttpTransport, LoopbackResponse, LoopbackServer, MockTransport
from twinflow.kernel._loopback import LoopbackRequest
from twinflow.kernel._pool import ConnectionPool
from twinflow.models import (
    AnthropicChatModel,
    MalformedResponseError,
    OllamaChatModel,
    OpenAICompatibleChatModel,
)
from twinflow.trace import UserError
from twinflow.vocab import (
    Chunk,
    JsonValue,
    Message,
    ModelRequest,
    ModelSettings,
    TextDelta,
    ToolCallStart,
    ToolSpec,
    Transcript,
    digest,
)

STREAMS = Path(__file__).parent / "fixtures" / "streams"
WEATHER = ToolSpec(
    name="get_weather",
    description="Get the weather.",
    parameters={"type": "object", "properties": {"location": {"type": "string"}}},
)
REQUEST = ModelRequest(transcript=Transcript(messages=(Message.user("Hello!"),)))
TOOL_REQUEST = ModelRequest(
    transcript=Transcript(messages=(Message.user("Weather in Paris?"),)), tools=(WEATHER,)
)

# The same answers as the golden streams, non-streamed (what `stream: false` returns).
OPENAI_TEXT: JsonValue = {
    "model": "gpt-4o-mini",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello"}, "finish_reason": "stop"}],
}  # fmt: skip
OPENAI_TOOL: JsonValue = {
    "model": "gpt-4o-mini",
    "choices": [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_DdmO9pD3xa9XTPNJ32zg2hcA",
                        "type": "function",
                        "function": {
                            "name": "get_weather",
                            "arguments": '{"location":"Paris, France"}',
                        },
                    }
                ],
            },
            "finish_reason": "tool_calls",
        }
    ],
}
OLLAMA_TEXT: JsonValue = {
    "model": "llama3.2",
    "message": {"role": "assistant", "content": "The"},
    "done": True,
    "prompt_eval_count": 26,
    "eval_count": 282,
}


def splits(data: bytes) -> Iterator[list[bytes]]:
    """`data` cut at every byte into two chunks, and into one-byte chunks."""
    for cut in range(len(data) + 1):
        yield [data[:cut], data[cut:]]
    yield [data[i : i + 1] for i in range(len(data))]


def openai(stream: list[bytes], answer: JsonValue, seen: list[JsonValue]) -> MockTransport:
    """A transport answering plain requests with `answer`, streamed ones with `stream`."""

    def plain(url: str, body: JsonValue) -> JsonValue:
        seen.append(body)
        return answer

    def streamed(url: str, body: JsonValue) -> list[bytes]:
        seen.append(body)
        return stream

    return MockTransport(plain, stream_handler=streamed)


@pytest.mark.parametrize(
    ("fixture", "answer", "request_"),
    [
        ("openai_docs_text.sse", OPENAI_TEXT, REQUEST),
        ("openai_docs_tool_call.sse", OPENAI_TOOL, TOOL_REQUEST),
    ],
)
def test_an_openai_golden_stream_assembles_to_the_non_streamed_reply(
    fixture: str, answer: JsonValue, request_: ModelRequest
) -> None:
    """However the documented stream is cut, the reply equals the non-streamed one, digest and all."""
    data = (STREAMS / fixture).read_bytes()
    for chunks in splits(data):
        seen: list[JsonValue] = []
        model = OpenAICompatibleChatModel(
            openai(chunks, answer, seen),
            base_url="http://127.0.0.1:9",
            dialect="llama.cpp",
            mode="native",
        )
        shown: list[Chunk] = []
        streamed = model.stream(request_, shown.append)
        plain = model.request(request_)
        assert digest(plain) == digest(streamed)
        assert shown


def test_only_choice_zero_is_read_when_choices_interleave() -> None:
    """With n > 1 the events of choice 1 are not mixed into the reply (choice 0, as non-streamed)."""
    events = [
        {"choices": [{"index": 0, "delta": {"content": "Hel"}}]},
        {"choices": [{"index": 1, "delta": {"content": "Other"}}]},
        {"choices": [{"index": 0, "delta": {"content": "lo"}, "finish_reason": "stop"}]},
        {"choices": [{"index": 1, "delta": {}, "finish_reason": "length"}]},
    ]
    data = b"".join(f"data: {json.dumps(e)}\n\n".encode() for e in events) + b"data: [DONE]\n\n"
    model = OpenAICompatibleChatModel(
        openai([data], OPENAI_TEXT, []),
        base_url="http://127.0.0.1:9",
        dialect="llama.cpp",
        mode="native",
    )
    reply = model.stream(REQUEST, lambda chunk: None)
    assert ("Hello", "stop") == (reply.message.text, reply.finish_reason)


def test_the_streamed_request_is_the_plain_one_with_stream_set() -> None:
    """Only `stream: true` and `stream_options.include_usage` are added to the body."""
    seen: list[JsonValue] = []
    data = (STREAMS / "openai_docs_text.sse").read_bytes()
    model = OpenAICompatibleChatModel(
        openai([data], OPENAI_TEXT, seen),
        base_url="http://127.0.0.1:9",
        dialect="llama.cpp",
        mode="native",
    )
    model.stream(REQUEST, lambda chunk: None)
    model.request(REQUEST)
    streamed, plain = seen
    assert isinstance(plain, dict) and isinstance(streamed, dict)
    expected = {**plain, "stream": True, "stream_options": {"include_usage": True}}
    assert expected == streamed


def test_text_and_tool_call_chunks_are_shown_as_they_decode() -> None:
    """The observer sees the documented deltas: the text, then the tool call's start."""
    shown: list[Chunk] = []
    data = (STREAMS / "openai_docs_text.sse").read_bytes()
    model = OpenAICompatibleChatModel(
        openai([data], OPENAI_TEXT, []),
        base_url="http://127.0.0.1:9",
        dialect="llama.cpp",
        mode="native",
    )
    model.stream(REQUEST, shown.append)
    assert [TextDelta(text="Hello")] == [c for c in shown if isinstance(c, TextDelta)]
    shown.clear()
    data = (STREAMS / "openai_docs_tool_call.sse").read_bytes()
    model = OpenAICompatibleChatModel(
        openai([data], OPENAI_TOOL, []),
        base_url="http://127.0.0.1:9",
        dialect="llama.cpp",
        mode="native",
    )
    model.stream(TOOL_REQUEST, shown.append)
    starts = [c for c in shown if isinstance(c, ToolCallStart)]
    assert ["get_weather"] == [c.name for c in starts]


def test_the_ollama_golden_stream_assembles_to_the_non_streamed_reply() -> None:
    """The documented /api/chat NDJSON stream, cut anywhere, reads as its non-streamed answer."""
    data = (STREAMS / "ollama_docs_chat.ndjson").read_bytes()
    for chunks in splits(data):
        seen: list[JsonValue] = []
        model = OllamaChatModel(openai(chunks, OLLAMA_TEXT, seen), model="llama3.2", mode="native")
        streamed = model.stream(REQUEST, lambda chunk: None)
        plain = model.request(REQUEST)
        assert digest(plain) == digest(streamed)
        assert (26, 282) == (streamed.usage.input_tokens, streamed.usage.output_tokens)
        assert True is seen[0]["stream"]  # type: ignore[call-overload,index]  # a JSON body


@pytest.mark.parametrize(
    ("stream", "words"),
    [
        (b'data: {"choices":[{"index":0,"delta":{"content":"Hel"}}]}\n\n', "without a finish"),
        (b'data: {"error":{"message":"overloaded"}}\n\n', "overloaded"),
        (b"data: <html>\n\n", "not JSON"),
        (b'data: {"choices":[{"index":0}]}\n\n', "no delta"),
        (
            b'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,'
            b'"function":{"arguments":"{}"}}]}}]}\n\n',
            "without a name",
        ),
        (b"data: " + b"x" * (5 * 1024 * 1024), "passed"),
    ],
)
def test_a_broken_openai_stream_is_a_malformed_response(stream: bytes, words: str) -> None:
    """A cut, an error event, a non-JSON event or an endless line: MalformedResponseError."""
    model = OpenAICompatibleChatModel(
        openai([stream], OPENAI_TEXT, []),
        base_url="http://127.0.0.1:9",
        dialect="llama.cpp",
        mode="native",
    )
    with pytest.raises(MalformedResponseError) as caught:
        model.stream(REQUEST, lambda chunk: None)
    assert words in str(caught.value)


@pytest.mark.parametrize(
    ("stream", "words"),
    [
        (b'{"message":{"role":"assistant","content":"The"},"done":false}\n', "without a finish"),
        (b'{"error":"model not found"}\n', "model not found"),
        (b'{"message":{"tool_calls":[{"function":{"arguments":{}}}]},"done":true}\n', "name"),
        (b"[1]\n", "not a JSON object"),
    ],
)
def test_a_broken_ollama_stream_is_a_malformed_response(stream: bytes, words: str) -> None:
    """A stream cut before done, an error line, a nameless call: MalformedResponseError."""
    model = OllamaChatModel(openai([stream], OLLAMA_TEXT, []), model="llama3.2", mode="native")
    with pytest.raises(MalformedResponseError) as caught:
        model.stream(REQUEST, lambda chunk: None)
    assert words in str(caught.value)


def test_streaming_needs_a_streaming_transport() -> None:
    """A transport without post_stream is a usage error naming it."""

    class PlainOnly:
        def post_json(self, url: str, body: JsonValue, *, timeout: float) -> JsonValue:
            return OPENAI_TEXT

        def close(self) -> None:
            pass

    model = OpenAICompatibleChatModel(PlainOnly(), base_url="http://127.0.0.1:9", dialect="vllm")
    with pytest.raises(UserError) as caught:
        model.stream(REQUEST, lambda chunk: None)
    assert "PlainOnly" in str(caught.value)


class Age(BaseModel):
    """A structured answer."""

    age: int


def sse_text(text: str) -> bytes:
    """A one-delta OpenAI stream of `text`."""
    event = {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": "stop"}]}
    return f"data: {json.dumps(event)}\n\ndata: [DONE]\n\n".encode()


def test_streamed_structured_output_is_validated_and_reasked_like_a_plain_one() -> None:
    """An invalid streamed answer is re-asked with the schema still sent; the attempts match."""
    emissions = ['{"age": "old"}', '{"age": 22}']
    bodies: list[JsonValue] = []

    def streamed(url: str, body: JsonValue) -> list[bytes]:
        bodies.append(body)
        return [sse_text(emissions[len(bodies) - 1])]

    def plain(url: str, body: JsonValue) -> JsonValue:
        bodies.append(body)
        text = emissions[len(bodies) - 3]
        return {"choices": [{"message": {"role": "assistant", "content": text}}]}

    adapter = OpenAICompatibleChatModel(
        MockTransport(plain, stream_handler=streamed),
        base_url="http://127.0.0.1:9",
        dialect="llama-cpp-python",
    )
    shown: list[Chunk] = []
    streamed_result = adapter.generate((Message.user("Age?"),), Age, on_chunk=shown.append)
    plain_result = adapter.generate((Message.user("Age?"),), Age)
    assert Age(age=22) == streamed_result.output
    assert plain_result.attempts == streamed_result.attempts
    assert all("schema" in b["response_format"] for b in bodies)  # type: ignore[index,operator]  # JSON bodies
    assert 2 == len([c for c in shown if isinstance(c, TextDelta)])


def test_the_real_model_streams_its_reply_in_several_text_deltas(llama_server: str) -> None:
    """SmolLM2 on llama-cpp-python streams; the deltas join to the reply a plain request returns."""
    model = OpenAICompatibleChatModel(
        HttpTransport(), base_url=llama_server, dialect="llama-cpp-python", mode="native"
    )
    request = ModelRequest(
        transcript=Transcript(messages=(Message.user("Name three colours."),)),
        settings=ModelSettings(temperature=0, max_tokens=32, seed=0),
    )
    # The server's first answer to a prompt can differ from later ones (its prefix cache then
    # changes how the prompt is evaluated), streamed or not: ask once before comparing.
    model.request(request)
    shown: list[Chunk] = []
    streamed = model.stream(request, shown.append)
    deltas = [c.text for c in shown if isinstance(c, TextDelta)]
    plain = model.request(request)
    assert len(deltas) > 1
    assert "".join(deltas) == streamed.message.text
    assert plain.message == streamed.message


def test_the_real_model_streams_a_schema_valid_structured_answer(llama_server: str) -> None:
    """Structured output over a real stream: the assembled emission validates with pydantic."""
    adapter = OpenAICompatibleChatModel(
        HttpTransport(), base_url=llama_server, dialect="llama-cpp-python"
    )
    shown: list[Chunk] = []
    result = adapter.generate(
        (Message.user("Ollama is 22 years old. Return a JSON object with the age."),),
        Age,
        on_chunk=shown.append,
    )
    emitted = "".join(c.text for c in shown if isinstance(c, TextDelta))
    assert result.attempts[-1].emission == emitted[-len(result.attempts[-1].emission) :]
    assert isinstance(result.output, Age)


def test_the_real_server_reports_no_usage_in_a_stream_even_when_asked(llama_server: str) -> None:
    """llama-cpp-python drops `stream_options.include_usage` (ADR 0070): a streamed reply's
    usage is zero where the plain reply's is not. Failing here means the server now honours
    the option: ADR 0070's consequence and this test go."""
    model = OpenAICompatibleChatModel(
        HttpTransport(), base_url=llama_server, dialect="llama-cpp-python", mode="native"
    )
    request = ModelRequest(
        transcript=Transcript(messages=(Message.user("Say hi."),)),
        settings=ModelSettings(temperature=0, max_tokens=8, seed=0),
    )
    plain = model.request(request)
    streamed = model.stream(request, lambda chunk: None)
    assert (True, (0, 0)) == (
        plain.usage.input_tokens > 0 and plain.usage.output_tokens > 0,
        (streamed.usage.input_tokens, streamed.usage.output_tokens),
    )


@pytest.mark.parametrize("dialect", ["vllm", "anthropic"])
def test_a_server_that_answers_a_stream_with_one_json_document_is_told_apart(
    dialect: str,
) -> None:
    """A server ignoring `stream` answers JSON: the error says so and how to ask without streaming."""
    body = json.dumps(OPENAI_TEXT).encode()
    transport = MockTransport(lambda url, body: {}, stream_handler=lambda url, request: [body])
    if dialect == "anthropic":
        model: OpenAICompatibleChatModel | AnthropicChatModel = AnthropicChatModel(
            transport, base_url="http://127.0.0.1:9", model="claude"
        )
    else:
        model = OpenAICompatibleChatModel(transport, base_url="http://127.0.0.1:9", dialect="vllm")
    with pytest.raises(MalformedResponseError) as caught:
        model.stream(REQUEST, lambda chunk: None)
    assert "not server-sent events" in str(caught.value)
    assert "--quiet" in str(caught.value)


class KeepingPool(ConnectionPool):
    """A connection pool that notes, for each request, whether a kept connection carried it."""

    def __init__(self) -> None:
        """An empty pool, nothing taken yet."""
        super().__init__()
        self.kept: list[bool] = []

    def take(self, origin: tuple[str, str, int]) -> Any:
        """Take the kept connection as the pool does, noting whether there was one."""
        connection = super().take(origin)
        self.kept.append(connection is not None)
        return connection


def test_a_streamed_reply_leaves_its_connection_for_the_next_request() -> None:
    """The decoder stops at `data: [DONE]`, before the body's last chunk; with the body's end
    already received, the connection goes back to the pool after every streamed reply."""
    events = (STREAMS / "openai_docs_text.sse").read_bytes()
    # One HTTP chunk and the last `0`, in one write: when the events arrive, so has the end.
    body = b"%x\r\n%s\r\n0\r\n\r\n" % (len(events), events)

    def answer(request: LoopbackRequest) -> LoopbackResponse:
        return LoopbackResponse(headers=(("Transfer-Encoding", "chunked"),), body=body)

    pool = KeepingPool()
    with LoopbackServer(answer) as server:
        transport = HttpTransport(pool=pool)
        model = OpenAICompatibleChatModel(
            transport, base_url=server.url, dialect="vllm", mode="native"
        )
        texts = [model.stream(REQUEST, lambda chunk: None).message.text for _ in range(3)]
        transport.close()
    assert (["Hello"] * 3, [False, True, True]) == (texts, pool.kept)
