"""Conversations: a run takes further user turns, each a ``user_turn`` and its steps, one chain."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from agent_testkit import crashed_at, replaying_agent

from twinflow.agent import (
    Agent,
    AgentConfigError,
    CannotResume,
    FunctionModel,
    Policy,
    RunError,
    Trace,
    UsageLimits,
    replay,
)
from twinflow.agent._replay import ReplayPorts
from twinflow.kernel import CountingIds, SteppingClock
from twinflow.trace import verify_trace
from twinflow.vocab import CallId, Message, ModelRequest, ToolCallPart

START = datetime(2026, 1, 1, tzinfo=UTC)


class Chat:
    """A model that answers each user message; a message starting ``add`` first calls `add`.

    It counts the model requests and tool executions of one process, as a crash test must.
    """

    def __init__(self) -> None:
        self.requests = 0
        self.tools = 0

    def add(self, a: int, b: int) -> int:
        """Add two integers."""
        self.tools += 1
        return a + b

    def script(self, request: ModelRequest) -> Message:
        """Answer the last user message, after one `add` call if it asks for one."""
        self.requests += 1
        messages = request.transcript.messages
        users = [i for i, m in enumerate(messages) if m.role == "user"]
        last = users[-1]
        text = messages[last].text
        results = [m for m in messages[last:] if m.role == "tool"]
        if text.startswith("add") and not results:
            call = ToolCallPart(
                id=CallId(f"t{len(users)}"), name="add", arguments={"a": len(users), "b": 1}
            )
            return Message(role="assistant", parts=(call,))
        got = f" = {results[-1].tool_results[0].content}" if results else ""
        return Message.assistant(f"turn {len(users)}: {text}{got}")


def make(chat: Chat, trace: Path | None = None, **config: Any) -> Agent[str]:
    """The agent under test, on deterministic ports."""
    return Agent(
        FunctionModel(chat.script),
        clock=SteppingClock(START, timedelta(milliseconds=5)),
        ids=CountingIds(),
        tools=[chat.add],
        policy=Policy(allow={"add"}),
        trace=trace,
        **config,
    )


def replaying(chat: Chat, ports: ReplayPorts) -> Agent[Any]:
    """The agent under test on replaying ports."""
    return replaying_agent(ports, tools=[chat.add], policy=Policy(allow={"add"}))


def three_turns(path: Path) -> list[str]:
    """Record a three-turn conversation in ``path``; each turn's output."""
    with make(Chat(), path) as agent:
        first = agent.run("hello")
        second = agent.run("add one", continue_from=first)
        third = agent.run("bye", continue_from=second)
    return [first.output, second.output, third.output]


def test_each_turn_continues_the_conversation_in_one_trace(tmp_path: Path) -> None:
    """Three turns: the outputs answer each message, one run id, one complete chain."""
    path = tmp_path / "chat.jsonl"
    outputs = three_turns(path)
    trace = Trace.load(path, require_complete=True)
    assert ["turn 1: hello", "turn 2: add one = 3", "turn 3: bye"] == outputs
    assert ["run_started", "user_turn", "user_turn"] == [
        k for k in trace.kinds if k in ("run_started", "user_turn")
    ]
    assert 3 == trace.kinds.count("run_finished")
    assert [1, 2, 3, 4] == [e.body.step for e in trace.events if e.body.kind == "model_requested"]


def test_the_stdlib_leaf_verifies_a_multi_turn_trace_as_complete(tmp_path: Path) -> None:
    """`twinflow.trace.verify_trace` checks every event of the conversation, ending complete."""
    path = tmp_path / "chat.jsonl"
    three_turns(path)
    report = verify_trace(path, require_complete=True)
    assert (True, Trace.load(path).size) == (report.ok, report.events)


def test_a_later_turn_sees_the_whole_conversation(tmp_path: Path) -> None:
    """The result of turn 3 holds every message of the three turns; its turn number is 3."""
    with make(Chat()) as agent:
        first = agent.run("hello")
        second = agent.run("again", continue_from=first)
        third = agent.run("bye", continue_from=second)
    assert ["hello", "again", "bye"] == [
        m.text for m in third.transcript.messages if m.role == "user"
    ]
    assert (1, 2, 3) == (first.turn, second.turn, third.turn)
    assert first.run_id == third.run_id


def test_a_conversation_replays_recorded_and_live(tmp_path: Path) -> None:
    """Replay re-runs every turn against the record, in both modes, to the same root."""
    path = tmp_path / "chat.jsonl"
    three_turns(path)
    trace = Trace.load(path)
    for mode in ("recorded", "live"):
        chat = Chat()
        result = replay(trace, lambda ports, c=chat: replaying(c, ports), mode=mode)
        assert (trace.size, trace.checkpoint().root) == (result.events, result.root)
    assert 1 == chat.tools


def test_a_turn_continues_from_a_trace_file_without_asking_again(tmp_path: Path) -> None:
    """Continuing from the file re-runs the recorded turns against the record: only the new
    turn asks the model; the trace extends the one on disk and replays."""
    path = tmp_path / "chat.jsonl"
    three_turns(path)
    before = Trace.load(path).checkpoint()
    chat = Chat()
    with make(chat) as agent:
        result = agent.run("add more", continue_from=path)
    trace = Trace.load(path, require_complete=True)
    assert ("turn 4: add more = 5", 4, 2, 1) == (
        result.output,
        result.turn,
        chat.requests,
        chat.tools,
    )
    assert before == trace.checkpoint(before.size)
    assert trace.size == replay(trace, lambda ports: replaying(Chat(), ports)).events


