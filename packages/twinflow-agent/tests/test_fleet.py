"""Many runs at once: `Agent.run_async` gives the trace `run` gives, for each of many runs."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest
from pydantic import BaseModel

from twinflow.agent import Agent, AgentConfigError, FunctionModel, Policy, Tool
from twinflow.kernel import CountingIds, SteppingClock
from twinflow.trace import MemoryTraceSink
from twinflow.vocab import CallId, Message, ModelRequest, OutputSchema, TextPart, ToolCallPart

START = datetime(2026, 1, 1, tzinfo=UTC)


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def adds(request: ModelRequest) -> Message:
    """Call ``add`` three times, then answer with the last result."""
    results = [m for m in request.transcript.messages if m.role == "tool"]
    if len(results) < 3:
        call = ToolCallPart(id=CallId(f"c{len(results)}"), name="add", arguments={"a": 1, "b": 2})
        return Message(role="assistant", parts=(call,))
    return Message(role="assistant", parts=(TextPart(text=results[-1].tool_results[0].content),))


def agent(sink: MemoryTraceSink) -> Agent[str]:
    """An agent on deterministic ports writing to ``sink``."""
    return Agent(
        FunctionModel(adds),
        clock=SteppingClock(START),
        ids=CountingIds(),
        tools=[add],
        policy=Policy(allow=frozenset({"add"})),
        trace=sink,
    )


def test_run_async_writes_the_bytes_run_writes() -> None:
    """The async run's trace is the sync run's, byte for byte."""
    sync, awaited = MemoryTraceSink(), MemoryTraceSink()
    agent(sync).run("go")
    asyncio.run(agent(awaited).run_async("go"))
    assert sync.data == awaited.data


def test_hundreds_of_runs_at_once_each_write_their_own_trace() -> None:
    """Two hundred runs gathered at once each write the trace one run alone writes."""
    alone = MemoryTraceSink()
    agent(alone).run("go")
    sinks = [MemoryTraceSink() for _ in range(200)]

    async def fleet() -> list[str]:
        results = await asyncio.gather(*(agent(s).run_async("go") for s in sinks))
        return [r.output for r in results]

    outputs = asyncio.run(fleet())
    assert (["3"] * 200, [alone.data] * 200) == (outputs, [s.data for s in sinks])


def test_a_second_run_on_an_agent_in_flight_is_refused() -> None:
    """One agent holds one run at a time: a concurrent second run is a usage error."""
    one = agent(MemoryTraceSink())

    async def both() -> None:
        await asyncio.gather(one.run_async("a"), one.run_async("b"))

    with pytest.raises(AgentConfigError, match="has a run in flight"):
        asyncio.run(both())


def test_a_fleet_given_one_function_builds_its_tool_once() -> None:
    """Agents given the same function share the tool `Tool.from_function` builds from it."""
    first, second = agent(MemoryTraceSink()), agent(MemoryTraceSink())
    built = Tool.from_function(add)
    assert (built.spec, True) == (
        first.tools["add"].spec,
        first.tools["add"] is second.tools["add"],
    )


def test_a_method_is_built_into_a_tool_of_its_own_object() -> None:
    """A callable that is not a plain function (a bound method) is not shared: each agent's
    tool calls its own object's method."""

    class Calculator:
        def add(self, a: int, b: int) -> int:
            """Add two integers."""
            return a + b

    one, two = Calculator(), Calculator()
    tools = [Agent(FunctionModel(adds), tools=[c.add]).tools["add"] for c in (one, two)]
    assert ([one.add, two.add], False) == ([t.function for t in tools], tools[0] is tools[1])


class Sum(BaseModel):
    """The answer of a structured agent."""

    total: int


def test_a_fleet_given_one_output_type_builds_its_schema_once() -> None:
    """Agents answering with the same model class share the schema built from it."""
    first, second = (
        Agent(FunctionModel(adds), output_type=Sum).config.output_schema for _ in range(2)
    )
    assert (OutputSchema.for_model(Sum), True) == (first, first is second)
