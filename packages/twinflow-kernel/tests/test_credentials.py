"""API keys travel from an environment variable in the API's header (a bearer token by default);
URLs and errors never show them."""

from __future__ import annotations

import pytest

from twinflow._base._untrusted import REDACTED
from twinflow.kernel import HttpTransport, LoopbackServer
from twinflow.kernel._credentials import KeyHeader, api_key_headers, check_endpoint_url, redact_url
from twinflow.kernel._errors import TransportError
from twinflow.kernel._loopback import LoopbackRequest, LoopbackResponse
from twinflow.kernel._netpolicy import free_port
from twinflow.trace import UserError

KEY = "sk-test-5ecr3t-value"


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://user:sk-1@host:8080/v1?api_key=sk-2#frag", "http://***@host:8080/v1?***"),
        ("https://host/v1/chat?key=abc", "https://host/v1/chat?***"),
        ("http://127.0.0.1:9/v1", "http://127.0.0.1:9/v1"),
        ("http://[::1]:9/x", "http://[::1]:9/x"),
        ("http://h:notaport/x", "<unparseable URL>"),
    ],
)
def test_redact_url_drops_userinfo_query_and_fragment(url: str, expected: str) -> None:
    """What may be shown of a URL: scheme, host, port and path only."""
    assert expected == redact_url(url)


@pytest.mark.parametrize(
    ("url", "secret"),
    [
        ("http://user:sk-1@127.0.0.1:8080/", "sk-1"),
        ("http://127.0.0.1:8080/?api_key=sk-1", "sk-1"),
        ("http://127.0.0.1:8080/v1#sk-1", "sk-1"),
        ("http://127.0.0.1:8080/v1/sk-proj-Ab3dEf6hIj9kLm/chat", "sk-proj-Ab3dEf6hIj9kLm"),
        ("http://127.0.0.1:8080/key/AIzaSyA1b2C3d4E5f6G7h8/v1", "AIzaSyA1b2C3d4E5f6G7h8"),
        ("http://127.0.0.1:8080/v1/sk%2Dproj%2DAb3dEf6hIj9kLm", "sk%2Dproj%2DAb3dEf6hIj9kLm"),
        ("http://127.0.0.1:8080/0123456789abcdef0123456789abcdef/v1", "0123456789abcdef0123"),
        ("http://127.0.0.1:8080/t/3f2a9c1e-7b4d-4e8a-9f0c-2d6b8a1e5c7f/v1", "3f2a9c1e-7b4d"),
    ],
)
def test_credentials_in_an_endpoint_url_are_refused_pointing_at_api_key_env(
    url: str, secret: str
) -> None:
    """Userinfo, a query, a fragment or a key-like path segment: refused, the key not repeated."""
    with pytest.raises(UserError) as caught:
        check_endpoint_url(url)
    assert "api_key_env" in str(caught.value)
    assert secret not in str(caught.value)


@pytest.mark.parametrize(
    "url",
    [
        "https://api.openai.com/v1",
        "https://api.anthropic.com",
        "https://generativelanguage.googleapis.com/v1beta/openai",
        "https://x.openai.azure.com/openai/deployments/gpt-4o-mini-2024-07-18",
        "http://127.0.0.1:8080/v1/chat/completions",
    ],
)
def test_ordinary_endpoint_urls_pass(url: str) -> None:
    """Model and deployment names in a path are not taken for keys."""
    assert url == check_endpoint_url(url)


def test_api_key_headers_reads_the_named_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    """The key is sent as a bearer token; an unset variable is named, never a value."""
    monkeypatch.setenv("TWINFLOW_TEST_KEY", KEY)
    assert {"Authorization": f"Bearer {KEY}"} == api_key_headers("TWINFLOW_TEST_KEY")
    assert {} == api_key_headers(None)
    monkeypatch.delenv("TWINFLOW_TEST_KEY")
    with pytest.raises(UserError) as caught:
        api_key_headers("TWINFLOW_TEST_KEY")
    assert "TWINFLOW_TEST_KEY" in str(caught.value)
    with pytest.raises(UserError) as refused:
        api_key_headers(KEY)  # a key given where a variable name belongs
    assert KEY not in str(refused.value)


def test_the_transport_sends_the_key_as_a_bearer_header(monkeypatch: pytest.MonkeyPatch) -> None:
    """A real server receives `Authorization: Bearer <key>` from `api_key_env`."""
    monkeypatch.setenv("TWINFLOW_TEST_KEY", KEY)
    with LoopbackServer(lambda _request: LoopbackResponse.json_body({})) as server:
        transport = HttpTransport(api_key_env="TWINFLOW_TEST_KEY")
        try:
            transport.post_json(server.url_for("/v1"), {}, timeout=10)
        finally:
            transport.close()
        headers = {k.lower(): v for k, v in server.requests[0].headers}
    assert f"Bearer {KEY}" == headers["authorization"]


