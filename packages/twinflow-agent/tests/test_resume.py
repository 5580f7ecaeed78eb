"""Continuing a run from its trace: resume after a crash, pause for a person, decide, go on."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from agent_testkit import Counts, Total, crashed_at, replaying_agent

from twinflow._base._errors import FileWriteError
from twinflow.agent import (
    Agent,
    ApprovalDecided,
    ApprovalRequested,
    CannotResume,
    Decision,
    FunctionModel,
    Policy,
    RunPaused,
    RunResumed,
    Trace,
    replay,
)
from twinflow.agent._replay import ReplayPorts
from twinflow.agent._resume import record_decisions
from twinflow.kernel import CountingIds, ReplayDivergenceError, SteppingClock, TransportError
from twinflow.trace import FileTraceSink, TraceCorruptError
from twinflow.trace._checkpoint import check_consistency
from twinflow.views._behaviour import compare_behaviour
from twinflow.vocab import CallId
from twinflow.vocab import value_bytes as canonical_bytes

START = datetime(2026, 1, 1, tzinfo=UTC)
STEPS = 3


def make(
    counts: Counts,
    trace: FileTraceSink | None = None,
    *,
    allow: frozenset[str] = frozenset({"add"}),
    ask: frozenset[str] = frozenset(),
    repeat_safe: frozenset[str] = frozenset(),
    ports: ReplayPorts | None = None,
) -> Agent[Total]:
    """The agent under test: fresh deterministic ports, or replaying ones."""
    policy = Policy(allow=allow, ask=ask, repeat_safe=repeat_safe)
    if ports is not None:
        return replaying_agent(
            ports,
            tools=[counts.add],
            policy=policy,
            output_type=Total,
        )
    return Agent(
        FunctionModel(counts.script),
        clock=SteppingClock(START, timedelta(milliseconds=5)),
        ids=CountingIds(),
        tools=[counts.add],
        policy=policy,
        output_type=Total,
        trace=trace,
    )


@pytest.fixture
def recorded(tmp_path: Path) -> Path:
    """A whole run's trace, to cut back to what a crash at any event leaves."""
    path = tmp_path / "full.jsonl"
    with make(Counts(STEPS), FileTraceSink(path)) as agent:
        agent.run("add")
    return path


def cut_points(full: Path) -> Iterator[int]:
    yield from range(1, Trace.load(full).size)


def test_resume_after_a_crash_at_every_event_repeats_nothing_recorded(
    recorded: Path, tmp_path: Path
) -> None:
    """Resumed at any event, no recorded request or tool call is repeated and the trace extends."""
    full = Trace.load(recorded)
    for size in cut_points(recorded):
        path = crashed_at(recorded, size, tmp_path / f"t{size}.jsonl")
        before = Trace.load(path).checkpoint()
        events = tuple(Trace.load(path).events)
        requested = sum(e.body.kind == "model_responded" for e in events)
        returned = sum(e.body.kind == "tool_returned" for e in events)
        dangling = events[-1].body.kind == "tool_called"
        counts = Counts(STEPS)
        with make(counts, repeat_safe=frozenset({"add"})) as agent:
            result = agent.resume(path)
        assert {"total": STEPS} == result.output.model_dump()
        assert STEPS + 1 - requested == counts.requests, size
        assert STEPS - returned == counts.tools, size
        after = Trace.load(path, require_complete=True)
        check_consistency(after.consistency_proof(size), before, after.checkpoint())
        resumed = [e for e in after.events if isinstance(e.body, RunResumed)]
        assert [size] == [e.seq for e in resumed]
        assert (events[-1].body.call_id if dangling else None) == resumed[0].body.repeated_call
        assert full.size + 1 == after.size


def test_resumed_trace_replays_in_recorded_mode(recorded: Path, tmp_path: Path) -> None:
    """A resumed trace is an ordinary trace: replay re-runs it, run_resumed included."""
    path = crashed_at(recorded, 6, tmp_path / "t.jsonl")
    with make(Counts(STEPS)) as agent:
        agent.resume(path)
    trace = Trace.load(path)
    result = replay(trace, lambda ports: make(Counts(STEPS), ports=ports))
    assert trace.size == result.events


def test_resume_twice_replays_the_first_resume(recorded: Path, tmp_path: Path) -> None:
    """A run resumed, crashed again and resumed again holds both run_resumed events."""
    path = crashed_at(recorded, 3, tmp_path / "t.jsonl")
    with make(Counts(STEPS)) as agent:
        agent.resume(path)
    once = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(once[:7]))
    counts = Counts(STEPS)
    with make(counts) as agent:
        agent.resume(path)
    seqs = [e.seq for e in Trace.load(path).events if isinstance(e.body, RunResumed)]
    assert [3, 7] == seqs
    assert once[:7] == path.read_bytes().splitlines(keepends=True)[:7]


