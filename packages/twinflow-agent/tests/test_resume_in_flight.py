"""What a resume finds in flight: read from the whole trace, and from a failure's recorded reason.

Traces are made by real runs (a sink that cannot write a call's result, a tool interrupted with
KeyboardInterrupt, a model whose transport fails with a given reason) or rewritten event by
event through a trace writer, so each verifies as a trace a writer could have left.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from datetime import timedelta
from pathlib import Path

import pytest
from agent_testkit import Counts, Total, crashed_at
from test_resume import START, STEPS, make

from twinflow._base._errors import FileWriteError
from twinflow.agent import Agent, CannotResume, FunctionModel, Policy, Trace
from twinflow.agent._events import (
    EventBody,
    RunFailed,
    RunResumed,
    RunStarted,
    ToolCalled,
    ToolReturned,
)
from twinflow.agent._trace import TraceWriter
from twinflow.kernel import CountingIds, SteppingClock, TransportError
from twinflow.trace import FileTraceSink
from twinflow.vocab import CallId, Message, ModelRequest


@pytest.fixture
def recorded(tmp_path: Path) -> Path:
    """A whole run's trace."""
    path = tmp_path / "full.jsonl"
    with make(Counts(STEPS), FileTraceSink(path)) as agent:
        agent.run("add")
    return path


class _FullDisk(FileTraceSink):
    """A trace file whose disk fills up just as the first call's result is written."""

    def write(self, line: bytes) -> None:
        if b'"kind":"tool_returned"' in line:
            raise FileWriteError("no space left on device", path="t.jsonl", reason="write")
        super().write(line)


def _failed_inside_a_call(tmp_path: Path) -> Path:
    """A run whose first call ran but whose result never reached the trace (a full disk)."""
    path = tmp_path / "t.jsonl"
    with make(Counts(STEPS), _FullDisk(path)) as agent, pytest.raises(FileWriteError):
        agent.run("add")
    return path


def _kinds(path: Path) -> list[str]:
    return [e.body.kind for e in Trace.load(path).events]


def _rewritten(
    source: Path, into: Path, edit: Callable[[list[EventBody]], list[EventBody]]
) -> Path:
    """``source``'s events, edited, written again by a trace writer (so the chain verifies)."""
    bodies = edit([e.body for e in Trace.load(source).events])
    writer = TraceWriter(FileTraceSink(into))
    clock = SteppingClock(START, timedelta(milliseconds=5))
    for body in bodies:
        writer.append(clock.now(), body)
    writer.end_step()
    writer.sink.close()
    return into


def test_a_call_before_a_full_disk_failure_is_not_run_again(tmp_path: Path) -> None:
    """tool_called then run_failed (a full disk): resume refuses, naming the call; nothing written."""
    path = _failed_inside_a_call(tmp_path)
    assert ["tool_called", "run_failed"] == _kinds(path)[-2:]
    data = path.read_bytes()
    counts = Counts(STEPS)
    with make(counts) as agent, pytest.raises(CannotResume, match="inside tool call c0 \\(add"):
        agent.resume(path)
    assert (data, 0, 0) == (path.read_bytes(), counts.requests, counts.tools)


def test_a_repeat_safe_call_before_a_failure_is_run_again_and_named(tmp_path: Path) -> None:
    """Declared safe to repeat, the call runs once more and run_resumed.repeated_call names it."""
    path = _failed_inside_a_call(tmp_path)
    size = Trace.load(path).size
    counts = Counts(STEPS)
    with make(counts, repeat_safe=frozenset({"add"})) as agent:
        result = agent.resume(path)
    resumed = Trace.load(path, require_complete=True).events[size].body
    assert isinstance(resumed, RunResumed)
    assert ({"total": STEPS}, STEPS, CallId("c0")) == (
        result.output.model_dump(),
        counts.tools,
        resumed.repeated_call,
    )


class _Interrupted(Counts):
    """A tool interrupted with Ctrl-C while it runs, once."""

    def add(self, a: int, b: int) -> int:
        """Add two integers."""
        if self.tools == 0:
            self.tools += 1
            raise KeyboardInterrupt
        return super().add(a, b)


