"""MockTransport, RecordingTransport and ReplayTransport."""

from pathlib import Path

import pytest

from twinflow._base._untrusted import REDACTED, register_secret
from twinflow.kernel import (
    HttpTransport,
    LoopbackServer,
    MockTransport,
    ReplayDivergenceError,
    Transport,
)
from twinflow.kernel._errors import TransportError
from twinflow.kernel._fault import FaultTransport
from twinflow.kernel._loopback import LoopbackRequest, LoopbackResponse
from twinflow.kernel._replay import RecordingTransport, ReplayTransport
from twinflow.trace import UserError
from twinflow.vocab import Difference, JsonValue


def chat_handler(request: LoopbackRequest) -> LoopbackResponse:
    """A tiny chat server: answers with the number of messages and the last text."""
    body = request.json_value()
    assert isinstance(body, dict)
    messages = body["messages"]
    assert isinstance(messages, list)
    if request.path == "/fail":
        return LoopbackResponse.json_body({"error": "model not loaded"}, status=503)
    return LoopbackResponse.json_body(
        {"count": len(messages), "last": messages[-1], "ratio": 0.5, "ok": True, "none": None}
    )


def conversation(transport: Transport, base: str, *, turns: int = 3) -> list[JsonValue]:
    """A multi-request exchange, the way a model client would drive it."""
    answers: list[JsonValue] = []
    messages: list[JsonValue] = []
    for turn in range(turns):
        messages.append({"role": "user", "content": f"turn {turn} ☃"})
        answers.append(transport.post_json(f"{base}/v1/chat", {"messages": messages}, timeout=5))
    return answers


@pytest.fixture
def recording(tmp_path: Path) -> Path:
    """A recording of a three-turn conversation with a real loopback server."""
    path = tmp_path / "first.jsonl"
    with LoopbackServer(chat_handler) as server:
        recorder = RecordingTransport(HttpTransport(), path)
        conversation(recorder, server.url)
        recorder.close()
    return path


def test_mock_transport_answers_through_its_handler() -> None:
    """MockTransport passes url and body to the handler and returns its answer."""
    seen: list[tuple[str, JsonValue]] = []

    def handler(url: str, body: JsonValue) -> JsonValue:
        seen.append((url, body))
        return {"n": len(seen)}

    mock: Transport = MockTransport(handler)
    expected = [{"n": 1}, {"n": 2}]
    assert expected == [mock.post_json("u1", 1, timeout=1), mock.post_json("u2", 2, timeout=1)]
    assert [("u1", 1), ("u2", 2)] == seen
    mock.close()
    with pytest.raises(UserError, match="closed"):
        mock.post_json("u3", 3, timeout=1)


def test_recording_is_canonical_json_lines(recording: Path) -> None:
    """Each exchange is one canonical JSON line with seq, request and response, in order."""
    lines = recording.read_bytes().splitlines()
    expected = (
        b'{"request":{"body":{"messages":[{"content":"turn 0 \xe2\x98\x83","role":"user"}]},'
        b'"url":"http://127.0.0.1:'
    )
    assert 3 == len(lines)
    assert expected == lines[0][: len(expected)]
    assert lines[0].endswith(
        b'"response":{"count":1,"last":{"content":"turn 0 \xe2\x98\x83","role":"user"},'
        b'"none":null,"ok":true,"ratio":0.5},"seq":0}'
    )


def test_record_then_replay_is_byte_identical(recording: Path, tmp_path: Path) -> None:
    """Replaying a recording through a recorder writes the same bytes, with no server running."""
    again = tmp_path / "again.jsonl"
    port = recording.read_text().split("127.0.0.1:")[1].split("/")[0]
    with ReplayTransport(recording) as replay:
        recorder = RecordingTransport(replay, again)
        answers = conversation(recorder, f"http://127.0.0.1:{port}")
        recorder.close()
    assert recording.read_bytes() == again.read_bytes()
    assert 3 == answers[-1]["count"]


def test_a_changed_request_is_a_divergence_with_a_diff(recording: Path) -> None:
    """A request that differs raises ReplayDivergenceError pointing at the first difference."""
    port = recording.read_text().split("127.0.0.1:")[1].split("/")[0]
    replay = ReplayTransport(recording)
    base = f"http://127.0.0.1:{port}"
    replay.post_json(
        f"{base}/v1/chat", {"messages": [{"role": "user", "content": "turn 0 ☃"}]}, timeout=5
    )
    changed = {
        "messages": [
            {"role": "user", "content": "turn 0 ☃"},
            {"role": "user", "content": "turn 1!"},
        ]
    }
    with pytest.raises(ReplayDivergenceError) as caught:
        replay.post_json(f"{base}/v1/chat", changed, timeout=5)
    expected = Difference(
        pointer="/1/request/body/messages/1/content",
        expected="turn 1 ☃",
        actual="turn 1!",
        reason="value",
    )
    assert expected == caught.value.difference
    assert "request 1" in str(caught.value)
    assert "record again" in str(caught.value)
    assert "/1/request/body/messages/1/content" in str(caught.value)
    with pytest.raises(ReplayDivergenceError) as again:
        replay.post_json(f"{base}/v1/chat", changed, timeout=5)
    assert caught.value is again.value
    with pytest.raises(ReplayDivergenceError):
        replay.close()