def test_a_result_from_another_agent_continues_from_its_file(tmp_path: Path) -> None:
    """A result whose agent is not this one goes on from its trace file."""
    path = tmp_path / "chat.jsonl"
    with make(Chat(), path) as agent:
        first = agent.run("hello")
    chat = Chat()
    with make(chat) as agent:
        second = agent.run("again", continue_from=first)
    assert ("turn 2: again", 1) == (second.output, chat.requests)


def test_a_crash_mid_turn_resumes_and_the_conversation_goes_on(tmp_path: Path) -> None:
    """A trace cut inside turn 2 (before its tool result) resumes: turn 1 is served, the
    rest of turn 2 runs live; turn 3 then continues the resumed run."""
    full = tmp_path / "full.jsonl"
    three_turns(full)
    trace = Trace.load(full)
    called = trace.kinds.index("tool_called")
    cut = crashed_at(full, called, tmp_path / "cut.jsonl")
    chat = Chat()
    with make(chat) as agent:
        second = agent.resume(cut)
        third = agent.run("bye", continue_from=second)
    assert ("turn 2: add one = 3", "turn 3: bye", 1) == (second.output, third.output, chat.tools)
    resumed = Trace.load(cut, require_complete=True)
    assert "run_resumed" in resumed.kinds
    assert resumed.size == replay(resumed, lambda ports: replaying(Chat(), ports)).events


def test_fork_at_turn_serves_the_turns_before_it(tmp_path: Path) -> None:
    """``at_turn=2`` serves turn 1 and asks the model afresh at turn 2's first step."""
    parent = tmp_path / "parent.jsonl"
    three_turns(parent)
    child = tmp_path / "child.jsonl"
    chat = Chat()
    with make(chat, child) as agent:
        result = agent.fork(parent, at_turn=2)
    started = Trace.load(child).events[0].body
    assert ("turn 2: add one = 3", 2, 2, 1) == (
        result.output,
        started.parent.step,
        chat.requests,
        chat.tools,
    )


def test_fork_refuses_a_turn_the_parent_does_not_have(tmp_path: Path) -> None:
    """A turn past the last one is refused, naming the turns there are."""
    parent = tmp_path / "parent.jsonl"
    three_turns(parent)
    with make(Chat()) as agent, pytest.raises(CannotResume, match="its turns are 1 to 3"):
        agent.fork(parent, at_turn=4)
    with make(Chat()) as agent, pytest.raises(AgentConfigError, match="one of at_step"):
        agent.fork(parent, at_step=2, at_turn=2)


def test_a_turn_sent_to_a_failed_run_says_to_fork(tmp_path: Path) -> None:
    """A run whose turn failed takes no more turns: the error names the failure and the fork."""
    path = tmp_path / "failed.jsonl"
    with make(Chat(), path, max_steps=1) as agent, pytest.raises(RunError):
        agent.run("add one")
    with make(Chat()) as agent, pytest.raises(CannotResume) as caught:
        agent.run("again", continue_from=path)
    assert "failed" == caught.value.reason
    assert "fork it at the step that failed (twinflow fork" in str(caught.value)
    assert 1 == len(str(caught.value).splitlines())


def test_a_turn_sent_to_a_run_stopped_mid_turn_says_to_resume(tmp_path: Path) -> None:
    """A trace without a terminal event is refused with the resume command."""
    full = tmp_path / "full.jsonl"
    three_turns(full)
    cut = crashed_at(full, 3, tmp_path / "cut.jsonl")
    with make(Chat()) as agent, pytest.raises(CannotResume) as caught:
        agent.run("again", continue_from=cut)
    assert "unfinished" == caught.value.reason
    assert f"resume it first (twinflow resume {cut}" in str(caught.value)


def test_a_turn_sent_to_a_paused_run_says_to_decide(tmp_path: Path) -> None:
    """A run waiting for approval is refused with the approve command."""
    path = tmp_path / "paused.jsonl"
    chat = Chat()
    asking = Agent(
        FunctionModel(chat.script),
        tools=[chat.add],
        policy=Policy(ask={"add"}),
        trace=path,
    )
    with asking, pytest.raises(Exception, match="waits for a decision"):
        asking.run("add one")
    with make(Chat()) as agent, pytest.raises(CannotResume) as caught:
        agent.run("again", continue_from=path)
    assert "paused" == caught.value.reason
    assert "twinflow approve" in str(caught.value)


def test_an_earlier_turns_result_cannot_continue_past_a_later_turn() -> None:
    """A result whose trace was written past is refused: the conversation has one thread."""
    with make(Chat()) as agent:
        first = agent.run("hello")
        agent.run("again", continue_from=first)
        with pytest.raises(CannotResume, match="written after the turn this result answers"):
            agent.run("other", continue_from=first)


def test_max_steps_bounds_each_turn_and_usage_limits_the_run() -> None:
    """A turn gets its own ``max_steps``; the run's request limit counts every turn."""
    with make(Chat(), max_steps=2, usage_limits=UsageLimits(requests=4)) as agent:
        first = agent.run("add one")
        second = agent.run("add two", continue_from=first)
        with pytest.raises(RunError) as caught:
            agent.run("add three", continue_from=second)
    assert ("usage_limit", 4) == (caught.value.reason, second.steps)
