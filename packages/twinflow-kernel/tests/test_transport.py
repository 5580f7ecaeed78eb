"""HttpTransport against real loopback servers: answers, every failure kind, the kill switch."""

import pickle
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import pytest

from twinflow.kernel import HttpTransport, LoopbackServer, Transport, TransportError
from twinflow.kernel._loopback import LoopbackRequest, LoopbackResponse
from twinflow.kernel._netpolicy import free_port
from twinflow.trace import UserError

MB = 1024 * 1024


def serve(response: LoopbackResponse) -> LoopbackServer:
    """A loopback server that gives every request the same response."""
    return LoopbackServer(lambda _request: response)


def test_round_trip_posts_json_and_decodes_the_answer(echo_server: LoopbackServer) -> None:
    """The body arrives as UTF-8 JSON with a JSON content type, and the answer is decoded."""
    transport: Transport = HttpTransport()
    body = {"text": "héllo ☃", "n": [1, 2.5, None, True]}
    answer = transport.post_json(echo_server.url_for("/v1/chat?x=1"), body, timeout=5)
    received = echo_server.requests[0]
    assert {"path": "/v1/chat?x=1", "echo": body} == answer
    expected = ("POST", "application/json")
    assert expected == (received.method, dict(received.headers)["Content-Type"])


def test_localhost_name_is_loopback(echo_server: LoopbackServer) -> None:
    """`localhost` counts as loopback for the kill switch and reaches the server."""
    url = f"http://localhost:{echo_server.port}/x"
    expected = {"path": "/x", "echo": 1}
    assert expected == HttpTransport(allow_network=False).post_json(url, 1, timeout=5)


def test_refused_fails_at_once_without_retry() -> None:
    """Nothing listening: TransportError "connect" at once, not after the (ten-minute) timeout."""
    url = f"http://127.0.0.1:{free_port()}/v1/chat"
    start = time.monotonic()
    with pytest.raises(TransportError, check=lambda e: "connect" == e.reason) as caught:
        HttpTransport().post_json(url, {}, timeout=600)
    elapsed = time.monotonic() - start
    # One-sided and a hundredfold below the timeout: holds on a loaded machine.
    assert elapsed < 60
    assert url == caught.value.url
    assert "connection refused by " + url in str(caught.value)
    assert "start the server" in str(caught.value)


def test_a_failing_server_is_asked_exactly_once() -> None:
    """An HTTP 500 is not retried: the server sees one request."""
    with serve(LoopbackResponse.json_body({"error": "boom"}, status=500)) as server:
        with pytest.raises(TransportError, check=lambda e: "status" == e.reason):
            HttpTransport().post_json(server.url_for("/x"), {}, timeout=5)
        expected = 1
        assert expected == len(server.requests)


def test_sleeping_server_times_out_at_the_timeout_not_at_the_server() -> None:
    """A server that sleeps past the timeout gives TransportError "timeout", not its answer."""
    with serve(LoopbackResponse.json_body({}).model_copy(update={"delay": 300.0})) as server:
        url = server.url_for("/slow")
        start = time.monotonic()
        with pytest.raises(TransportError, check=lambda e: "timeout" == e.reason) as caught:
            HttpTransport().post_json(url, {}, timeout=0.6)
        elapsed = time.monotonic() - start
    # Load only lengthens waits: the lower bound is exact, the upper one far from the server's 300 s.
    assert 0.6 <= elapsed < 60
    assert url in str(caught.value)
    assert "larger timeout" in str(caught.value)


def test_deadline_covers_a_body_that_trickles() -> None:
    """The timeout bounds the whole exchange, not each read: a body that trickles times out."""
    trickle = LoopbackResponse(body=b" ", repeat=3000, chunk_delay=0.1)
    with serve(trickle) as server:
        start = time.monotonic()
        with pytest.raises(TransportError, check=lambda e: "timeout" == e.reason, match="body"):
            HttpTransport().post_json(server.url, {}, timeout=0.5)
        elapsed = time.monotonic() - start
    # The whole body takes 300 s; a per-read timeout would never fire.
    assert 0.5 <= elapsed < 60


