"""post_stream: chunks as they arrive, the same failures as post_json, an idle timeout, and
the mock, recording, replay and fault transports streaming too."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from twinflow.kernel import HttpTransport, LoopbackServer, MockTransport, ReplayDivergenceError
from twinflow.kernel._errors import TransportError
from twinflow.kernel._fault import FaultTransport
from twinflow.kernel._loopback import LoopbackRequest, LoopbackResponse
from twinflow.kernel._ports import StreamingTransport
from twinflow.kernel._replay import RecordingTransport, ReplayTransport
from twinflow.trace import UserError
from twinflow.vocab import JsonValue


def streaming(*pieces: bytes, gate: threading.Event | None = None) -> LoopbackServer:
    """A loopback server that streams `pieces`; with `gate`, it holds after the first one."""

    def stream() -> Iterator[bytes]:
        for number, piece in enumerate(pieces):
            if number == 1 and gate is not None:
                gate.wait()
            yield piece

    return LoopbackServer(
        lambda _request: LoopbackResponse(
            headers=(("Content-Type", "text/event-stream"),), stream=stream
        )
    )


def test_chunks_arrive_before_the_stream_ends() -> None:
    """The first chunk is yielded while the server still holds the rest of the answer."""
    gate = threading.Event()
    with streaming(b"data: one\n\n", b"data: two\n\n", gate=gate) as server:
        transport: StreamingTransport = HttpTransport()
        chunks = transport.post_stream(server.url_for("/v1/chat"), {"q": 1}, timeout=30)
        first = next(chunks)
        gate.set()
        rest = b"".join(chunks)
        transport.close()
        assert (b"data: one\n\n", b"data: two\n\n") == (first, rest)
        assert {"q": 1} == server.requests[0].json_value()


def test_a_stream_read_to_its_end_keeps_the_connection_for_the_next_call() -> None:
    """After a complete stream, the next request goes over the same kept-alive connection."""
    ports: list[int] = []

    def answer(request: LoopbackRequest) -> LoopbackResponse:
        return LoopbackResponse(stream=lambda: iter([b"a", b"b"]))

    with LoopbackServer(answer) as server:
        transport = HttpTransport()
        for _ in range(2):
            assert b"ab" == b"".join(transport.post_stream(server.url_for("/s"), {}, timeout=30))
            connection = transport._pool.take(("http", "127.0.0.1", server.port))
            assert connection is not None
            ports.append(connection.sock.getsockname()[1])
            transport._pool.give(("http", "127.0.0.1", server.port), connection)
        transport.close()
    assert ports[0] == ports[1]


def test_a_silent_gap_past_idle_timeout_is_a_transport_timeout() -> None:
    """A server that stalls after the first chunk fails the stream after idle_timeout, not timeout."""
    gate = threading.Event()
    with streaming(b"data: one\n\n", b"data: two\n\n", gate=gate) as server:
        transport = HttpTransport()
        chunks = transport.post_stream(server.url, {}, timeout=60, idle_timeout=0.2)
        assert b"data: one\n\n" == next(chunks)
        with pytest.raises(TransportError, check=lambda e: "timeout" == e.reason) as caught:
            next(chunks)
        gate.set()
        transport.close()
    assert "idle_timeout" in str(caught.value)
    assert server.url == caught.value.url


def test_a_stream_past_max_response_bytes_is_refused() -> None:
    """The size limit counts every chunk; passing it raises TransportError "too_large" mid-stream."""
    with streaming(b"12345678", b"12345678", b"12345678") as server:
        transport = HttpTransport(max_response_bytes=20)
        with pytest.raises(TransportError, check=lambda e: "too_large" == e.reason):
            b"".join(transport.post_stream(server.url, {}, timeout=30))
        transport.close()


def test_an_error_status_raises_before_any_chunk() -> None:
    """HTTP 500 to a streamed request is the same TransportError "status" post_json raises."""
    with LoopbackServer(lambda _r: LoopbackResponse.json_body({"e": 1}, status=500)) as server:
        transport = HttpTransport()
        with pytest.raises(TransportError, check=lambda e: "status" == e.reason) as caught:
            next(transport.post_stream(server.url, {}, timeout=30))
        transport.close()
    assert 500 == caught.value.status


@pytest.mark.parametrize("idle", [0, -1.0])
def test_a_non_positive_idle_timeout_is_a_usage_error(idle: float) -> None:
    """idle_timeout must be positive, checked at the call."""
    with pytest.raises(UserError):
        HttpTransport().post_stream("http://127.0.0.1:1/", {}, timeout=5, idle_timeout=idle)


def test_a_recorded_stream_replays_chunk_by_chunk_byte_identical(tmp_path: Path) -> None:
    """Chunks (one ends mid-character) replay as the same bytes in the same chunks."""
    pieces = (b"data: caf\xc3", b"\xa9\n\n", b"data: [DONE]\n\n")
    path = tmp_path / "rec.jsonl"
    with streaming(*pieces) as server, RecordingTransport(HttpTransport(), path) as recorder:
        recorded = list(recorder.post_stream(server.url_for("/s"), {"a": 1}, timeout=30))
    with ReplayTransport(path) as replay:
        replayed = list(replay.post_stream(server.url_for("/s"), {"a": 1}, timeout=30))
    assert b"".join(pieces) == b"".join(recorded)
    assert recorded == replayed


def test_a_stream_that_failed_replays_its_chunks_then_its_error(tmp_path: Path) -> None:
    """A recorded mid-stream failure comes back after the same chunks, as the same error."""

    def chunks(url: str, body: JsonValue) -> Iterator[bytes]:
        yield b"data: 1\n\n"
        raise TransportError(f"lost {url}", reason="connect", url=url)

    path = tmp_path / "rec.jsonl"
    recorded: list[bytes] = []
    inner = MockTransport(lambda u, b: None, stream_handler=chunks)
    with (
        RecordingTransport(inner, path) as rec,
        pytest.raises(TransportError, check=lambda e: "connect" == e.reason),
    ):
        recorded.extend(rec.post_stream("http://127.0.0.1:9/s", {}, timeout=5))
    replayed: list[bytes] = []
    with (
        ReplayTransport(path) as replay,
        pytest.raises(TransportError, check=lambda e: "connect" == e.reason) as caught,
    ):
        replayed.extend(replay.post_stream("http://127.0.0.1:9/s", {}, timeout=5))
    assert recorded == replayed
    assert "lost http://127.0.0.1:9/s" == str(caught.value)


def test_a_streamed_request_is_not_the_recorded_plain_one(tmp_path: Path) -> None:
    """Replaying a post_json recording through post_stream diverges at the request's stream flag."""
    path = tmp_path / "rec.jsonl"
    with RecordingTransport(MockTransport(lambda u, b: {"ok": True}), path) as recorder:
        recorder.post_json("http://127.0.0.1:9/s", {}, timeout=5)
    replay = ReplayTransport(path)
    with pytest.raises(ReplayDivergenceError) as caught:
        next(replay.post_stream("http://127.0.0.1:9/s", {}, timeout=5))
    assert "/0/request/stream" == caught.value.difference.pointer


