"""The OpenAI-compatible client against a hosted-style endpoint: https verified against a CA
the transport is told to trust, a bearer key in a header, plain and streamed; the key never
reaches a recording."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from twinflow.kernel import HttpTransport, LoopbackResponse, LoopbackServer, TransportError
from twinflow.kernel._loopback import LoopbackRequest
from twinflow.kernel._process import run_process
from twinflow.kernel._replay import RecordingTransport
from twinflow.models import OpenAICompatibleChatModel
from twinflow.vocab import Message, ModelRequest, Transcript, digest

STREAMS = Path(__file__).parent / "fixtures" / "streams"
KEY = "sk-test-0123456789"
REQUEST = ModelRequest(transcript=Transcript(messages=(Message.user("Hello!"),)))
PLAIN = {
    "model": "gpt-4o-mini",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello"}, "finish_reason": "stop"}],
}  # fmt: skip


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and its key (the openssl command makes them)."""
    directory = tmp_path_factory.mktemp("tls")
    cert, key = directory / "cert.pem", directory / "key.pem"
    made = run_process(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
    )  # fmt: skip
    assert 0 == made.returncode, made.stderr
    return cert, key


def hosted(cert: Path, key: Path, seen: list[dict[str, str]]) -> LoopbackServer:
    """An https chat-completions endpoint that wants `Authorization: Bearer KEY`."""
    stream = (STREAMS / "openai_docs_text.sse").read_bytes()

    def answer(request: LoopbackRequest) -> LoopbackResponse:
        headers = {name.lower(): value for name, value in request.headers}
        seen.append(headers)
        if headers.get("authorization") != f"Bearer {KEY}":
            return LoopbackResponse.json_body(
                {"error": {"message": "Incorrect API key"}}, status=401
            )
        body = request.json_value()
        if isinstance(body, dict) and body.get("stream"):
            return LoopbackResponse(
                headers=(("Content-Type", "text/event-stream"),), stream=lambda: iter([stream])
            )
        return LoopbackResponse.json_body(PLAIN)

    return LoopbackServer.https(answer, cert, key)


def test_a_hosted_endpoint_over_tls_with_a_bearer_key_plain_and_streamed(
    certificate: tuple[Path, Path], tmp_path: Path
) -> None:
    """https with the CA given, the key in a header: both replies equal; no recording holds the key."""
    seen: list[dict[str, str]] = []
    with hosted(*certificate, seen) as server:
        transport = HttpTransport(cafile=certificate[0], headers={"Authorization": f"Bearer {KEY}"})
        with RecordingTransport(transport, tmp_path / "rec.jsonl") as recorder:
            model = OpenAICompatibleChatModel(
                recorder, base_url=server.url, dialect="vllm", mode="native"
            )
            plain = model.request(REQUEST)
            streamed = model.stream(REQUEST, lambda chunk: None)
    assert server.url.startswith("https://")
    assert digest(plain) == digest(streamed)
    assert "Hello" == streamed.message.text
    assert [f"Bearer {KEY}"] * 2 == [h["authorization"] for h in seen]
    recording = (tmp_path / "rec.jsonl").read_bytes()
    assert KEY.encode() not in recording
    assert [False, True] == [
        json.loads(line)["request"].get("stream", False) for line in recording.splitlines()
    ]


def test_a_wrong_key_is_the_endpoints_401(certificate: tuple[Path, Path]) -> None:
    """Without the key the endpoint refuses; the error is TransportError "status" 401, not retried."""
    seen: list[dict[str, str]] = []
    with hosted(*certificate, seen) as server:
        model = OpenAICompatibleChatModel(
            HttpTransport(cafile=certificate[0]), base_url=server.url, dialect="vllm"
        )
        with pytest.raises(TransportError, check=lambda e: "status" == e.reason) as caught:
            model.stream(REQUEST, lambda chunk: None)
    assert 401 == caught.value.status
    assert 1 == len(seen)
