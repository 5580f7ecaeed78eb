"""`open_model` of a list: each model asked in turn on a listed failure class, every switch kept."""

from __future__ import annotations

import pytest
from pydantic import JsonValue

from twinflow.kernel import LoopbackResponse, LoopbackServer, TransportError
from twinflow.kernel._loopback import LoopbackRequest
from twinflow.models import MalformedResponseError, ModelSetupError, open_model
from twinflow.models._fallback import FallbackChatModel, failure_class
from twinflow.vocab import Message, ModelRequest, Transcript

REQUEST = ModelRequest(transcript=Transcript(messages=(Message.user("hi"),)))
ANSWER: JsonValue = {
    "model": "m",
    "choices": [{"message": {"role": "assistant", "content": "hello"}, "finish_reason": "stop"}],
}


def answering(status: int, body: JsonValue) -> LoopbackServer:
    """A loopback server answering every request with `status` and `body`."""
    return LoopbackServer(lambda request: LoopbackResponse.json_body(body, status=status))


@pytest.mark.parametrize(
    ("status", "failure"),
    [(429, "rate_limited"), (503, "overloaded"), (529, "overloaded"), (500, "server_error")],
)
def test_a_busy_first_model_moves_on_and_the_switch_is_kept(
    status: int, failure: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """429, 503, 529, 500 from the first: the second answers; take_fallbacks names both, once."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-fallback")
    with (
        answering(status, {"error": "busy"}) as one,
        answering(200, ANSWER) as two,
        open_model([f"openai:m@{one.url}", f"vllm:m@{two.url}"], mode="native") as chat,
    ):
        assert isinstance(chat, FallbackChatModel)
        response = chat.request(REQUEST)
        switches, answered = chat.take_fallbacks()
        again = chat.take_fallbacks()
    assert ("hello", f"vllm:m@{two.url}", ((), None)) == (response.message.text, answered, again)
    assert [(f"openai:m@{one.url}", failure, f"vllm:m@{two.url}")] == [
        (s.model, s.failure, s.next) for s in switches
    ]


def test_a_failure_of_the_last_model_propagates_with_the_switches_kept() -> None:
    """Both busy: the last model's TransportError, unchanged; the first switch is still kept."""
    with (
        answering(503, {}) as one,
        answering(429, {}) as two,
        open_model([f"vllm:m@{one.url}", f"vllm:m@{two.url}"], mode="native") as chat,
    ):
        assert isinstance(chat, FallbackChatModel)
        with pytest.raises(TransportError) as caught:
            chat.request(REQUEST)
        switches, answered = chat.take_fallbacks()
    assert (429, ["overloaded"], None) == (
        caught.value.status,
        [s.failure for s in switches],
        answered,
    )


def test_failure_classes_name_transport_and_wire_failures() -> None:
    """connect, timeout, 4xx (none), malformed and refused answers each get their class."""

    def status(code: int) -> TransportError:
        return TransportError("x", url="u", reason="status", status=code)

    errors = [
        TransportError("x", url="u", reason="connect"),
        TransportError("x", url="u", reason="timeout"),
        status(401),
        MalformedResponseError("x", url="u", path=""),
        MalformedResponseError("x", url="u", path="", reason="refused"),
        ValueError("x"),
    ]
    assert ["connect", "timeout", None, "malformed", "refused", None] == [
        failure_class(e) for e in errors
    ]


@pytest.mark.parametrize(
    "names", [["vllm:m@http://127.0.0.1:9"], ["vllm:m@http://127.0.0.1:9", "nosuch:m"]]
)
def test_a_bad_list_is_a_setup_error(names: list[str]) -> None:
    """One model is no fallback list; an unknown provider in it is refused like a single one."""
    with pytest.raises(ModelSetupError):
        open_model(names)


def test_an_unknown_failure_class_is_a_setup_error() -> None:
    """fallback_on names a class that does not exist: refused, naming the classes."""
    with pytest.raises(ModelSetupError, match="rate_limited"):
        FallbackChatModel([("a", open_model("ollama:m")), ("b", open_model("ollama:m"))], ["busy"])  # type: ignore[list-item]  # an unknown class, on purpose


def recorder(seen: list[str]) -> LoopbackServer:
    """A loopback server answering ANSWER and noting each request's path."""

    def answer(request: LoopbackRequest) -> LoopbackResponse:
        seen.append(request.path)
        return LoopbackResponse.json_body(ANSWER)

    return LoopbackServer(answer)


def test_a_first_model_that_answers_is_the_only_one_asked() -> None:
    """No failure: the second server sees nothing and no switch is kept."""
    seen: list[str] = []
    with (
        answering(200, ANSWER) as one,
        recorder(seen) as two,
        open_model([f"vllm:m@{one.url}", f"vllm:m@{two.url}"], mode="native") as chat,
    ):
        assert isinstance(chat, FallbackChatModel)
        chat.request(REQUEST)
        assert (((), f"vllm:m@{one.url}"), []) == (chat.take_fallbacks(), seen)