def test_ctrl_c_inside_a_tool_stops_the_resume_and_elsewhere_is_a_pause(tmp_path: Path) -> None:
    """Interrupted inside a tool, the call is named; interrupted at the model, the run goes on."""
    inside = tmp_path / "inside.jsonl"
    counts = _Interrupted(STEPS)
    agent = Agent(
        FunctionModel(counts.script),
        clock=SteppingClock(START, timedelta(milliseconds=5)),
        ids=CountingIds(),
        tools=[counts.add],
        policy=Policy(allow=frozenset({"add"})),
        output_type=Total,
        trace=FileTraceSink(inside),
    )
    with agent, pytest.raises(KeyboardInterrupt):
        agent.run("add")
    assert ["tool_called", "run_failed"] == _kinds(inside)[-2:]
    with make(Counts(STEPS)) as again, pytest.raises(CannotResume, match="tool call c0 \\(add"):
        again.resume(inside)

    at_model = tmp_path / "model.jsonl"
    interrupted = _Raising(STEPS, KeyboardInterrupt())
    with make(interrupted, FileTraceSink(at_model)) as agent, pytest.raises(KeyboardInterrupt):
        agent.run("add")
    size = Trace.load(at_model).size
    counts = Counts(STEPS)
    with make(counts) as agent:
        result = agent.resume(at_model)
    resumed = Trace.load(at_model).events[size].body
    assert isinstance(resumed, RunResumed)
    assert ({"total": STEPS}, "the run was interrupted (Ctrl-C), a pause", None) == (
        result.output.model_dump(),
        resumed.why,
        resumed.repeated_call,
    )


class _Raising(Counts):
    """A model that raises ``error`` at its second request, once."""

    def __init__(self, steps: int, error: BaseException) -> None:
        super().__init__(steps)
        self.error: BaseException | None = error

    def script(self, request: ModelRequest) -> Message:
        """Raise at the second request, then go on as `Counts`."""
        if self.requests == 1 and self.error is not None:
            error, self.error = self.error, None
            self.requests += 1
            raise error
        return super().script(request)


def _transport(reason: str) -> TransportError:
    url = "http://127.0.0.1:9/"
    return TransportError(f"{reason} at {url}", url=url, reason=reason)  # type: ignore[arg-type]  # each tag of the parametrize, as a str


@pytest.mark.parametrize(
    ("reason", "resumes"),
    [("connect", True), ("timeout", True), ("blocked", False), ("too_large", False)],
)
def test_the_recorded_reason_decides_whether_a_failure_passes(
    tmp_path: Path, reason: str, resumes: bool
) -> None:
    """A transport failure's recorded reason says if resume goes on: blocked and too_large stop."""
    path = tmp_path / "t.jsonl"
    failing = make(_Raising(STEPS, _transport(reason)), FileTraceSink(path))
    with failing, pytest.raises(TransportError):
        failing.run("add")
    last = Trace.load(path).events[-1].body
    assert (RunFailed, reason) == (type(last), getattr(last, "reason", None))
    data = path.read_bytes()
    counts = Counts(STEPS)
    with make(counts) as agent:
        if resumes:
            assert {"total": STEPS} == agent.resume(path).output.model_dump()
        else:
            with pytest.raises(CannotResume, match=f"TransportError \\({reason}\\)"):
                agent.resume(path)
            assert (data, 0) == (path.read_bytes(), counts.requests)


def test_a_transport_failure_recorded_without_its_reason_does_not_pass(tmp_path: Path) -> None:
    """A run_failed that does not say why (an older writer's, or an edited one) stops a resume."""
    source = tmp_path / "source.jsonl"
    failing = make(_Raising(STEPS, _transport("connect")), FileTraceSink(source))
    with failing, pytest.raises(TransportError):
        failing.run("add")

    def unexplained(bodies: list[EventBody]) -> list[EventBody]:
        last = bodies[-1]
        assert isinstance(last, RunFailed)
        return [*bodies[:-1], last.model_copy(update={"reason": None})]

    path = _rewritten(source, tmp_path / "t.jsonl", unexplained)
    with make(Counts(STEPS)) as agent, pytest.raises(CannotResume, match="TransportError \\(seq"):
        agent.resume(path)


def _calls(bodies: Sequence[EventBody]) -> list[int]:
    return [i for i, b in enumerate(bodies) if isinstance(b, ToolCalled)]


def _returns(bodies: Sequence[EventBody]) -> list[int]:
    return [i for i, b in enumerate(bodies) if isinstance(b, ToolReturned)]


def _other_id(bodies: list[EventBody]) -> list[EventBody]:
    """The first call's result answers another call id."""
    at = _returns(bodies)[0]
    returned = bodies[at]
    assert isinstance(returned, ToolReturned)
    result = returned.result.model_copy(update={"call_id": CallId("elsewhere")})
    return [*bodies[:at], returned.model_copy(update={"result": result}), *bodies[at + 1 :]]


def _called_twice(bodies: list[EventBody]) -> list[EventBody]:
    """The first call's tool_called is recorded twice, with one result."""
    at = _calls(bodies)[0]
    return [*bodies[: at + 1], bodies[at], *bodies[at + 1 :]]


