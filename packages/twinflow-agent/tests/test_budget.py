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
from pydantic import ValidationError

from twinflow.agent import Agent, FunctionModel, Policy, RunError, Trace, UsageLimits, replay
from twinflow.agent._spec import BudgetSpec, RunSpec
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


PRICED_AS = "openai-compatible:gpt-4o-mini@http://127.0.0.1:9"
"""A label the shipped table prices (0.15 and 0.6 US dollars per million tokens)."""


def priced(limits: UsageLimits, trace: Any = None, **ports: Any) -> Agent[str]:
    """`agent`, its replies charged as gpt-4o-mini (as a spec's agent is, by its model)."""
    runner = agent(limits, trace, **ports)
    runner._priced_as = PRICED_AS
    return runner


def bodies(sink: MemoryTraceSink, kind: str) -> list[dict[str, Any]]:
    """The bodies of one kind of event in a trace."""
    found = [json.loads(line)["event"]["body"] for line in sink.data.splitlines()]
    return [body for body in found if body["kind"] == kind]


def test_each_reply_records_its_cost_and_the_price_used() -> None:
    """10 input and 5 output tokens at 0.15 and 0.6 a million: 4.5e-06 dollars, price beside."""
    sink = MemoryTraceSink()
    with pytest.raises(RunError):
        priced(UsageLimits(requests=1), trace=sink).run("go")
    cost = bodies(sink, "model_responded")[0]["cost"]
    expected = {"usd": 4.5e-06, "model": "gpt-4o-mini", "input_per_mtok": 0.15}
    assert expected == {k: cost[k] for k in expected}
    assert 0.6 == cost["output_per_mtok"]
    assert cost["table"].startswith("genai-prices ")


def test_a_cost_budget_ends_the_run_at_the_reply_that_crosses_it() -> None:
    """Three replies (13.5e-06 dollars) cross a 1e-05 budget: budget_exceeded names cost_usd."""
    sink = MemoryTraceSink()
    with pytest.raises(RunError, match="cost_usd reached"):
        priced(UsageLimits(cost_usd=1e-05), trace=sink).run("go")
    expected = [{"kind": "budget_exceeded", "budget": "cost_usd", "used": 1.35e-05, "limit": 1e-05}]
    assert expected == bodies(sink, "budget_exceeded")
    assert 3 == len(bodies(sink, "model_responded"))


def test_a_reply_of_an_unpriced_model_records_no_cost() -> None:
    """An unknown price: the reply's event has no cost (absent, so its bytes are as before)."""
    sink = MemoryTraceSink()
    with pytest.raises(RunError):
        agent(UsageLimits(requests=1), trace=sink).run("go")
    assert "cost" not in bodies(sink, "model_responded")[0]


def test_a_cost_limit_on_an_unpriced_model_ends_the_run_at_its_first_reply() -> None:
    """From Python, a cost limit whose model has no price ends the run: it cannot be kept."""
    sink = MemoryTraceSink()
    with pytest.raises(RunError, match="has no price in the price table") as caught:
        agent(UsageLimits(cost_usd=1.0), trace=sink).run("go")
    assert ("usage_limit", 1) == (caught.value.reason, len(bodies(sink, "model_responded")))


def test_a_replay_charges_the_recorded_price_not_a_newer_table(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A table that changed after the run: the replay still matches the record byte for byte."""
    sink = MemoryTraceSink()
    with pytest.raises(RunError):
        priced(UsageLimits(cost_usd=1e-05), trace=sink).run("go")
    monkeypatch.setattr("twinflow.models._providers.PROVIDERS.price", lambda label: None)

    def build(ports: Any) -> Agent[str]:
        runner = replaying_agent(
            ports,
            tools=[add],
            policy=Policy(allow=frozenset({"add"})),
            max_steps=50,
            usage_limits=UsageLimits(cost_usd=1e-05),
        )
        runner._priced_as = PRICED_AS
        return runner

    result = replay(Trace.load(sink.data), build)
    assert Trace.load(sink.data).size == result.events


def test_a_cost_budget_on_a_model_without_a_price_is_refused_when_read() -> None:
    """budget.cost_usd for an unpriced model (or fallback) is refused before any request."""
    base = {"prompt": "hi", "budget": {"cost_usd": 1.0}}
    for model in (
        {"url": "http://127.0.0.1:9", "name": "local"},
        "ollama:qwen2.5:0.5b",
        ["openai:gpt-4o-mini", "vllm:mine@http://127.0.0.1:9"],
    ):
        with pytest.raises(ValidationError, match=r"budget\.cost_usd: no price for") as caught:
            RunSpec.model_validate({**base, "model": model})
        assert "remove the cost_usd budget, or bound tokens instead" in str(caught.value)


def test_a_cost_budget_on_a_priced_model_is_kept() -> None:
    """budget.cost_usd for a model the table prices maps onto the cost limit."""
    spec = RunSpec.model_validate(
        {"prompt": "hi", "model": "openai:gpt-4o-mini", "budget": {"cost_usd": 0.5}}
    )
    assert spec.budget is not None
    assert UsageLimits(cost_usd=0.5) == spec.budget.limits()
