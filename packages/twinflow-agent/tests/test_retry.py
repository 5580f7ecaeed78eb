"""Requests a server refuses for now (429, 503, 529, a reset before sending) are sent again.

A scripted loopback server speaks the OpenAI chat wire behind the real `HttpTransport`; the
agent's clock is a `SteppingClock` whose `sleep` moves it without waiting, and its ids a
`SeededIds`, so each wait is exact; a replay of the trace waits for nothing and matches it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from agent_testkit import replaying_agent

from twinflow.agent import Agent, Trace, replay
from twinflow.agent._retry import RetryLimits, next_wait, refusal, retry_after_seconds
from twinflow.kernel import (
    HttpTransport,
    LoopbackServer,
    SteppingClock,
    TransportError,
)
from twinflow.kernel._ids import SeededIds
from twinflow.kernel._loopback import LoopbackRequest, LoopbackResponse
from twinflow.models import OpenAICompatibleChatModel
from twinflow.trace import MemoryTraceSink

START = datetime(2026, 1, 1, tzinfo=UTC)

ANSWER = {
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "hello"}, "finish_reason": "stop"}
    ],
    "usage": {"prompt_tokens": 3, "completion_tokens": 1},
}


class Scripted:
    """Answers each request with the next refusal of ``refusals``, then with ``ANSWER``."""

    def __init__(self, refusals: list[tuple[int, str | None]]) -> None:
        self.refusals = list(refusals)
        self.seen = 0
        self.server = LoopbackServer(self.answer)

    def answer(self, request: LoopbackRequest) -> LoopbackResponse:
        self.seen += 1
        if not self.refusals:
            return LoopbackResponse.json_body(ANSWER)
        status, header = self.refusals.pop(0)
        headers = (("Content-Type", "application/json"),)
        if header is not None:
            headers += (("Retry-After", header),)
        body = json.dumps({"error": {"message": "slow down"}}).encode()
        return LoopbackResponse(status=status, headers=headers, body=body)


@pytest.fixture
def server() -> Iterator[Any]:
    """A factory of started scripted servers, each stopped after the test."""
    started: list[Scripted] = []

    def make(refusals: list[tuple[int, str | None]]) -> Scripted:
        scripted = Scripted(refusals)
        scripted.server.start()
        started.append(scripted)
        return scripted

    yield make
    for scripted in started:
        scripted.server.close()


def run(scripted: Scripted, **config: Any) -> tuple[MemoryTraceSink, Any, SteppingClock]:
    """One run against ``scripted``; the sink, the result (or the error) and the clock."""
    sink = MemoryTraceSink()
    clock = SteppingClock(START, timedelta(seconds=1))
    model = OpenAICompatibleChatModel(
        HttpTransport(), base_url=scripted.server.url, dialect="llama.cpp", mode="native"
    )
    agent = Agent(model, clock=clock, ids=SeededIds(7), trace=sink, **config)
    try:
        outcome: Any = agent.run("hi")
    except TransportError as error:
        outcome = error
    return sink, outcome, clock


def waits(sink: MemoryTraceSink) -> list[dict[str, Any]]:
    """The ``model_waited`` bodies of a trace, without their tag."""
    bodies = [json.loads(line)["event"]["body"] for line in sink.data.splitlines()]
    return [
        {k: v for k, v in b.items() if k not in ("kind", "jitter")}
        for b in bodies
        if b["kind"] == "model_waited"
    ]


def test_429_with_retry_after_is_waited_for_then_sent_again(server: Any) -> None:
    """A 429 with Retry-After: 2 is a wait of at least 2 s, recorded, then the answer."""
    scripted = server([(429, "2")])
    sink, result, _ = run(scripted)
    assert "hello" == result.output
    assert 2 == scripted.seen
    [wait] = waits(sink)
    assert {"step": 1, "attempt": 1, "status": 429, "retry_after": "2"} == {
        k: wait[k] for k in ("step", "attempt", "status", "retry_after")
    }
    assert 2.0 <= wait["wait_seconds"] <= 2.2


def test_503_storm_backs_off_exponentially_and_replays_without_waiting(server: Any) -> None:
    """Three 503s and a 529 are four growing waits; the replay matches byte for byte."""
    scripted = server([(503, None), (503, None), (529, None), (503, None)])
    sink, result, _ = run(scripted, retries=RetryLimits(attempts=5))
    assert "hello" == result.output
    recorded = waits(sink)
    assert [503, 503, 529, 503] == [w["status"] for w in recorded]
    seconds = [w["wait_seconds"] for w in recorded]
    assert all(0.5 * 2**i <= s <= 2**i for i, s in enumerate(seconds))
    replayed = replay(
        Trace.load(sink.data),
        lambda ports: replaying_agent(ports, retries=RetryLimits(attempts=5)),
    )
    assert Trace.load(sink.data).size == replayed.events


def test_the_wait_goes_through_the_clock_port(server: Any) -> None:
    """The clock moved by the waits: the event after them is stamped that much later."""
    scripted = server([(429, "30")])
    sink, _, _ = run(scripted)
    ats = [datetime.fromisoformat(json.loads(x)["event"]["at"]) for x in sink.data.splitlines()]
    assert (ats[3] - ats[2]).total_seconds() >= 30


def test_429_forever_ends_within_the_wait_budget(server: Any) -> None:
    """A server refusing every send ends the run once the total wait would pass its budget."""
    scripted = server([(429, "10")] * 50)
    limits = RetryLimits(attempts=50, total_wait_seconds=35)
    sink, error, _ = run(scripted, retries=limits)
    assert isinstance(error, TransportError)
    assert 429 == error.status
    assert 3 == len(waits(sink))
    assert "not retried: waiting" in str(error)
    assert "retries.total_wait_seconds=35" in str(error)


def test_sends_stop_at_the_attempt_limit(server: Any) -> None:
    """Past ``attempts`` sends the server's error ends the run, naming the limit."""
    scripted = server([(503, "0")] * 5)
    _, error, _ = run(scripted, retries=RetryLimits(attempts=2))
    assert 2 == scripted.seen
    assert "2 sends refused, the last with Retry-After '0' (retries.attempts=2)" in str(error)