def test_call_left_inside_a_tool_is_not_repeated_unless_declared_safe(
    recorded: Path, tmp_path: Path
) -> None:
    """A tool_called without its tool_returned stops the resume, naming the call; nothing written."""
    size = next(e.seq + 1 for e in Trace.load(recorded).events if e.body.kind == "tool_called")
    path = crashed_at(recorded, size, tmp_path / "t.jsonl")
    data = path.read_bytes()
    counts = Counts(STEPS)
    with make(counts) as agent, pytest.raises(CannotResume, match="inside tool call c0 \\(add"):
        agent.resume(path)
    assert (data, 0, 0) == (path.read_bytes(), counts.requests, counts.tools)


def test_finished_run_is_refused(recorded: Path) -> None:
    """Resuming a finished run says it already finished and writes nothing."""
    data = recorded.read_bytes()
    with make(Counts(STEPS)) as agent, pytest.raises(CannotResume, match="already finished"):
        agent.resume(recorded)
    assert data == recorded.read_bytes()


def test_tampered_trace_is_refused(recorded: Path, tmp_path: Path) -> None:
    """A trace edited after the fact does not verify: resume names the event, writes nothing."""
    path = crashed_at(recorded, 6, tmp_path / "t.jsonl")
    data = path.read_bytes().replace(b'"a":0', b'"a":7')
    path.write_bytes(data)
    with make(Counts(STEPS)) as agent, pytest.raises(TraceCorruptError, match="seq"):
        agent.resume(path)
    assert data == path.read_bytes()


def test_torn_last_line_is_moved_aside(recorded: Path, tmp_path: Path) -> None:
    """A half-written last line goes to a side file, as repair does; the run goes on."""
    lines = recorded.read_bytes().splitlines(keepends=True)
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"".join(lines[:4]) + lines[4][:20])
    with make(Counts(STEPS)) as agent:
        agent.resume(path)
    assert lines[4][:20] == (tmp_path / "t.jsonl.partial").read_bytes()
    assert lines[:4] == path.read_bytes().splitlines(keepends=True)[:4]


def test_changed_code_diverges_and_writes_nothing(recorded: Path, tmp_path: Path) -> None:
    """A prefix the code no longer reproduces is refused with the divergence; the file is kept."""
    path = crashed_at(recorded, 6, tmp_path / "t.jsonl")
    data = path.read_bytes()
    counts = Counts(STEPS)
    with make(counts, allow=frozenset()) as agent, pytest.raises(ReplayDivergenceError) as caught:
        agent.resume(path)
    assert (0, data, 0) == (caught.value.seq, path.read_bytes(), counts.requests)


def test_a_locked_trace_is_refused(recorded: Path, tmp_path: Path) -> None:
    """While another writer holds the trace, resume refuses at once and writes nothing."""
    path = crashed_at(recorded, 4, tmp_path / "t.jsonl")
    data = path.read_bytes()
    holder = FileTraceSink.append_to(path)
    try:
        with make(Counts(STEPS)) as agent, pytest.raises(FileWriteError, match="another process"):
            agent.resume(path)
    finally:
        holder.close()
    assert data == path.read_bytes()


def test_a_transport_failure_resumes(tmp_path: Path) -> None:
    """A run that failed reaching the model goes on where it failed; the failure stays recorded."""
    path = tmp_path / "t.jsonl"
    counts = Counts(STEPS)
    counts.fail_at = 2
    with (
        make(counts, FileTraceSink(path)) as agent,
        pytest.raises(TransportError, check=lambda e: "connect" == e.reason),
    ):
        agent.run("add")
    size = Trace.load(path).size
    counts = Counts(STEPS)
    with make(counts) as agent:
        result = agent.resume(path)
    kinds = [e.body.kind for e in Trace.load(path, require_complete=True).events]
    assert ["run_failed", "run_resumed"] == kinds[size - 1 : size + 1]
    assert ({"total": STEPS}, STEPS) == (result.output.model_dump(), counts.requests)


