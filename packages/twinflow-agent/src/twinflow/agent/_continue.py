"""Resume and fork: an agent's loop re-run over a recorded prefix, then live.

Both swap the agent's ports for ones that serve the record (`twinflow.agent._resume`) for the
length of one run, and put the agent's own back afterwards: the loop itself does not know it
is continuing a run.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from twinflow.agent._errors import CannotResume
from twinflow.agent._events import (
    FORMAT,
    ChildRun,
    EventBody,
    ModelResponded,
    ModelWaited,
    RunResumed,
    SteeringReceived,
    UserTurn,
)
from twinflow.agent._replay import clock_readings, served_results
from twinflow.agent._resume import (
    RESUME_KINDS,
    Decision,
    Gate,
    Plan,
    RecordedRunIds,
    ResumeSink,
    ResumeWriter,
    ThenLiveClock,
    ThenLiveModel,
    ThenLiveResults,
    ThenLiveSteering,
    plan,
    plan_fork,
    plan_turn,
    recorded_costs,
    recorded_fallbacks,
    recorded_turns,
    served_calls,
    served_steps,
)
from twinflow.agent._verify import Trace
from twinflow.trace import FileTraceSink
from twinflow.trace._repair import repair_trace

if TYPE_CHECKING:
    from twinflow.agent._agent import Agent
    from twinflow.agent._run import RunResult

__all__ = ["fork_run", "next_turn", "resume_run"]

OutputT = TypeVar("OutputT")


def _planned(
    agent: Agent[OutputT], trace: str | os.PathLike[str], decisions: Iterable[Decision]
) -> tuple[FileTraceSink, Trace, Plan]:
    """The trace opened for appending (its lock held), read, and the plan of its resume."""
    sink = FileTraceSink.append_to(trace)
    try:
        repair_trace(trace)
        # The events the resume serves from are kept as verification typed them: each event
        # is typed once, at load (the prefix's others are compared as bytes).
        loaded = Trace.load(trace, keep=RESUME_KINDS)
        resumed = plan(
            loaded, os.fspath(trace), repeat_safe=agent.policy.repeat_safe, decisions=decisions
        )
    except BaseException:
        sink.close()
        raise
    return sink, loaded, resumed


def resume_run(
    agent: Agent[OutputT], trace: str | os.PathLike[str], decisions: Iterable[Decision]
) -> RunResult[OutputT]:
    """`Agent.resume`: the recorded prefix re-run against the record, then the run goes on."""
    sink, loaded, resumed = _planned(agent, trace, decisions)
    return _go_on(agent, trace, sink, loaded, resumed, ())


def next_turn(
    agent: Agent[OutputT],
    run: RunResult[Any] | str | os.PathLike[str],
    text: str,
    simulator: RunResult[Any] | None = None,
) -> RunResult[OutputT]:
    """`Agent.run` with ``continue_from``: the next user turn of a run, into its trace; linked
    to the ``simulator``'s trace at its head when a simulated user wrote it."""
    prompt: str | UserTurn = text
    if simulator is not None:
        path = simulator.trace_path
        link = ChildRun(
            run_id=simulator.run_id,
            trace=None if path is None else Path(path).name,
            size=simulator.head.size,
            root=simulator.head.root,
        )
        prompt = UserTurn(turn=2, text=text, simulator=link)
    if not isinstance(run, str | os.PathLike):
        going_on = agent._going_on
        if going_on is not None and going_on.writer is agent.writer:
            if going_on.head == run.head and agent.writer.size == run.head.size:
                return agent._run((prompt,), going_on)
            if going_on.state.run_id == run.run_id and run.head.size < agent.writer.size:
                raise CannotResume(
                    f"run {run.run_id}: its trace has {agent.writer.size} events, "
                    f"{agent.writer.size - run.head.size} written after the turn this result "
                    "answers; continue from the result of the run's last turn"
                )
        if run.trace_path is None:
            raise CannotResume(
                f"run {run.run_id}: its trace is not a file and another agent wrote it; "
                "continue it with the agent that returned this result"
            )
        run = run.trace_path
    sink = FileTraceSink.append_to(run)
    try:
        repair_trace(run)
        loaded = Trace.load(run, keep=RESUME_KINDS)
        planned = plan_turn(loaded, os.fspath(run))
    except BaseException:
        sink.close()
        raise
    return _go_on(agent, run, sink, loaded, planned, (prompt,))