def test_a_mock_without_stream_handler_refuses_to_stream() -> None:
    """A MockTransport made for post_json says how to answer streams."""
    with pytest.raises(UserError) as caught:
        MockTransport(lambda u, b: None).post_stream("http://127.0.0.1:9/", {}, timeout=5)
    assert "stream_handler" in str(caught.value)


def test_a_reset_fault_breaks_a_stream_naming_the_callers_url() -> None:
    """FaultTransport's reset reaches post_stream as the real TransportError "connect", on the asked URL."""
    transport = FaultTransport(MockTransport(lambda u, b: None), ["reset"])
    with pytest.raises(TransportError, check=lambda e: "connect" == e.reason) as caught:
        b"".join(transport.post_stream("http://127.0.0.1:9/v1/chat", {}, timeout=10))
    transport.close()
    assert "http://127.0.0.1:9/v1/chat" == caught.value.url
    assert [(0, "reset")] == transport.injected


def test_a_fault_free_call_streams_from_the_inner_transport() -> None:
    """Calls without a fault go to the inner transport's post_stream."""
    inner = MockTransport(lambda u, b: None, stream_handler=lambda u, b: [b"x", b"y"])
    transport = FaultTransport(inner, [None])
    assert [b"x", b"y"] == list(transport.post_stream("http://127.0.0.1:9/", {}, timeout=5))