def test_announced_200_mb_body_is_refused_without_reading() -> None:
    """A 200 MB body with Content-Length is refused before any of it is read."""
    chunk = b"x" * (64 * 1024)
    with serve(LoopbackResponse(body=chunk, repeat=3200)) as server:
        tracemalloc.start()
        try:
            with pytest.raises(TransportError, check=lambda e: "too_large" == e.reason) as caught:
                HttpTransport(max_response_bytes=MB).post_json(server.url, {}, timeout=10)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert peak < 4 * MB
    assert "209715200-byte body" in str(caught.value)
    assert "nothing was read" in str(caught.value)


def test_unannounced_200_mb_body_stops_past_the_limit() -> None:
    """A 200 MB body without Content-Length: reading stops just past the limit, memory stays flat."""
    chunk = b"x" * (64 * 1024)
    with serve(LoopbackResponse(body=chunk, repeat=3200, announce_length=False)) as server:
        tracemalloc.start()
        try:
            with pytest.raises(TransportError, check=lambda e: "too_large" == e.reason) as caught:
                HttpTransport(max_response_bytes=MB).post_json(server.url, {}, timeout=60)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        # Whatever the client read, the server wrote first: a client that kept reading would
        # have made this the full 200 MB.
        sent = server.bytes_sent
    assert peak < 8 * MB
    assert sent < 50 * MB
    assert "max_response_bytes=1048576" in str(caught.value)


def test_http_error_carries_status_and_body_excerpt() -> None:
    """Status >= 400 gives TransportError "status" with the status, a body excerpt and advice."""
    with serve(LoopbackResponse.json_body({"error": "no such model"}, status=404)) as server:
        url = server.url_for("/v1/chat")
        with pytest.raises(TransportError, check=lambda e: "status" == e.reason) as caught:
            HttpTransport().post_json(url, {}, timeout=5)
    error = caught.value
    assert (404, '{"error":"no such model"}', url) == (error.status, error.body_excerpt, error.url)
    assert "HTTP 404" in str(error)
    assert "check the URL" in str(error)


def test_server_error_advice_points_at_the_server_log() -> None:
    """A 5xx says the server failed and to read its log."""
    advice = "the server failed; check its log"
    with (
        serve(LoopbackResponse(status=500, body=b"failed")) as server,
        pytest.raises(TransportError, check=lambda e: "status" == e.reason, match=advice) as caught,
    ):
        HttpTransport().post_json(server.url, {}, timeout=5)
    expected = (500, "failed", None)
    assert expected == (caught.value.status, caught.value.body_excerpt, caught.value.retry_after)


@pytest.mark.parametrize("status", [429, 503, 529])
def test_a_rate_limit_carries_its_retry_after_and_says_to_call_later(status: int) -> None:
    """429, 503 and 529 keep the Retry-After header as received and say to call later."""
    answer = LoopbackResponse(status=status, headers=(("Retry-After", "7"),), body=b"busy")
    with (
        serve(answer) as server,
        pytest.raises(TransportError, match="asks to be called later") as caught,
    ):
        HttpTransport().post_json(server.url, {}, timeout=5)
    assert (status, "7", False) == (
        caught.value.status,
        caught.value.retry_after,
        caught.value.unsent,
    )


def test_invalid_json_body_is_a_decode_error() -> None:
    """HTTP 200 with a body that is not JSON gives TransportError "decode" showing its start."""
    with (
        serve(LoopbackResponse(body=b"<html>hi</html>")) as server,
        pytest.raises(
            TransportError, check=lambda e: "decode" == e.reason, match="not JSON"
        ) as caught,
    ):
        HttpTransport().post_json(server.url, {}, timeout=5)
    assert "<html>hi</html>" in str(caught.value)


def test_non_standard_json_constants_are_refused() -> None:
    """NaN is not JSON, even though Python's json module would accept it."""
    with (
        serve(LoopbackResponse(body=b"[NaN]")) as server,
        pytest.raises(TransportError, check=lambda e: "decode" == e.reason),
    ):
        HttpTransport().post_json(server.url, {}, timeout=5)


def test_garbage_instead_of_http_is_a_decode_error() -> None:
    """Bytes that are not an HTTP answer give TransportError "decode" saying so."""
    with (
        serve(LoopbackResponse(body=b"\x00\x17garbage\xff\r\n\r\n", behaviour="garbage")) as server,
        pytest.raises(TransportError, check=lambda e: "decode" == e.reason, match="not valid HTTP"),
    ):
        HttpTransport().post_json(server.url, {}, timeout=5)


