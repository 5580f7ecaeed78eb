"""A run's budget: crossing a limit is a ``budget_exceeded`` event, then a typed end of the run.

The model calls `add` at every step and each reply uses 10 input and 5 output tokens; the clock
steps a second per reading, so wall time is exact and a replay reads the same.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from agent_testkit import replaying_agent

from twinflow.agent import Agent, FunctionModel, Policy, RunError, Trace, UsageLimits, replay
from twinflow.agent._spec import BudgetSpec
from twinflow.kernel import CountingIds, SteppingClock
from twinflow.trace import MemoryTraceSink
from twinflow.vocab import (
    CallId,
    Message,
    ModelRequest,
    ModelResponse,
    ToolCallPart,
    Usage,
)

START = datetime(2026, 1, 1, tzinfo=UTC)


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def adding(request: ModelRequest) -> ModelResponse:
    """Call `add` again, at every step."""
    call = ToolCallPart(
        id=CallId(f"c{len(request.transcript)}"), name="add", arguments={"a": 1, "b": 2}
    )
    return ModelResponse(
        message=Message(role="assistant", parts=(call,)),
        usage=Usage(input_tokens=10, output_tokens=5),
        finish_reason="tool_calls",
    )


def agent(limits: UsageLimits, trace: Any = None, model: Any = None, **ports: Any) -> Agent[str]:
    """An agent calling `add` for up to 50 steps under ``limits``."""
    return Agent(
        model or FunctionModel(adding),
        clock=ports.pop("clock", SteppingClock(START, timedelta(seconds=1))),
        ids=ports.pop("ids", CountingIds()),
        tools=[add],
        policy=Policy(allow=frozenset({"add"})),
        max_steps=50,
        usage_limits=limits,
        trace=trace if trace is not None else MemoryTraceSink(),
        **ports,
    )


def ended(limits: UsageLimits) -> tuple[dict[str, Any], dict[str, Any], RunError]:
    """The budget_exceeded and run_failed bodies of a run under ``limits``, and its error."""
    runner = agent(limits)
    with pytest.raises(RunError) as caught:
        runner.run("go")
    lines = runner.writer.sink.data.splitlines()
    last_two = [json.loads(line)["event"]["body"] for line in lines[-2:]]
    return last_two[0], last_two[1], caught.value


@pytest.mark.parametrize(
    ("limits", "budget", "used", "limit"),
    [
        (UsageLimits(total_tokens=40), "total_tokens", 45, 40),
        (UsageLimits(input_tokens=25), "input_tokens", 30, 25),
        (UsageLimits(output_tokens=9), "output_tokens", 10, 9),
        (UsageLimits(requests=3), "requests", 4, 3),
        (UsageLimits(tool_calls=2), "tool_calls", 3, 2),
    ],
)
def test_crossing_a_budget_is_recorded_then_ends_the_run(
    limits: UsageLimits, budget: str, used: int, limit: int
) -> None:
    """Each budget: a budget_exceeded naming it, then run_failed, the error naming it too."""
    decided, failed, error = ended(limits)
    expected = {"kind": "budget_exceeded", "budget": budget, "used": used, "limit": limit}
    assert expected == decided
    assert ("run_failed", "UsageLimitExceeded") == (failed["kind"], failed["error_type"])
    assert "usage_limit" == error.reason
    assert f"{budget} reached {used}, over the limit of {limit} (budget_exceeded)" in str(error)


def test_wall_time_is_read_from_the_clock_port() -> None:
    """A stepping clock of 1 s a reading: the run ends once 10 s have passed since its start."""
    decided, _, _ = ended(UsageLimits(wall_seconds=10))
    assert ("wall_seconds", 10) == (decided["budget"], decided["limit"])
    assert 10 < decided["used"] <= 14


def test_a_budgeted_run_replays_event_for_event() -> None:
    """The replay crosses the same budget at the same event."""
    sink = MemoryTraceSink()
    with pytest.raises(RunError):
        agent(UsageLimits(wall_seconds=10, tool_calls=20), trace=sink).run("go")
    result = replay(
        Trace.load(sink.data),
        lambda ports: replaying_agent(
            ports,
            tools=[add],
            policy=Policy(allow=frozenset({"add"})),
            max_steps=50,
            usage_limits=UsageLimits(wall_seconds=10, tool_calls=20),
        ),
    )
    assert Trace.load(sink.data).size == result.events


def test_limits_set_before_the_new_ones_record_as_before() -> None:
    """Without tool_calls or wall_seconds, run_started records the four limits it always did."""
    assert ["requests", "input_tokens", "output_tokens", "total_tokens"] == list(
        UsageLimits(requests=2).record()
    )


def test_the_spec_budget_maps_onto_the_limits() -> None:
    """budget.tokens is total_tokens; the others keep their names."""
    budget = BudgetSpec(tokens=100, requests=5, tool_calls=3, wall_seconds=60)
    expected = UsageLimits(total_tokens=100, requests=5, tool_calls=3, wall_seconds=60)
    assert expected == budget.limits()


def test_a_cost_budget_is_refused_while_no_price_is_known() -> None:
    """budget.cost_usd is refused when the spec is read, before any request."""
    with pytest.raises(Exception, match="no price for any model yet"):
        BudgetSpec(cost_usd=1.0)