def _second_of_a_step_unanswered(bodies: list[EventBody]) -> list[EventBody]:
    """Two calls in the first step, only the first answered, then a transport failure."""
    at = _returns(bodies)[0]
    first = bodies[at - 1]
    assert isinstance(first, ToolCalled)
    second = first.model_copy(update={"call_id": CallId("c0b")})
    started = bodies[0]
    assert isinstance(started, RunStarted)
    failed = RunFailed(
        run_id=started.run_id,
        steps=1,
        error_type="TransportError",
        message="timeout",
        reason="timeout",
    )
    return [*bodies[: at + 1], second, failed]


@pytest.mark.parametrize(
    ("edit", "named"),
    [(_other_id, "c0 (add"), (_called_twice, "c0 (add"), (_second_of_a_step_unanswered, "c0b")],
)
def test_a_call_left_without_its_result_anywhere_is_named(
    recorded: Path,
    tmp_path: Path,
    edit: Callable[[list[EventBody]], list[EventBody]],
    named: str,
) -> None:
    """A result of another id, an id called twice, a step's second call unanswered: each refused."""
    path = _rewritten(recorded, tmp_path / "t.jsonl", lambda b: edit(b[:-1]))
    data = path.read_bytes()
    counts = Counts(STEPS)
    with make(counts) as agent, pytest.raises(CannotResume, match=re.escape(f"tool call {named}")):
        agent.resume(path)
    assert (data, 0, 0) == (path.read_bytes(), counts.requests, counts.tools)


def test_a_call_whose_result_was_torn_is_named(recorded: Path, tmp_path: Path) -> None:
    """A trace cut inside the line of a call's result: the call is in flight, and named."""
    lines = recorded.read_bytes().splitlines(keepends=True)
    at = [e.seq for e in Trace.load(recorded).events if e.body.kind == "tool_returned"][1]
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"".join(lines[:at]) + lines[at][: len(lines[at]) // 2])
    with make(Counts(STEPS)) as agent, pytest.raises(CannotResume, match="tool call c1 \\(add"):
        agent.resume(path)


def test_a_call_that_returned_an_error_is_served_not_run_again(
    recorded: Path, tmp_path: Path
) -> None:
    """A call whose result is an error is answered: resume serves it and runs nothing recorded."""

    def failing(bodies: list[EventBody]) -> list[EventBody]:
        at = _returns(bodies)[0]
        returned = bodies[at]
        assert isinstance(returned, ToolReturned)
        result = returned.result.model_copy(update={"is_error": True, "content": "1"})
        failed = returned.model_copy(update={"result": result, "error_type": "ValueError"})
        return [*bodies[:at], failed]

    path = _rewritten(recorded, tmp_path / "t.jsonl", failing)
    counts = Counts(STEPS)
    with make(counts) as agent:
        agent.resume(path)
    assert STEPS - 1 == counts.tools


def test_a_call_repeated_then_killed_again_is_repeated_again_and_named(tmp_path: Path) -> None:
    """Killed inside the repeat of a call: the next resume repeats it again, naming it again."""
    path = _failed_inside_a_call(tmp_path)
    size = Trace.load(path).size
    full = tmp_path / "full.jsonl"
    full.write_bytes(path.read_bytes())
    with make(Counts(STEPS), repeat_safe=frozenset({"add"})) as agent:
        agent.resume(full)
    cut = crashed_at(full, size + 1, tmp_path / "cut.jsonl")
    assert "run_resumed" == _kinds(cut)[-1]
    counts = Counts(STEPS)
    with make(counts, repeat_safe=frozenset({"add"})) as agent:
        result = agent.resume(cut)
    events = Trace.load(cut, require_complete=True).events
    repeated = [e.body.repeated_call for e in events if isinstance(e.body, RunResumed)]
    assert ({"total": STEPS}, STEPS, [CallId("c0"), CallId("c0")]) == (
        result.output.model_dump(),
        counts.tools,
        repeated,
    )


def test_a_model_failing_again_right_after_a_resume_is_resumed(tmp_path: Path) -> None:
    """A resume whose first request fails leaves run_failed, run_resumed, run_failed: it goes on."""
    path = tmp_path / "t.jsonl"
    failing = make(_Raising(STEPS, _transport("connect")), FileTraceSink(path))
    with failing, pytest.raises(TransportError):
        failing.run("add")
    again = _Raising(STEPS, _transport("timeout"))
    again.requests = 1  # its first request raises
    with make(again) as agent, pytest.raises(TransportError):
        agent.resume(path)
    assert ["run_failed", "run_resumed", "run_failed"] == _kinds(path)[-3:]
    counts = Counts(STEPS)
    with make(counts) as agent:
        result = agent.resume(path)
    assert ({"total": STEPS}, STEPS - 1) == (result.output.model_dump(), counts.requests - 1)
