"""One failure path: replies the loop cannot act on are refused before any tool runs, and recorded."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from twinflow.agent import (
    Agent,
    FunctionModel,
    OutputRejected,
    Policy,
    RunError,
    RunFailed,
    Trace,
    replay,
)
from twinflow.agent._replay import ReplayPorts
from twinflow.kernel import CountingIds, SteppingClock
from twinflow.trace import MemoryTraceSink
from twinflow.vocab import (
    Attempt,
    CallId,
    ChatModel,
    Message,
    ModelRequest,
    StructuredOutputError,
    ToolCallPart,
)

START = datetime(2026, 1, 1, tzinfo=UTC)
RAN: list[int] = []


def add(a: int, b: int) -> int:
    """Add two integers."""
    RAN.append(a + b)
    return a + b


def agent(model: ChatModel, ports: ReplayPorts | None = None) -> Agent[str]:
    """An agent allowed to call `add`, on deterministic (or replaying) ports."""
    return Agent(
        ports.model if ports else model,
        clock=ports.clock if ports else SteppingClock(START, timedelta(milliseconds=1)),
        ids=ports.ids if ports else CountingIds(),
        tools=[add],
        policy=Policy(allow=frozenset({"add"})),
        trace=ports.trace if ports else MemoryTraceSink(),
        model_label=ports.model_label if ports else None,
        tool_results=ports.tool_results if ports else None,
    )


def call(call_id: str) -> ToolCallPart:
    return ToolCallPart(id=CallId(call_id), name="add", arguments={"a": 2, "b": 3})


@pytest.mark.parametrize(
    ("replies", "ran"),
    [
        # The second step reuses the first step's id: its tool never runs.
        ([(call("c1"),), (call("c1"),)], 1),
        # Two calls with one id in a single reply: neither runs.
        ([(call("c1"), call("c1"))], 0),
    ],
)
def test_a_repeated_tool_call_id_is_refused_before_any_tool_runs(
    replies: list[tuple[ToolCallPart, ...]], ran: int
) -> None:
    """The run fails with a RunError (reason invalid_reply) and the reply's tools did not run."""
    RAN.clear()
    script = iter(replies)
    model = FunctionModel(lambda _r: Message(role="assistant", parts=next(script)))
    with pytest.raises(RunError) as caught:
        agent(model).run("add")
    assert "invalid_reply" == caught.value.reason
    assert "'c1', an id already used" in str(caught.value)
    assert ran == len(RAN)


class Refusing:
    """A model whose every reply was refused (as structured-action mode reports it)."""

    def request(self, request: ModelRequest) -> Message:
        attempts = tuple(
            Attempt(number=n, emission=f"[[[ reply {n}", error=f"(root): bad reply {n}")
            for n in (1, 2, 3)
        )
        raise StructuredOutputError(
            "no reply was a valid action; Inspect .attempts", attempts=attempts
        )


def test_a_model_with_no_valid_action_fails_the_run_with_every_reply_recorded() -> None:
    """Each raw reply is an output_rejected event; the run fails with a RunError in plain terms."""
    subject = agent(Refusing())  # type: ignore[arg-type]  # raises before returning anything
    with pytest.raises(RunError) as caught:
        subject.run("add")
    assert "invalid_reply" == caught.value.reason
    sink = subject.writer.sink
    assert isinstance(sink, MemoryTraceSink)
    trace = Trace.load(sink.data)
    rejected = [e.body for e in trace.events if isinstance(e.body, OutputRejected)]
    assert ["[[[ reply 1", "[[[ reply 2", "[[[ reply 3"] == [r.emission for r in rejected]
    failed = trace.events[-1].body
    assert isinstance(failed, RunFailed)
    assert ("InvalidModelReply", 3) == (failed.error_type, len(caught.value.attempts))
    assert ".attempts" not in str(caught.value)
    assert "output_rejected" in str(caught.value)

    result = replay(trace, lambda ports: agent(Refusing(), ports), mode="recorded")  # type: ignore[arg-type]  # raises before returning anything
    assert trace.size == result.events
