"""Behavioural comparison: two runs compared by what the agent did, not by their bytes."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from twinflow.agent import Agent, FunctionModel, Policy, Trace
from twinflow.agent._events import Environment
from twinflow.kernel import CountingIds, SteppingClock, TransportError
from twinflow.trace import MemoryTraceSink
from twinflow.views._behaviour import behaviour_of, compare_behaviour
from twinflow.vocab import CallId, JsonValue, Message, ModelRequest, ModelSettings, ToolCallPart


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


def test_two_runs_failing_alike_behave_the_same() -> None:
    """Two runs over max_steps, differing only in ids and clocks: their failure messages name
    their own run ids, and still no divergence."""
    failed = []
    for start, prefix in ((1, "x"), (2, "y")):
        sink = MemoryTraceSink()
        agent: Agent[Any] = Agent(
            FunctionModel(scripted(3, prefix)),
            clock=SteppingClock(datetime(2026, 1, start, tzinfo=UTC)),
            ids=CountingIds(prefix),
            tools=[add],
            policy=Policy(allow=frozenset({"add"})),
            trace=sink,
            max_steps=1,
        )
        with pytest.raises(Exception, match="max_steps=1"):
            agent.run("add 2 and 3")
        failed.append([json.loads(data) for data in Trace.load(sink.data).encoded])
    expected: tuple[object, ...] = ()
    assert expected == compare_behaviour(*failed)


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


def test_an_extra_tool_call_is_reported_at_its_step_and_the_ending_compared() -> None:
    """B calls the tool once more: its step 2 reply differs and its call is extra, its step 3
    is extra, and the two answers are compared with each other (not shifted by a step)."""
    divergences = compare_behaviour(run(calls=1), run(calls=2))
    expected = [
        ("changed", "model_responded", 2, 7, 7),
        ("extra", "policy_decided", 2, None, 8),
        ("extra", "tool_called", 2, None, 9),
        ("extra", "tool_returned", 2, None, 10),
        ("extra", "model_requested", 3, None, 11),
        ("extra", "model_responded", 3, None, 12),
        ("changed", "output_accepted", 2, 8, 13),
        ("changed", "run_finished", 2, 9, 14),
    ]
    assert expected == [(d.change, d.kind, d.step, d.seq_a, d.seq_b) for d in divergences]


def agent_on(
    sink: MemoryTraceSink | Path,
    reply: Callable[[ModelRequest], Message],
    *,
    tool: Callable[..., Any] = add,
    **config: Any,
) -> Agent[Any]:
    """An agent on deterministic ports, writing to ``sink``."""
    return Agent(
        FunctionModel(reply),
        clock=SteppingClock(datetime(2026, 1, 1, tzinfo=UTC)),
        ids=CountingIds(),
        tools=[tool],
        policy=Policy(allow=frozenset({"add"})),
        trace=sink,
        max_steps=5,
        **config,
    )


def events_of(path: Path) -> list[JsonValue]:
    """A trace file's events as JSON values."""
    return [json.loads(data) for data in Trace.load(path).encoded]


def failing_once(reply: Callable[[ModelRequest], Message], at: int) -> Callable[..., Message]:
    """``reply``, but the ``at``-th request fails to connect (once)."""
    count = [0]

    def once(request: ModelRequest) -> Message:
        count[0] += 1
        if count[0] == at:
            raise TransportError("connection refused", reason="connect", url="http://127.0.0.1:9/")
        return reply(request)

    return once


def resumed(tmp_path: Path, calls: int = 2) -> Path:
    """A run whose second request failed to connect, then resumed to its end."""
    path = tmp_path / "resumed.jsonl"
    failing = agent_on(path, failing_once(scripted(calls, "x"), 2))
    with failing, pytest.raises(TransportError):
        failing.run("add 2 and 3")
    with agent_on(MemoryTraceSink(), scripted(calls, "x")) as agent:
        agent.resume(path)
    return path


def test_a_resumed_run_behaves_as_one_that_never_stopped(tmp_path: Path) -> None:
    """The failure a resume went on past and its run_resumed are not behaviour."""
    whole = tmp_path / "whole.jsonl"
    with agent_on(whole, scripted(2, "x")) as agent:
        agent.run("add 2 and 3")
    assert "run_resumed" in Trace.load(resumed(tmp_path)).kinds
    assert () == compare_behaviour(events_of(whole), events_of(tmp_path / "resumed.jsonl"))


def test_where_a_run_ran_is_not_behaviour() -> None:
    """Runs with other imported distributions and another server URL behave the same."""
    here = Environment(
        python="3.11",
        implementation="CPython",
        platform="linux",
        distributions={"httpx": "0.27"},
        model="openai http://127.0.0.1:8080/v1 m",
    )
    there = here.model_copy(
        update={"distributions": {"httpx": "0.28", "rich": "13"},
                "model": "openai http://10.0.0.2:8000/v1 m"}
    )  # fmt: skip
    traces = []
    for environment in (here, there):
        sink = MemoryTraceSink()
        with agent_on(sink, scripted(1, "x"), environment=environment) as agent:
            agent.run("add 2 and 3")
        traces.append([json.loads(data) for data in Trace.load(sink.data).encoded])
    assert () == compare_behaviour(*traces)


def test_a_forks_configuration_change_is_named_once_at_the_fork_step(tmp_path: Path) -> None:
    """A fork at step 2 with other settings: one divergence, at step 2, naming the change."""
    parent = tmp_path / "parent.jsonl"
    with agent_on(parent, scripted(2, "x")) as agent:
        agent.run("add 2 and 3")
    child = tmp_path / "child.jsonl"
    hotter = ModelSettings(temperature=0.7)
    with agent_on(child, scripted(2, "x"), settings=hotter) as agent:
        agent.fork(parent, at_step=2)
    divergences = compare_behaviour(events_of(parent), events_of(child))
    assert [("run_started", 2)] == [(d.kind, d.step) for d in divergences]
    assert divergences[0].detail.startswith("the fork changed the configuration: run_started:")


def test_a_fork_of_a_resumed_parent_diverges_where_it_forked(tmp_path: Path) -> None:
    """A parent resumed at step 2, forked at step 3 with a changed tool: the first divergence
    is step 3's tool result, and the parent's resume marks are not reported."""
    parent = resumed(tmp_path, calls=3)
    child = tmp_path / "child.jsonl"
    with agent_on(child, scripted(3, "x"), tool=changed_add()) as agent:
        agent.fork(parent, at_step=3)
    divergences = compare_behaviour(events_of(parent), events_of(child))
    assert ("tool_returned", 3) == (divergences[0].kind, divergences[0].step)
    assert set() == {d.kind for d in divergences} & {"run_resumed", "run_failed"}


def test_conversations_are_compared_turn_by_turn() -> None:
    """Two conversations whose second turn differs: every divergence is in turn 2."""
    traces = []
    for second in ("again", "something else"):
        sink = MemoryTraceSink()
        with agent_on(sink, scripted(1, "x")) as agent:
            first = agent.run("add 2 and 3")
            agent.run(second, continue_from=first)
        traces.append([json.loads(data) for data in Trace.load(sink.data).encoded])
    divergences = compare_behaviour(*traces)
    assert [(2, "user_turn"), (2, "model_requested")] == [(d.turn, d.kind) for d in divergences]
