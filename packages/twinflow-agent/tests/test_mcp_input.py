"""An MCP server's input_required round as a pause: recorded, answered, resumed, replayed."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from test_agent_mcp import CALC, START, calls, seen

from twinflow.agent import (
    Agent,
    CannotResume,
    Decision,
    FunctionModel,
    McpTools,
    Policy,
    RunPaused,
    Trace,
    replay,
)
from twinflow.agent._events import InputAnswered, InputRequested, ToolsListed
from twinflow.agent._replay import ReplayPorts
from twinflow.kernel import CountingIds, McpClient, SteppingClock
from twinflow.vocab import CallId


@pytest.fixture
def connect(tmp_path: Path) -> Iterator[Callable[[], McpClient]]:
    """Starts the stateless-only calc server over stdio, logging each call it completes."""
    started: list[McpClient] = []

    def start() -> McpClient:
        command = [sys.executable, str(CALC), "stdio", "--era", "current"]
        command += ["--log", str(tmp_path / "seen.jsonl")]
        client = McpClient.stdio("calc", command, log_path=tmp_path / "calc.stderr.log")
        started.append(client)
        return client

    yield start
    for client in started:
        client.close()


def _agent(path: Path, server: McpTools, steps: Any = ()) -> Agent[str]:
    return Agent(
        FunctionModel(calls(*steps)),
        clock=SteppingClock(START, timedelta(milliseconds=5)),
        ids=CountingIds(),
        tools=[server],
        policy=Policy(allow=frozenset({"calc.pay", "calc.nag"})),
        trace=path,
    )


def _paused(tmp_path: Path, connect: Callable[[], McpClient], tool: str = "calc.pay") -> Path:
    """A run whose one call pauses on the server's form; its trace."""
    path = tmp_path / "run.jsonl"
    arguments = {"amount": 3} if tool == "calc.pay" else {}
    server = McpTools.live("calc", connect)
    with _agent(path, server, [(tool, arguments)]) as run, pytest.raises(RunPaused) as paused:
        run.run("pay")
    server.close()
    assert ["input_requested"] == [p.kind for p in paused.value.paused.pending]
    return path


def _resume(path: Path, connect: Callable[[], McpClient], *decisions: Decision) -> str:
    server = McpTools.live("calc", connect)
    try:
        with _agent(path, server, [("calc.pay", {"amount": 3})]) as run:
            return run.resume(path, decisions=decisions).output
    finally:
        server.close()


def test_a_form_pauses_the_run_and_an_answer_resumes_it_then_replays_offline(
    tmp_path: Path, connect: Callable[[], McpClient]
) -> None:
    """The request is an event; the answer is sent with the server's state; replay needs no server."""
    path = _paused(tmp_path, connect)
    trace = Trace.load(path)
    [asked] = [e.body for e in trace.events if isinstance(e.body, InputRequested)]
    assert ("calc.pay", 1, "confirm", "Pay 3?") == (
        asked.tool,
        asked.round,
        asked.key,
        asked.message,
    )
    assert [] == seen(tmp_path / "seen.jsonl")
    answer = Decision(call_id=CallId("c0"), approve=True, answer={"yes": True}, by="ana")
    assert "paid 3" == _resume(path, connect, answer)
    [paid] = seen(tmp_path / "seen.jsonl")
    sent = paid["arguments"]
    assert ("accept", {"yes": True}, "pay:3") == (
        sent["answer"]["action"],
        sent["answer"]["content"],
        sent["state"],
    )
    kinds = Trace.load(path).kinds
    assert ["tool_called", "input_requested", "run_resumed", "input_answered", "tool_returned"] == [
        k
        for k in kinds
        if k in ("tool_called", "input_requested", "run_resumed", "input_answered", "tool_returned")
    ]
    done = Trace.load(path)
    listed = [e.body for e in done.events if isinstance(e.body, ToolsListed)]

    def offline(ports: ReplayPorts) -> Agent[str]:
        return Agent(
            ports.model,
            clock=ports.clock,
            ids=ports.ids,
            tools=[McpTools.recorded("calc", listed)],
            policy=Policy(allow=frozenset({"calc.pay", "calc.nag"})),
            trace=ports.trace,
            model_label=ports.model_label,
            tool_results=ports.tool_results,
        )

    assert done.size == replay(done, offline, mode="recorded").events


@pytest.mark.parametrize(
    ("decision", "expected"),
    [
        (
            Decision(call_id=CallId("c9"), approve=True, answer={"yes": True}),
            "no call 'c9' is waiting",
        ),
        (
            Decision(call_id=CallId("c0"), approve=True, answer={"yes": True}, request="other"),
            "no call 'c0' is waiting for an answer to request 'other'",
        ),
        (Decision(call_id=CallId("c0"), approve=True, answer={"yes": "sure"}), "at '/yes'"),
        (Decision(call_id=CallId("c0"), approve=True), "waits for an answer, not an approval"),
    ],
)
def test_an_answer_to_another_request_or_off_schema_is_refused_and_nothing_is_written(
    tmp_path: Path, connect: Callable[[], McpClient], decision: Decision, expected: str
) -> None:
    """Each refusal names what is wrong, before the trace grows."""
    path = _paused(tmp_path, connect)
    before = path.read_bytes()
    with pytest.raises(CannotResume, match=expected):
        _resume(path, connect, decision)
    assert before == path.read_bytes()