class Connections:
    """A loopback handler that answers `answer` and notes which server connection carried each request.

    The server runs one thread per connection, serving its keep-alive requests in turn, so the
    thread object identifies the connection (the objects are kept, so none is mistaken for another).
    """

    def __init__(self, answer: LoopbackResponse) -> None:
        """Answer every request with `answer`."""
        self.answer = answer
        self.threads: list[threading.Thread] = []

    def __call__(self, request: LoopbackRequest) -> LoopbackResponse:
        """Note the connection and answer."""
        self.threads.append(threading.current_thread())
        return self.answer

    def count(self) -> int:
        """How many distinct connections carried the requests so far."""
        return len({id(thread) for thread in self.threads})


def written_at_once(*pieces: bytes) -> LoopbackResponse:
    """A chunked answer whose whole body, every chunk and the last `0`, goes out in one write.

    So when its first chunk has arrived, the rest has too. (`LoopbackResponse` announces a
    `Content-Length` as well; a chunked answer is read by its chunks, RFC 9112 section 6.3.)
    """
    body = b"".join(b"%x\r\n%s\r\n" % (len(piece), piece) for piece in pieces) + b"0\r\n\r\n"
    return LoopbackResponse(headers=(("Transfer-Encoding", "chunked"),), body=body)


def test_a_stream_left_after_its_last_chunk_keeps_the_connection_when_its_end_is_here() -> None:
    """Closed after its last data chunk, the end of the body already received: the next request
    goes over the same connection (a chat stream stops reading at `data: [DONE]`)."""
    handler = Connections(written_at_once(b"data: one\n\n", b"data: [DONE]\n\n"))
    with LoopbackServer(handler) as server:
        transport = HttpTransport()
        for _ in range(3):
            chunks = transport.post_stream(server.url, {}, timeout=30)
            seen = [next(chunks), next(chunks)]
            chunks.close()
            assert [b"data: one\n\n", b"data: [DONE]\n\n"] == seen
        transport.close()
    assert 1 == handler.count()


def test_a_sized_stream_left_after_its_whole_body_keeps_the_connection() -> None:
    """A stream with a Content-Length, closed once its body arrived whole, keeps its connection."""
    handler = Connections(LoopbackResponse(body=b"data: one\n\ndata: [DONE]\n\n"))
    with LoopbackServer(handler) as server:
        transport = HttpTransport()
        for _ in range(2):
            chunks = transport.post_stream(server.url, {}, timeout=30)
            assert b"data: one\n\ndata: [DONE]\n\n" == next(chunks)
            chunks.close()
        transport.close()
    assert 1 == handler.count()


def test_a_stream_left_before_its_last_chunk_closes_the_connection() -> None:
    """Closed with chunks of the body still unread (arrived or not), the connection is closed."""
    handler = Connections(written_at_once(b"data: one\n\n", b"data: two\n\n", b"data: [DONE]\n\n"))
    with LoopbackServer(handler) as server:
        transport = HttpTransport()
        for _ in range(2):
            chunks = transport.post_stream(server.url, {}, timeout=30)
            assert b"data: one\n\n" == next(chunks)
            chunks.close()
        transport.close()
    assert 2 == handler.count()


def test_a_stream_left_before_its_end_arrived_is_closed_without_waiting_for_it() -> None:
    """Closed after the last data chunk while the server still holds the body's end: closing does
    not wait for it (the server waits for the close first), and the connection is not kept."""
    gate = threading.Event()
    held: list[bool] = []

    def stream() -> Iterator[bytes]:
        yield b"data: one\n\n"
        # Released once the reader's close returned; a close that waited for the end of the
        # body would get it when this wait gives up, keep the connection, and fail below.
        held.append(gate.wait(30))

    handler = Connections(LoopbackResponse(stream=stream))
    with LoopbackServer(handler) as server:
        transport = HttpTransport()
        chunks = transport.post_stream(server.url, {}, timeout=120)
        assert b"data: one\n\n" == next(chunks)
        chunks.close()
        gate.set()
        assert b"data: one\n\n" == b"".join(transport.post_stream(server.url, {}, timeout=30))
        transport.close()
    assert ([True], 2) == (held[:1], handler.count())
