"""The transport says what it is: its name, its redirect limit, and its two ways of reading a body."""

from __future__ import annotations

import pytest

from twinflow.kernel import HttpTransport, LoopbackServer
from twinflow.kernel._errors import TransportError
from twinflow.kernel._loopback import LoopbackRequest, LoopbackResponse


@pytest.mark.parametrize("status", [307, 308])
def test_a_redirect_past_max_redirects_reports_its_real_status(status: int) -> None:
    """The redirect the limit stops is an TransportError "status" with the server's own status, not 310."""

    def handler(request: LoopbackRequest) -> LoopbackResponse:
        hop = int(request.path.rsplit("/", 1)[1])
        return LoopbackResponse(status=status, headers=(("Location", f"/hop/{hop + 1}"),))

    with LoopbackServer(handler) as server:
        with pytest.raises(TransportError, check=lambda e: "status" == e.reason) as caught:
            HttpTransport(follow_redirects=True, max_redirects=2).post_json(
                server.url_for("/hop/0"), {"a": 1}, timeout=5
            )
        paths = [request.path for request in server.requests]
    assert ["/hop/0", "/hop/1", "/hop/2"] == paths
    assert (status, server.url_for("/hop/2")) == (caught.value.status, caught.value.url)
    assert (
        f"{server.url_for('/hop/2')} answered HTTP {status}, a redirect to "
        f"{server.url_for('/hop/3')}, after 2 redirects followed (max_redirects); use the final URL"
    ) == str(caught.value)


def test_max_redirects_zero_follows_none() -> None:
    """With max_redirects=0 the first redirect is the error, and only one request is sent."""

    def handler(request: LoopbackRequest) -> LoopbackResponse:
        del request
        return LoopbackResponse(status=307, headers=(("Location", "/next"),))

    with LoopbackServer(handler) as server:
        with pytest.raises(TransportError, check=lambda e: "status" == e.reason) as caught:
            HttpTransport(follow_redirects=True, max_redirects=0).post_json(
                server.url_for("/start"), {}, timeout=5
            )
        sent = len(server.requests)
    assert (1, 307) == (sent, caught.value.status)


def test_an_error_body_is_cut_to_its_excerpt() -> None:
    """An error answer's body is read only as far as the excerpt needs (2,000 bytes)."""
    big = LoopbackResponse(status=500, body=b"e" * 100_000)
    with (
        LoopbackServer(lambda _r: big) as server,
        pytest.raises(TransportError, check=lambda e: "status" == e.reason) as caught,
    ):
        HttpTransport().post_json(server.url, {}, timeout=5)
    assert (500, "e" * 2000) == (caught.value.status, caught.value.body_excerpt)


def test_an_error_body_cut_by_a_reset_still_gives_its_status() -> None:
    """Reading an excerpt never fails the error: a reset mid-body keeps the status and what came."""
    response = LoopbackResponse(status=502, body=b"bad gateway " * 10, behaviour="reset_mid_body")
    with (
        LoopbackServer(lambda _r: response) as server,
        pytest.raises(TransportError, check=lambda e: "status" == e.reason) as caught,
    ):
        HttpTransport().post_json(server.url, {}, timeout=5)
    assert 502 == caught.value.status
    assert ("bad gateway " * 10).startswith(caught.value.body_excerpt)


def test_a_success_body_cut_by_a_reset_is_a_connect_error() -> None:
    """The whole-body read refuses a body the server stopped sending: a TransportError "connect", no value."""
    response = LoopbackResponse.json_body({"x": "y" * 1000})
    cut = response.model_copy(update={"behaviour": "reset_mid_body"})
    with (
        LoopbackServer(lambda _r: cut) as server,
        pytest.raises(TransportError, check=lambda e: "connect" == e.reason) as caught,
    ):
        HttpTransport().post_json(server.url, {}, timeout=5)
    assert server.url in caught.value.url
