"""Real agent traces for the benchmarks that read traces: written by the agent loop itself.

A scripted model makes one tool call per step (``add(a, b)``) and answers after the last one;
the run writes its trace through `FileTraceSink` (no fsync: the benchmarks measure reading).
Each step writes five events (``model_requested``, ``model_responded``, ``policy_decided``,
``tool_called``, ``tool_returned``), about 450 bytes each, so the trace has what a real run's
has: messages, digests, tool results, arguments. The clock steps and the ids count, so the same
``steps`` give the same bytes every time.

Not a benchmark itself (the leading underscore keeps `run_all.py` from running it).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from twinflow.agent import Agent, FunctionModel, Policy
from twinflow.kernel import CountingIds, SteppingClock
from twinflow.trace import FileTraceSink
from twinflow.vocab import CallId, Message, ModelRequest, TextPart, ToolCallPart

EVENTS_PER_STEP = 5
"""Events one tool step writes (`steps_for` turns an event count into steps)."""


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def steps_for(events: int) -> int:
    """The steps whose trace holds about ``events`` events (three more: start, answer, end)."""
    return max(1, (events - 3) // EVENTS_PER_STEP)


def write_agent_trace(path: Path, steps: int, *, answer: str = "done") -> int:
    """Run the scripted agent for ``steps`` tool steps, writing its trace to ``path``.

    Args:
        path: A new file for the trace.
        steps: Tool steps before the answer.
        answer: The final answer (two traces that differ only there differ in their last
            events).

    Returns:
        The number of events written.
    """
    count = 0

    def handler(request: ModelRequest) -> Message:
        nonlocal count
        count += 1
        if count <= steps:
            call = ToolCallPart(id=CallId(f"c{count}"), name="add", arguments={"a": count, "b": 1})
            return Message(role="assistant", parts=(call,))
        return Message(role="assistant", parts=(TextPart(text=answer),))

    agent = Agent(
        FunctionModel(handler),
        clock=SteppingClock(datetime(2026, 1, 1, tzinfo=UTC)),
        ids=CountingIds(),
        tools=[add],
        policy=Policy(allow=frozenset({"add"})),
        max_steps=steps + 1,
        trace=FileTraceSink(path),
        fsync="none",
    )
    agent.run("add numbers")
    agent.writer.close()
    with path.open("rb") as f:
        return sum(1 for _ in f)
