"""Behavioural comparison: two runs compared by what the agent did, not by their bytes."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from twinflow.agent import Agent, FunctionModel, Policy, Trace
from twinflow.kernel import CountingIds, SteppingClock
from twinflow.trace import MemoryTraceSink
from twinflow.views import compare_behaviour
from twinflow.views._behaviour import behaviour_of
from twinflow.vocab import CallId, JsonValue, Message, ModelRequest, ToolCallPart


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def changed_add() -> Callable[..., int]:
    """A tool with the same name, signature and docstring as `add`, whose code changed."""

    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b + 1

    return add


def scripted(calls: int, prefix: str) -> Callable[[ModelRequest], Message]:
    """A model that calls `add` ``calls`` times (ids starting with ``prefix``), then answers."""

    def reply(request: ModelRequest) -> Message:
        results = [m for m in request.transcript.messages if m.role == "tool"]
        if len(results) < calls:
            call = ToolCallPart(
                id=CallId(f"{prefix}{len(results)}"), name="add", arguments={"a": 2, "b": 3}
            )
            return Message(role="assistant", parts=(call,))
        return Message.assistant(f"done after {len(results)} calls")

    return reply


def run(
    *,
    start: int = 1,
    prefix: str = "x",
    calls: int = 1,
    tool: Callable[..., Any] = add,
) -> list[JsonValue]:
    """One run's events as JSON values; ``start``/``prefix`` vary the clock and every id."""
    sink = MemoryTraceSink()
    agent: Agent[Any] = Agent(
        FunctionModel(scripted(calls, prefix)),
        clock=SteppingClock(datetime(2026, 1, start, tzinfo=UTC)),
        ids=CountingIds(prefix),
        tools=[tool],
        policy=Policy(allow=frozenset({"add"})),
        trace=sink,
        max_steps=5,
    )
    agent.run("add 2 and 3")
    return [json.loads(data) for data in Trace.load(sink.data).encoded]


def test_two_runs_of_the_same_agent_behave_the_same() -> None:
    """Runs differing only in clock readings, run id and call ids show no divergence."""
    a, b = run(start=1, prefix="x"), run(start=2, prefix="y")
    assert a != b  # the bytes differ from the first event on
    expected: tuple[object, ...] = ()
    assert expected == compare_behaviour(a, b)


def test_call_ids_are_renamed_in_order_of_first_mention() -> None:
    """A call id becomes call-N wherever it appears, so results still answer the same call."""
    views = behaviour_of(run(prefix="zz"))
    text = json.dumps(views)
    assert ("zz0" in text, '"call-1"' in text) == (False, True)


def test_a_changed_tool_result_is_reported_at_its_step() -> None:
    """A tool returning another value diverges at tool_returned in step 1, and again later."""
    divergences = compare_behaviour(run(), run(tool=changed_add()))
    first = divergences[0]
    assert ("changed", "tool_returned", 1, "/result/content") == (
        first.change,
        first.kind,
        first.step,
        first.pointer,
    )
    # The model then sees another result: every later consequence is listed too.
    assert 1 < len(divergences)
    assert ["changed"] * len(divergences) == [d.change for d in divergences]


def test_an_extra_tool_call_is_one_block_not_a_cascade() -> None:
    """B calls the tool once more: the extra events are reported as extra, then the answer."""
    divergences = compare_behaviour(run(calls=1), run(calls=2))
    expected = [
        ("extra", "model_responded", 2, None, 7),
        ("extra", "policy_decided", 2, None, 8),
        ("extra", "tool_called", 2, None, 9),
        ("extra", "tool_returned", 2, None, 10),
        ("extra", "model_requested", 3, None, 11),
        ("changed", "model_responded", 2, 7, 12),
        ("changed", "output_accepted", 2, 8, 13),
        ("changed", "run_finished", 2, 9, 14),
    ]
    assert expected == [(d.change, d.kind, d.step, d.seq_a, d.seq_b) for d in divergences]