def test_approval_pauses_then_decisions_continue(tmp_path: Path) -> None:
    """A tool in ask stops the run; approving c0 runs it, denying c1 reaches the model."""
    path = tmp_path / "t.jsonl"
    counts = Counts(STEPS)
    policy = {"allow": frozenset[str](), "ask": frozenset({"add"})}
    with make(counts, FileTraceSink(path), **policy) as agent, pytest.raises(RunPaused) as paused:
        agent.run("add")
    assert (["c0"], 0) == ([p.call_id for p in paused.value.paused.pending], counts.tools)
    with make(counts, **policy) as agent, pytest.raises(RunPaused) as paused:
        agent.resume(path, decisions=[Decision(call_id=CallId("c0"), approve=True, by="ann")])
    assert (["c1"], 1) == ([p.call_id for p in paused.value.paused.pending], counts.tools)
    with make(counts, **policy) as agent, pytest.raises(RunPaused):
        agent.resume(path, decisions=[Decision(call_id=CallId("c1"), approve=False, reason="no")])
    events = tuple(Trace.load(path).events)
    denied = [e.body for e in events if e.body.kind == "tool_returned"][-1]
    assert "ToolDenied: denied by unnamed: no" == denied.result.content
    assert 1 == counts.tools
    decided = [e.body for e in events if isinstance(e.body, ApprovalDecided)]
    assert [("c0", "approve", "ann"), ("c1", "deny", "unnamed")] == [
        (d.call_id, d.decision, d.by) for d in decided
    ]
    asked = [e.body for e in events if isinstance(e.body, ApprovalRequested)]
    assert ["c0", "c1", "c2"] == [a.call_id for a in asked]
    replayed = replay(Trace.load(path), lambda ports: make(Counts(STEPS), ports=ports, **policy))
    assert len(events) == replayed.events


def test_a_decision_for_a_call_not_waiting_is_refused(tmp_path: Path) -> None:
    """Deciding on an unknown call lists the calls that wait, and writes nothing."""
    path = tmp_path / "t.jsonl"
    policy = {"allow": frozenset[str](), "ask": frozenset({"add"})}
    with make(Counts(STEPS), FileTraceSink(path), **policy) as agent, pytest.raises(RunPaused):
        agent.run("add")
    data = path.read_bytes()
    with (
        make(Counts(STEPS), **policy) as agent,
        pytest.raises(CannotResume, match="waiting: c0 \\(add\\)"),
    ):
        agent.resume(path, decisions=[Decision(call_id=CallId("zz"), approve=True)])
    assert data == path.read_bytes()


def test_decisions_recorded_without_the_code_are_read_by_resume(tmp_path: Path) -> None:
    """record_decisions appends the decision alone; a later resume reads it there and goes on."""
    path = tmp_path / "t.jsonl"
    policy = {"allow": frozenset[str](), "ask": frozenset({"add"})}
    with make(Counts(STEPS), FileTraceSink(path), **policy) as agent, pytest.raises(RunPaused):
        agent.run("add")
    before = Trace.load(path).checkpoint()
    clock = SteppingClock(START, timedelta(seconds=1))
    head = record_decisions(path, [Decision(call_id=CallId("c0"), approve=True)], clock)
    assert before.size + 1 == head.size
    counts = Counts(STEPS)
    with make(counts, **policy) as agent, pytest.raises(RunPaused) as paused:
        agent.resume(path)
    assert (["c1"], 1) == ([p.call_id for p in paused.value.paused.pending], counts.tools)
    after = Trace.load(path)
    check_consistency(after.consistency_proof(before.size), before, after.checkpoint())


def test_fork_serves_the_steps_before_it_and_names_its_parent(
    recorded: Path, tmp_path: Path
) -> None:
    """A fork at step 2 asks the model from step 2 on only, runs only later tools, links the parent."""
    parent = Trace.load(recorded)
    counts = Counts(STEPS)
    child_path = tmp_path / "child.jsonl"
    with make(counts, FileTraceSink(child_path)) as agent:
        result = agent.fork(recorded, at_step=2)
    assert ({"total": STEPS}, STEPS, STEPS - 1) == (
        result.output.model_dump(),
        counts.requests,
        counts.tools,
    )
    child = Trace.load(child_path, require_complete=True)
    first = child.events[0].body
    assert (parent.checkpoint().root, parent.size, 2) == (
        first.parent.root,
        first.parent.size,
        first.parent.step,
    )
    as_json = [[json.loads(e) for e in t.encoded] for t in (parent, child)]
    assert () == compare_behaviour(*as_json)
    # The run_started the agent splices from its configuration's bytes is the event's encoding.
    assert [canonical_bytes(e) for e in child.events] == list(child.encoded)


def test_fork_at_a_step_the_parent_never_took_is_refused(recorded: Path, tmp_path: Path) -> None:
    """Forking past the parent's last step names the steps it has."""
    expected = "no step 9 to fork at; its steps are 1 to 4"
    with (
        make(Counts(STEPS), FileTraceSink(tmp_path / "c.jsonl")) as agent,
        pytest.raises(CannotResume, match=expected),
    ):
        agent.fork(recorded, at_step=9)


def test_a_tool_in_ask_is_not_reported_as_denied() -> None:
    """A tool that runs once a person approves it is not among the tools every call is denied to."""
    with make(Counts(STEPS), allow=frozenset(), ask=frozenset({"add"})) as agent:
        assert () == agent.denied_tools
