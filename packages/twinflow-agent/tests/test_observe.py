"""Watching a run (events and streamed chunks) and steering it between steps, replay included."""

from __future__ import annotations

import queue
from datetime import UTC, datetime, timedelta

import pytest

from twinflow.agent import (
    Agent,
    AgentConfigError,
    FunctionModel,
    ModelRequested,
    ModelResponded,
    Policy,
    Steering,
    SteeringReceived,
    Trace,
    replay,
    verify_agent_trace,
)
from twinflow.agent._replay import ReplayPorts
from twinflow.kernel import CountingIds, ReplayDivergenceError, SteppingClock
from twinflow.trace import MemoryTraceSink
from twinflow.vocab import CallId, Message, ModelRequest, TextDelta, ToolCallPart
from twinflow.vocab._envelope import envelope

START = datetime(2026, 1, 1, tzinfo=UTC)


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def script(request: ModelRequest) -> Message:
    """Call `add` once, then answer in text that quotes the last user turn."""
    if not any(m.role == "tool" for m in request.transcript.messages):
        call = ToolCallPart(id=CallId("c0"), name="add", arguments={"a": 2, "b": 3})
        return Message(role="assistant", parts=(Message.assistant("adding").parts[0], call))
    last_user = [m for m in request.transcript.messages if m.role == "user"][-1]
    return Message.assistant(f"The sum is 5. Last user turn: {last_user.text}")


def agent(
    *, observer: object = None, steering: Steering | None = None, ports: ReplayPorts | None = None
) -> Agent[str]:
    """The scripted agent, with fresh deterministic ports or with replaying ones."""
    if ports is not None:
        return Agent(
            ports.model,
            clock=ports.clock,
            ids=ports.ids,
            tools=[add],
            policy=Policy(allow=frozenset({"add"})),
            trace=ports.trace,
            model_label=ports.model_label,
            tool_results=ports.tool_results,
            steering=steering,
        )
    return Agent(
        FunctionModel(script, chunk_size=3),
        clock=SteppingClock(START, timedelta(milliseconds=5)),
        ids=CountingIds(),
        tools=[add],
        policy=Policy(allow=frozenset({"add"})),
        trace=MemoryTraceSink(),
        observer=observer,  # type: ignore[arg-type]  # None or a list's append
        steering=steering,
    )


def trace_bytes(subject: Agent[str]) -> bytes:
    """What the agent's in-memory sink holds."""
    sink = subject.writer.sink
    assert isinstance(sink, MemoryTraceSink)
    return bytes(sink.data)


def test_a_streamed_run_writes_the_trace_of_the_non_streamed_run() -> None:
    """Observed (so streamed) and unobserved runs of the same replies give byte-equal traces."""
    seen: list[object] = []
    plain, streamed = agent(), agent(observer=seen.append)
    plain.run("add 2 and 3")
    streamed.run("add 2 and 3")
    assert trace_bytes(plain) == trace_bytes(streamed)
    assert any(isinstance(item, TextDelta) for item in seen)
    report = verify_agent_trace(trace_bytes(streamed))
    assert report.ok
    result = replay(Trace.load(trace_bytes(streamed)), lambda ports: agent(ports=ports))
    assert len(Trace.load(trace_bytes(streamed)).events) == result.events


def test_the_observer_sees_text_deltas_before_the_reply_is_recorded() -> None:
    """Chunks of a reply arrive before its model_responded event, and join to its text."""
    seen: list[object] = []
    agent(observer=seen.append).run("add 2 and 3")
    last = max(i for i, item in enumerate(seen) if isinstance(item, ModelResponded))
    reply = seen[last]
    assert isinstance(reply, ModelResponded)
    previous = max(i for i, item in enumerate(seen[:last]) if isinstance(item, ModelRequested))
    deltas = [item.text for item in seen[previous:last] if isinstance(item, TextDelta)]
    assert reply.response.message.text == "".join(deltas)
    assert len(deltas) > 1


def test_steering_from_a_queue_and_a_callback_is_recorded_and_sent_as_an_envelope() -> None:
    """Queued steering joins step 1, a callback's joins step 2; both are events and user turns."""
    waiting: queue.Queue[str] = queue.Queue()
    waiting.put("be brief")
    queued = agent(steering=waiting)
    result = queued.run("add 2 and 3")
    assert envelope("steering", "be brief") in result.transcript.messages
    events = Trace.load(trace_bytes(queued)).events
    expected = [SteeringReceived(step=1, text="be brief")]
    assert expected == [e.body for e in events if isinstance(e.body, SteeringReceived)]

    called = agent(steering=lambda step: ["now answer"] if step == 2 else [])
    result = called.run("add 2 and 3")
    assert result.output.endswith(envelope("steering", "now answer").text)
    events = Trace.load(trace_bytes(called)).events
    expected = [SteeringReceived(step=2, text="now answer")]
    assert expected == [e.body for e in events if isinstance(e.body, SteeringReceived)]


def test_a_steered_run_replays_with_its_recorded_steering_and_diverges_without() -> None:
    """Replay feeds the recorded steering back; an agent built without it diverges at that event."""
    steered = agent(steering=lambda step: ["now answer"] if step == 2 else [])
    steered.run("add 2 and 3")
    trace = Trace.load(trace_bytes(steered))
    result = replay(trace, lambda ports: agent(ports=ports, steering=ports.steering))
    assert len(trace.events) == result.events
    with pytest.raises(ReplayDivergenceError) as caught:
        replay(trace, lambda ports: agent(ports=ports))
    assert "steering_received" in str(caught.value)


@pytest.mark.parametrize("bad", ["", "  ", 7])
def test_a_steering_message_that_is_not_text_fails_the_run(bad: object) -> None:
    """Empty or non-text steering is refused by name, not sent to the model."""
    with pytest.raises(AgentConfigError) as caught:
        agent(steering=lambda step: [bad]).run("add 2 and 3")  # type: ignore[list-item]  # not text on purpose: the run must refuse it
    assert "steering message before step 1" in str(caught.value)