@pytest.mark.parametrize("header", ["31536000", "Fri, 01 Jan 2027 00:00:00 GMT"])
def test_a_retry_after_of_a_year_is_refused_quoting_it(server: Any, header: str) -> None:
    """A Retry-After past max_wait_seconds (seconds or a date) is not waited for."""
    scripted = server([(429, header)])
    sink, error, _ = run(scripted)
    assert 1 == scripted.seen
    assert [] == waits(sink)
    assert f"its Retry-After {header!r} asks for" in str(error)
    assert "over retries.max_wait_seconds=60" in str(error)


@pytest.mark.parametrize("header", ["-5", "soon", "1e9", ""])
def test_a_negative_or_garbage_retry_after_falls_back_to_the_backoff(
    server: Any, header: str
) -> None:
    """An unusable Retry-After is recorded as received and the spread backoff is used."""
    scripted = server([(429, header)])
    sink, result, _ = run(scripted)
    assert "hello" == result.output
    [wait] = waits(sink)
    assert header == wait["retry_after"]
    assert 0.5 <= wait["wait_seconds"] <= 1.0


def test_other_failures_are_not_retried(server: Any) -> None:
    """A 500 and a 400 end the run at once, as before."""
    for status in (500, 400):
        scripted = server([(status, "1")])
        sink, error, _ = run(scripted)
        assert (1, [], status) == (scripted.seen, waits(sink), error.status)


def test_a_reset_is_retried_only_when_the_request_was_not_sent_whole() -> None:
    """A reset before the body went out is a refusal; after it (or a timeout) it is not."""
    unsent = TransportError("reset", url="u", reason="connect", unsent=True)
    sent = TransportError("reset", url="u", reason="connect")
    timeout = TransportError("late", url="u", reason="timeout")
    assert [True, False, False] == [refusal(e) is not None for e in (unsent, sent, timeout)]


def test_an_http_date_is_read_against_the_last_event_time() -> None:
    """A date 90 s after the run's last event asks for 90 s; a past date for none."""
    now = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
    assert 90.0 == retry_after_seconds("Thu, 01 Jan 2026 12:01:30 GMT", now)
    assert 0.0 == retry_after_seconds("Thu, 01 Jan 2026 11:00:00 GMT", now)
    assert None is retry_after_seconds("Thu, 01 Jan 2026 12:01:30 GMT", None)


def test_the_jitter_spreads_the_backoff_between_half_and_all_of_it() -> None:
    """Jitter 0 waits half the backoff, jitter near 1 nearly all of it."""
    error = TransportError("x", url="u", reason="status", status=503)
    found = refusal(error)
    assert found is not None
    limits = RetryLimits(base_seconds=4)
    assert [2.0, 3.998] == [next_wait(limits, error, found, 1, 0.0, None, j) for j in (0, 0.999)]


def test_seeded_jitter_does_not_move_the_call_ids() -> None:
    """Drawing jitters leaves a seed's call ids the same sequence."""
    plain, drawn = SeededIds(3), SeededIds(3)
    drawn.jitter()
    assert [plain.call_id() for _ in range(3)] == [drawn.call_id() for _ in range(3)]