def test_a_resume_with_no_answer_is_refused_naming_the_request(
    tmp_path: Path, connect: Callable[[], McpClient]
) -> None:
    """Nothing is sent again without the answer the run waits for."""
    path = _paused(tmp_path, connect)
    with pytest.raises(
        CannotResume, match=r"waits for an answer to call 'c0' round 1 request 'confirm'"
    ):
        _resume(path, connect)


def test_a_declined_form_reaches_the_server_as_a_decline(
    tmp_path: Path, connect: Callable[[], McpClient]
) -> None:
    """approve=False on a form declines it: the server says what it does then."""
    path = _paused(tmp_path, connect)
    assert "not paid (decline)" == _resume(
        path, connect, Decision(call_id=CallId("c0"), approve=False)
    )
    answered = [e.body for e in Trace.load(path).events if isinstance(e.body, InputAnswered)]
    assert [("decline", None)] == [(a.action, a.content) for a in answered]


def test_each_round_pauses_again_and_the_limit_of_rounds_ends_the_call(
    tmp_path: Path, connect: Callable[[], McpClient]
) -> None:
    """A server asking forever: round 1 answered, round 2 pauses (the re-run sends the
    recorded answer first), round 2 answered, then the limit of 2 rounds is the call's error."""
    path = _paused(tmp_path, connect, "calc.nag")

    def go_on(*decisions: Decision) -> Any:
        server = McpTools.live("calc", connect)
        server.max_input_rounds = 2
        try:
            with _agent(path, server, [("calc.nag", {})]) as run:
                return run.resume(path, decisions=decisions).output
        finally:
            server.close()

    first = Decision(call_id=CallId("c0"), approve=True, answer={"yes": True})
    with pytest.raises(RunPaused) as again:
        go_on(first)
    assert [(2, "again1")] == [(p.round, p.key) for p in again.value.paused.pending]
    second = Decision(call_id=CallId("c0"), approve=True, answer={"yes": True}, request="again1")
    assert "still asked for input after 2 rounds" in go_on(second)
    answered = [e.body for e in Trace.load(path).events if isinstance(e.body, InputAnswered)]
    assert [(1, "again0"), (2, "again1")] == [(a.round, a.key) for a in answered]


def test_a_callback_answer_is_recorded_and_asked_again_on_a_live_replay(
    tmp_path: Path, connect: Callable[[], McpClient]
) -> None:
    """The Python callback still answers: its answer is an event, and a live replay asks it
    again (a recorded callback answer is never acted on from the record)."""
    asked: list[str] = []

    def answer(tool: str, message: str, schema: dict[str, Any]) -> dict[str, Any]:
        asked.append(message)
        return {"yes": True}

    path = tmp_path / "run.jsonl"
    server = McpTools.live("calc", connect, answer=answer)
    with _agent(path, server, [("calc.pay", {"amount": 3})]) as run:
        assert "paid 3" == run.run("pay").output
    server.close()
    answered = [e.body for e in Trace.load(path).events if isinstance(e.body, InputAnswered)]
    assert [("callback", {"yes": True})] == [(a.by, a.content) for a in answered]

    def live(ports: ReplayPorts) -> Agent[str]:
        return Agent(
            ports.model,
            clock=ports.clock,
            ids=ports.ids,
            tools=[McpTools.live("calc", connect, answer=answer)],
            policy=Policy(allow=frozenset({"calc.pay", "calc.nag"})),
            trace=ports.trace,
            model_label=ports.model_label,
        )

    done = Trace.load(path)
    assert done.size == replay(done, live, mode="live").events
    assert ["Pay 3?", "Pay 3?"] == asked


def test_a_crash_after_an_answer_leaves_the_call_in_flight_not_paused(
    tmp_path: Path, connect: Callable[[], McpClient]
) -> None:
    """A trace cut after a resume wrote the answer (its retry may have reached the server) is
    not resumed by sending the call again: the call is in flight, named."""
    path = _paused(tmp_path, connect)
    answer = Decision(call_id=CallId("c0"), approve=True, answer={"yes": True})
    assert "paid 3" == _resume(path, connect, answer)
    lines = path.read_bytes().splitlines(keepends=True)
    kinds = Trace.load(path).kinds
    path.write_bytes(b"".join(lines[: kinds.index("input_answered") + 1]))
    with pytest.raises(CannotResume, match="stopped inside tool call c0") as refused:
        _resume(path, connect, answer)
    assert "in_flight" == refused.value.reason


def test_an_answer_to_a_call_waiting_for_approval_is_refused(
    tmp_path: Path, connect: Callable[[], McpClient]
) -> None:
    """A run paused by policy.ask takes a decision, not a form's values."""
    path = tmp_path / "run.jsonl"
    server = McpTools.live("calc", connect)
    run = Agent(
        FunctionModel(calls(("calc.pay", {"amount": 3}))),
        clock=SteppingClock(START, timedelta(milliseconds=5)),
        ids=CountingIds(),
        tools=[server],
        policy=Policy(ask=frozenset({"calc.pay"})),
        trace=path,
    )
    with run, pytest.raises(RunPaused):
        run.run("pay")
    server.close()
    answer = Decision(call_id=CallId("c0"), approve=True, answer={"yes": True})
    with pytest.raises(CannotResume, match="waits for approval, not for input"):
        _resume(path, connect, answer)