def test_reset_mid_body_is_a_connection_error() -> None:
    """A TCP reset after half the body gives TransportError "connect", once, not a partial answer."""
    body = b'{"a": "' + b"x" * 100_000 + b'"}'
    with serve(LoopbackResponse(body=body, behaviour="reset_mid_body")) as server:
        with pytest.raises(
            TransportError, check=lambda e: "connect" == e.reason, match="twinflow does not retry"
        ):
            HttpTransport().post_json(server.url, {}, timeout=5)
        expected = 1
        assert expected == len(server.requests)


def test_kill_switch_refuses_non_loopback_hosts_under_tests(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Under pytest, a non-loopback host is refused before any connection, saying how to allow it."""
    monkeypatch.delenv("TWINFLOW_ALLOW_NETWORK", raising=False)
    with pytest.raises(TransportError, check=lambda e: "blocked" == e.reason) as caught:
        HttpTransport().post_json("https://api.example.com/v1/chat", {}, timeout=5)
    expected = "https://api.example.com/v1/chat"
    assert expected == caught.value.url
    assert "allow_network=True" in str(caught.value)
    assert "TWINFLOW_ALLOW_NETWORK=1" in str(caught.value)


def test_kill_switch_environment_and_explicit_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """TWINFLOW_ALLOW_NETWORK=0 refuses even when allowed otherwise; an explicit False wins over =1."""
    monkeypatch.setenv("TWINFLOW_ALLOW_NETWORK", "0")
    with pytest.raises(TransportError, check=lambda e: "blocked" == e.reason):
        HttpTransport().post_json("http://10.255.255.1:9/", {}, timeout=0.3)
    monkeypatch.setenv("TWINFLOW_ALLOW_NETWORK", "1")
    with pytest.raises(TransportError, check=lambda e: "blocked" == e.reason):
        HttpTransport(allow_network=False).post_json("http://10.255.255.1:9/", {}, timeout=0.3)


@pytest.mark.parametrize("allow", ["env", "explicit"])
def test_allowed_network_attempts_the_connection(
    monkeypatch: pytest.MonkeyPatch, allow: str
) -> None:
    """Once allowed, a non-loopback host is really tried (here an unroutable one fails)."""
    monkeypatch.setenv("TWINFLOW_ALLOW_NETWORK", "1" if allow == "env" else "0")
    transport = HttpTransport(allow_network=True if allow == "explicit" else None)
    with pytest.raises(TransportError) as caught:
        transport.post_json("http://10.255.255.1:9/", {}, timeout=0.3)
    assert "blocked" != caught.value.reason


def redirecting(status: int, location: str) -> LoopbackServer:
    """A server that redirects /start to `location` and echoes anything else."""

    def handler(request: LoopbackRequest) -> LoopbackResponse:
        if request.path == "/start":
            return LoopbackResponse(status=status, headers=(("Location", location),))
        return LoopbackResponse.json_body({"path": request.path, "echo": request.json_value()})

    return LoopbackServer(handler)


def test_redirects_are_not_followed_by_default() -> None:
    """A 307 is an TransportError "status" naming the target and the switch that follows it."""
    with redirecting(307, "/final") as server:
        with pytest.raises(
            TransportError, check=lambda e: "status" == e.reason, match="follow_redirects=True"
        ) as caught:
            HttpTransport().post_json(server.url_for("/start"), {"a": 1}, timeout=5)
        expected = 1
        assert expected == len(server.requests)
    expected = 307
    assert expected == caught.value.status
    assert server.url_for("/final") in str(caught.value)


def test_307_is_followed_when_allowed_keeping_method_and_body() -> None:
    """With follow_redirects, a 307 re-POSTs the same body to the target."""
    with redirecting(307, "/final") as server:
        answer = HttpTransport(follow_redirects=True).post_json(
            server.url_for("/start"), {"a": 1}, timeout=5
        )
    expected = {"path": "/final", "echo": {"a": 1}}
    assert expected == answer


def test_302_is_never_followed() -> None:
    """A 302 would turn the POST into a GET, so it is refused even with follow_redirects."""
    with (
        redirecting(302, "/final") as server,
        pytest.raises(TransportError, check=lambda e: "status" == e.reason, match="lose its body"),
    ):
        HttpTransport(follow_redirects=True).post_json(server.url_for("/start"), {}, timeout=5)


def test_a_followed_redirect_still_obeys_the_kill_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    """A loopback server cannot redirect the transport off the machine."""
    monkeypatch.delenv("TWINFLOW_ALLOW_NETWORK", raising=False)
    with (
        redirecting(308, "http://api.example.com/steal") as server,
        pytest.raises(TransportError, check=lambda e: "blocked" == e.reason),
    ):
        HttpTransport(follow_redirects=True).post_json(server.url_for("/start"), {}, timeout=5)


def test_usage_mistakes_are_user_errors(echo_server: LoopbackServer) -> None:
    """A bad scheme, a non-JSON body, a bad timeout or a closed transport are UserErrors."""
    transport = HttpTransport()
    with pytest.raises(UserError, match="not an absolute http"):
        transport.post_json("ftp://127.0.0.1/x", {}, timeout=5)
    with pytest.raises(UserError, match="not JSON"):
        transport.post_json(echo_server.url, {"x": {1, 2}}, timeout=5)  # type: ignore[dict-item]  # a set is not JSON, on purpose
    with pytest.raises(UserError, match="timeout > 0"):
        transport.post_json(echo_server.url, {}, timeout=0)
    transport.close()
    with pytest.raises(UserError, match="closed"):
        transport.post_json(echo_server.url, {}, timeout=5)
    expected = []
    assert expected == echo_server.requests


def test_errors_survive_pickling_and_rebinding() -> None:
    """Transport errors keep their fields through pickle, and with_url renames the URL."""
    error = TransportError(
        "http://a/x answered 500", reason="status", url="http://a/x", status=500, body_excerpt="b"
    )
    copy = pickle.loads(pickle.dumps(error))
    moved = error.with_url("http://b/y", " [note]")
    assert ("status", "http://a/x answered 500", 500, "b") == (
        copy.reason,
        str(copy),
        copy.status,
        copy.body_excerpt,
    )
    expected = ("http://b/y", "http://b/y answered 500 [note]", 500)
    assert expected == (
        moved.url,
        str(moved),
        moved.status,
    )


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and its key, made with the openssl CLI."""
    openssl = "openssl"
    directory = tmp_path_factory.mktemp("tls")
    cert, key = directory / "cert.pem", directory / "key.pem"
    try:
        subprocess.run(
            [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
             "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
             "-keyout", str(key), "-out", str(cert)],
            check=True,
            capture_output=True,
        )  # fmt: skip
    except FileNotFoundError:
        pytest.fail(
            "the openssl command is needed to make a self-signed certificate: apt-get install openssl"
        )
    return cert, key


def tls_server(cert: Path, key: Path) -> LoopbackServer:
    """An https echo server using the self-signed certificate."""
    import ssl

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    return LoopbackServer(
        lambda r: LoopbackResponse.json_body({"echo": r.json_value()}), ssl_context=context
    )


def test_self_signed_tls_is_refused_by_default(tls_files: tuple[Path, Path]) -> None:
    """The system trust store does not trust a self-signed certificate: TransportError "connect" naming cafile."""
    with tls_server(*tls_files) as server:
        assert server.url.startswith("https://")
        with pytest.raises(
            TransportError, check=lambda e: "connect" == e.reason, match="certificate"
        ) as caught:
            HttpTransport().post_json(server.url, {"a": 1}, timeout=5)
    assert "cafile=" in str(caught.value)


def test_self_signed_tls_is_accepted_with_its_ca_file(tls_files: tuple[Path, Path]) -> None:
    """With the certificate given as cafile, the https request succeeds."""
    cert, _key = tls_files
    with tls_server(*tls_files) as server:
        answer = HttpTransport(cafile=cert).post_json(server.url, {"a": 1}, timeout=5)
    expected = {"echo": {"a": 1}}
    assert expected == answer


def test_certifi_is_never_imported(tls_files: tuple[Path, Path]) -> None:
    """After importing the kernel and making http and https requests, certifi is not loaded."""
    cert, key = tls_files
    script = f"""
import ssl, sys
from twinflow.kernel import LoopbackResponse, LoopbackServer, HttpTransport
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain({str(cert)!r}, {str(key)!r})
echo = lambda r: LoopbackResponse.json_body(r.json_value())
with LoopbackServer(echo) as plain, LoopbackServer(echo, ssl_context=context) as tls:
    assert HttpTransport().post_json(plain.url, 1, timeout=5) == 1
    assert HttpTransport(cafile={str(cert)!r}).post_json(tls.url, 2, timeout=5) == 2
print("certifi" in sys.modules, "httpx" in sys.modules)
"""
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    expected = "False False"
    assert expected == result.stdout.strip()