def test_a_missing_request_is_reported_at_close(recording: Path) -> None:
    """Stopping early leaves recorded exchanges unconsumed: close() reports the first one."""
    port = recording.read_text().split("127.0.0.1:")[1].split("/")[0]
    replay = ReplayTransport(recording)
    conversation(replay, f"http://127.0.0.1:{port}", turns=2)
    assert 1 == replay.remaining
    with pytest.raises(ReplayDivergenceError, match="1 recorded exchange") as caught:
        replay.close()
    difference = caught.value.difference
    assert ("/2", "missing", None) == (difference.pointer, difference.reason, difference.actual)
    assert isinstance(difference.expected, dict)
    assert 3 == len(difference.expected["body"]["messages"])


def test_an_extra_request_is_reported_at_once_and_at_close(recording: Path) -> None:
    """A request past the end raises ReplayDivergenceError; close() reports it even if it was caught."""
    port = recording.read_text().split("127.0.0.1:")[1].split("/")[0]
    replay = ReplayTransport(recording)
    conversation(replay, f"http://127.0.0.1:{port}")
    with pytest.raises(ReplayDivergenceError, match="extra") as caught:
        replay.post_json(f"http://127.0.0.1:{port}/v1/chat", {"messages": []}, timeout=5)
    expected = Difference(
        pointer="/3",
        expected=None,
        actual={"url": f"http://127.0.0.1:{port}/v1/chat", "body": {"messages": []}},
        reason="unexpected",
    )
    assert expected == caught.value.difference
    with pytest.raises(ReplayDivergenceError, match="extra"):
        replay.close()


def test_a_complete_replay_closes_cleanly(recording: Path) -> None:
    """Consuming every exchange exactly: close() returns quietly."""
    port = recording.read_text().split("127.0.0.1:")[1].split("/")[0]
    replay = ReplayTransport(recording)
    conversation(replay, f"http://127.0.0.1:{port}")
    replay.close()
    assert 0 == replay.remaining


def test_recorded_failures_replay_as_the_same_error(tmp_path: Path) -> None:
    """A transport failure is recorded and raised again on replay, same class and message."""
    path, again = tmp_path / "fail.jsonl", tmp_path / "again.jsonl"
    with LoopbackServer(chat_handler) as server:
        recorder = RecordingTransport(HttpTransport(), path)
        with pytest.raises(TransportError, check=lambda e: "status" == e.reason) as live:
            recorder.post_json(server.url_for("/fail"), {"messages": [1]}, timeout=5)
        faulty = RecordingTransport(FaultTransport(recorder, ["refuse"]), tmp_path / "outer.jsonl")
        with pytest.raises(TransportError, check=lambda e: "connect" == e.reason):
            faulty.post_json(server.url_for("/x"), {"messages": [2]}, timeout=5)
        faulty.close()
    replay = ReplayTransport(path)
    rerecord = RecordingTransport(replay, again)
    with pytest.raises(TransportError, check=lambda e: "status" == e.reason) as replayed:
        rerecord.post_json(server.url_for("/fail"), {"messages": [1]}, timeout=5)
    rerecord.close()
    expected = (str(live.value), live.value.status, live.value.body_excerpt, live.value.url)
    actual = replayed.value
    assert expected == (str(actual), actual.status, actual.body_excerpt, actual.url)
    assert path.read_bytes() == again.read_bytes()


def test_a_recording_that_is_not_records_is_refused(tmp_path: Path) -> None:
    """A hand-edited or foreign file is a UserError naming the line."""
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b'{"request":{"body":1,"url":"u"},"response":1,"seq":0}\n{"seq":1}\n')
    with pytest.raises(UserError, match=r"bad\.jsonl:2 is not an exchange record"):
        ReplayTransport(path)
    with pytest.raises(UserError, match="cannot read"):
        ReplayTransport(tmp_path / "absent.jsonl")


def test_a_recording_never_holds_a_key_the_process_read(tmp_path: Path) -> None:
    """A server echoing the key, in another case: the recording holds the marker instead."""
    key = "sk-recording-Key-31f0c9d2a7e4"
    register_secret(key)
    inner = MockTransport(lambda url, body: {"echo": f"bad key {key.upper()}"})
    path = tmp_path / "recording.jsonl"
    with RecordingTransport(inner, path) as recorder:
        recorder.post_json("http://127.0.0.1:1/v1", {"q": 1}, timeout=5)
    text = path.read_text()
    assert (False, True) == (key.lower() in text.lower(), REDACTED in text)
