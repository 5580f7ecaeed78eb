"""FaultTransport: scheduled faults come from real sockets through the real transport."""

import pytest

from twinflow.kernel import MockTransport, TransportError
from twinflow.kernel._fault import Fault, FaultTransport
from twinflow.trace import UserError
from twinflow.vocab import JsonValue

URL = "http://127.0.0.1:9/v1/chat/completions"


def answer(url: str, body: JsonValue) -> JsonValue:
    """The inner transport's answer."""
    return {"inner": body}


@pytest.mark.parametrize(
    ("fault", "reason", "words"),
    [
        ("refuse", "connect", "connection refused"),
        ("timeout", "timeout", "no complete answer"),
        ("reset", "connect", "was lost"),
        ("server_error", "status", "HTTP 500"),
        ("garbage", "decode", "not valid HTTP"),
        ("invalid_json", "decode", "is not JSON"),
        ("oversize", "too_large", "max_response_bytes"),
    ],
)
def test_each_fault_raises_the_real_error_naming_the_callers_url(
    fault: Fault, reason: str, words: str
) -> None:
    """Every fault kind surfaces as the error the real transport maps, renamed to the caller's URL."""
    transport = FaultTransport(MockTransport(answer), [fault])
    try:
        with pytest.raises(TransportError) as caught:
            transport.post_json(URL, {"q": 1}, timeout=0.5)
    finally:
        transport.close()
    assert (reason, URL) == (caught.value.reason, caught.value.url)
    assert words in str(caught.value)
    assert URL in str(caught.value)
    assert f"[fault {fault!r} injected by FaultTransport]" in str(caught.value)
    assert [(0, fault)] == transport.injected


def test_calls_without_a_fault_reach_the_inner_transport() -> None:
    """None and calls past the schedule pass through; the fault hits only its own call."""
    transport = FaultTransport(MockTransport(answer), [None, "server_error"])
    first = transport.post_json(URL, 1, timeout=2)
    with pytest.raises(TransportError, check=lambda e: "status" == e.reason) as caught:
        transport.post_json(URL, 2, timeout=2)
    third = transport.post_json(URL, 3, timeout=2)
    transport.close()
    expected = ({"inner": 1}, {"inner": 3}, 500)
    assert expected == (first, third, caught.value.status)


def test_a_callable_schedule_chooses_by_call_number_url_and_body() -> None:
    """A schedule function sees (number, url, body) and picks the fault."""
    seen: list[tuple[int, str, JsonValue]] = []

    def schedule(number: int, url: str, body: JsonValue) -> Fault | None:
        seen.append((number, url, body))
        return "invalid_json" if body == "bad" else None

    transport = FaultTransport(MockTransport(answer), schedule)
    ok = transport.post_json(URL, "good", timeout=2)
    with pytest.raises(TransportError, check=lambda e: "decode" == e.reason):
        transport.post_json(URL, "bad", timeout=2)
    transport.close()
    assert {"inner": "good"} == ok
    assert [(0, URL, "good"), (1, URL, "bad")] == seen


def test_unknown_faults_are_usage_errors() -> None:
    """A schedule naming a fault that does not exist is refused, listing the real ones."""
    with pytest.raises(UserError, match="unknown fault 'explode'"):
        FaultTransport(MockTransport(answer), ["explode"])  # type: ignore[list-item]  # an unknown fault, on purpose
    transport = FaultTransport(MockTransport(answer), lambda *_: "explode")  # type: ignore[arg-type,return-value]  # an unknown fault, on purpose
    with pytest.raises(UserError, match="'refuse'"):
        transport.post_json(URL, 1, timeout=1)
    transport.close()