def test_the_transport_refuses_userinfo_and_hides_a_query_key() -> None:
    """Userinfo is refused; a connection error names the URL without its query."""
    port = free_port()
    transport = HttpTransport()
    with pytest.raises(UserError) as refused:
        transport.post_json(f"http://u:{KEY}@127.0.0.1:{port}/", {}, timeout=5)
    assert KEY not in str(refused.value)
    with pytest.raises(TransportError, check=lambda e: "connect" == e.reason) as caught:
        transport.post_json(f"http://127.0.0.1:{port}/v1?api_key={KEY}", {}, timeout=5)
    assert KEY not in str(caught.value)
    assert KEY not in caught.value.url
    assert f"http://127.0.0.1:{port}/v1?***" == caught.value.url


def test_a_server_echoing_the_key_does_not_put_it_in_the_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A 401 body quoting the Authorization header: the message and excerpt show the redaction marker instead."""
    monkeypatch.setenv("TWINFLOW_TEST_KEY", KEY)

    def echo_auth(request: LoopbackRequest) -> LoopbackResponse:
        auth = dict((k.lower(), v) for k, v in request.headers)["authorization"]
        return LoopbackResponse(status=401, body=f"bad token {auth}".encode())

    with LoopbackServer(echo_auth) as server:
        transport = HttpTransport(api_key_env="TWINFLOW_TEST_KEY")
        try:
            with pytest.raises(TransportError, check=lambda e: "status" == e.reason) as caught:
                transport.post_json(server.url_for("/v1"), {}, timeout=10)
        finally:
            transport.close()
    assert (False, False) == (KEY in str(caught.value), KEY in caught.value.body_excerpt)
    assert f"bad token Bearer {REDACTED}" in caught.value.body_excerpt


X_API_KEY = KeyHeader("x-api-key")


def echo_key(request: LoopbackRequest) -> LoopbackResponse:
    """A server that refuses every request, quoting the x-api-key header it received."""
    key = dict((k.lower(), v) for k, v in request.headers).get("x-api-key", "")
    return LoopbackResponse(status=401, body=f"invalid x-api-key {key}".encode())


def test_the_key_goes_in_the_header_the_api_names(monkeypatch: pytest.MonkeyPatch) -> None:
    """key_header x-api-key: the key alone in that header, no Authorization header at all."""
    monkeypatch.setenv("TWINFLOW_TEST_KEY", KEY)
    with LoopbackServer(lambda _request: LoopbackResponse.json_body({})) as server:
        transport = HttpTransport(
            api_key_env="TWINFLOW_TEST_KEY",
            key_header=X_API_KEY,
            headers={"X-Api-Key": "not-this-one", "anthropic-version": "2023-06-01"},
        )
        try:
            transport.post_json(server.url_for("/v1"), {}, timeout=10)
        finally:
            transport.close()
        headers = [(k.lower(), v) for k, v in server.requests[0].headers]
    sent = dict(headers)
    assert (KEY, "2023-06-01", None) == (
        sent["x-api-key"],
        sent["anthropic-version"],
        sent.get("authorization"),
    )
    assert 1 == [k for k, _ in headers].count("x-api-key")
    assert {"x-api-key": KEY} == api_key_headers("TWINFLOW_TEST_KEY", X_API_KEY)


def test_a_key_echoed_in_any_header_scheme_is_scrubbed_plain_and_streamed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """x-api-key quoted back in a 401: post_json's and post_stream's errors show the redaction marker instead."""
    monkeypatch.setenv("TWINFLOW_TEST_KEY", KEY)
    with LoopbackServer(echo_key) as server:
        transport = HttpTransport(api_key_env="TWINFLOW_TEST_KEY", key_header=X_API_KEY)
        try:
            with pytest.raises(TransportError, check=lambda e: "status" == e.reason) as plain:
                transport.post_json(server.url_for("/v1"), {}, timeout=10)
            with pytest.raises(TransportError, check=lambda e: "status" == e.reason) as streamed:
                list(transport.post_stream(server.url_for("/v1"), {}, timeout=10))
        finally:
            transport.close()
    for caught in (plain, streamed):
        assert (False, False) == (KEY in str(caught.value), KEY in caught.value.body_excerpt)
        assert f"invalid x-api-key {REDACTED}" in caught.value.body_excerpt


@pytest.mark.parametrize(("name", "prefix"), [("x api key", ""), ("Authorization", "Bearer\r\n")])
def test_a_key_header_that_http_cannot_carry_is_refused(name: str, prefix: str) -> None:
    """A header name that is not a token, or a prefix with a line break: UserError at once."""
    with pytest.raises(UserError):
        KeyHeader(name=name, prefix=prefix)