def _go_on(
    agent: Agent[OutputT],
    trace: str | os.PathLike[str],
    sink: FileTraceSink,
    loaded: Trace,
    resumed: Plan,
    turns: tuple[str | UserTurn, ...],
) -> RunResult[OutputT]:
    """Re-run the recorded turns against the record (the prefix ``resumed`` plans), then go
    on live into the same file: the unfinished turn (a resume), or the new ``turns``."""
    writer = ResumeSink(resumed.recorded, sink, resumed.digests)
    gate = Gate(writer, resumed.gate)
    size = len(resumed.recorded)
    saved = (agent.model, agent.clock, agent.ids, agent.writer, agent.tool_results, agent.steering)
    events = resumed.events
    agent.model = ThenLiveModel(
        [
            e.body.response if isinstance(e.body, ModelResponded) else e.body
            for e in events
            if isinstance(e.body, ModelResponded | ModelWaited)
        ],
        agent.model,
        gate,
        recorded_fallbacks(events),
        recorded_costs(events),
    )
    agent.clock = ThenLiveClock(
        clock_readings(loaded, resumed.recorded), agent.clock, agent._real_sleep
    )
    agent.ids = RecordedRunIds(
        resumed.started.run_id,
        agent.ids,
        [e.body.jitter for e in events if isinstance(e.body, ModelWaited)],
    )
    agent.writer = ResumeWriter(writer, fsync=agent.writer.fsync)
    forked = resumed.started.parent
    served = {} if forked is None else served_steps(loaded.events, forked.step)
    # A fork's first steps were its parent's: the loop serves them again as recorded.
    results = served_results(loaded, events, resumed.recorded)[served_calls(served) :]
    agent.tool_results = ThenLiveResults(results, gate)
    agent.steering = ThenLiveSteering(
        [e.body for e in events if isinstance(e.body, SteeringReceived)], agent.steering, gate
    )
    _take_record(agent, resumed, served, size)
    try:
        result = agent._run((*recorded_turns(events), *turns))
        # The writer it went on in is closed below: a next turn goes on from the file.
        return result.model_copy(update={"trace_path": os.fspath(trace)})
    finally:
        try:
            agent.writer.close()
        finally:
            _give_back(agent, saved)


def fork_run(
    agent: Agent[OutputT], parent: str | os.PathLike[str], at_step: int | None, at_turn: int | None
) -> RunResult[OutputT]:
    """`Agent.fork`: the parent's steps before ``at_step`` (or before the first step of turn
    ``at_turn``) served from its trace, then live."""
    loaded = Trace.load(parent)
    forked = plan_fork(loaded, os.fspath(parent), at_step, at_turn)
    at_step = forked.parent.step
    prefix = forked.prefix
    saved = (agent.model, agent.steering)
    agent.model = ThenLiveModel(
        [e.body.response for e in prefix if isinstance(e.body, ModelResponded)],
        agent.model,
        None,
        recorded_fallbacks(prefix),
        recorded_costs(prefix),
    )
    agent.steering = ThenLiveSteering(
        [e.body for e in prefix if isinstance(e.body, SteeringReceived)],
        agent.steering,
        None,
        live_from=at_step,
    )
    # The parent's steps are served whole: its decisions and results, never this spec's.
    agent._served = served_steps(prefix, at_step)
    agent._parent = forked.parent
    try:
        return agent._run(recorded_turns(prefix))
    finally:
        (agent.model, agent.steering) = saved
        agent._served = {}
        agent._parent = None


def _take_record(
    agent: Agent[OutputT], resumed: Plan, served: dict[int, tuple[EventBody, ...]], size: int
) -> None:
    """Give ``agent`` what the record holds: its inserted events, decisions, start and steps."""
    agent._inserts = dict(resumed.inserts)
    agent._decisions = dict(resumed.decisions)
    agent._inputs = {k: list(v) for k, v in resumed.inputs.items()}
    # The prefix is re-run as recorded, its environment included; a continuation that runs
    # somewhere else says where in its own run_resumed.
    agent._started_in = resumed.started.environment
    agent._format = resumed.started.format
    agent._parent = resumed.started.parent
    agent._served = served
    marker = agent._inserts.get(size)
    if (
        isinstance(marker, RunResumed)
        and agent.environment is not None
        and agent.environment != resumed.started.environment
    ):
        agent._inserts[size] = marker.model_copy(update={"environment": agent.environment})


def _give_back(agent: Agent[OutputT], saved: tuple[Any, ...]) -> None:
    """Put back the ports `_go_on` replaced (``saved``) and a fresh run's record state."""
    (agent.model, agent.clock, agent.ids, agent.writer, agent.tool_results) = saved[:5]
    agent.steering = saved[5]
    agent._inserts = {}
    agent._decisions = {}
    agent._inputs = {}
    agent._parent = None
    agent._served = {}
    agent._started_in = agent.environment
    agent._format = FORMAT
    # The run went on in a writer now closed: a next turn goes on from the file.
    agent._going_on = None
