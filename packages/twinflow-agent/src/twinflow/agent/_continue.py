"""Resume and fork: an agent's loop re-run over a recorded prefix, then live.

Both swap the agent's ports for ones that serve the record (`twinflow.agent._resume`) for the
length of one run, and put the agent's own back afterwards: the loop itself does not know it
is continuing a run.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import TYPE_CHECKING, TypeVar

from twinflow.agent._events import (
    FORMAT,
    ModelResponded,
    ModelWaited,
    RunResumed,
    SteeringReceived,
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
    served_calls,
    served_steps,
)
from twinflow.agent._verify import Trace
from twinflow.trace import FileTraceSink, repair_trace

if TYPE_CHECKING:
    from twinflow.agent._agent import Agent
    from twinflow.agent._run import RunResult

__all__ = ["fork_run", "resume_run"]

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
    agent._inserts = dict(resumed.inserts)
    agent._decisions = dict(resumed.decisions)
    # The prefix is re-run as recorded, its environment included; a continuation that runs
    # somewhere else says where in its own run_resumed.
    agent._started_in = resumed.started.environment
    agent._format = resumed.started.format
    agent._parent = forked
    agent._served = served
    marker = agent._inserts[size]
    if (
        isinstance(marker, RunResumed)
        and agent.environment is not None
        and agent.environment != resumed.started.environment
    ):
        agent._inserts[size] = marker.model_copy(update={"environment": agent.environment})
    try:
        result = agent._run(resumed.started.prompt)
        return result.model_copy(update={"trace_path": os.fspath(trace)})
    finally:
        try:
            agent.writer.close()
        finally:
            (agent.model, agent.clock, agent.ids, agent.writer, agent.tool_results) = saved[:5]
            agent.steering = saved[5]
            agent._inserts = {}
            agent._decisions = {}
            agent._parent = None
            agent._served = {}
            agent._started_in = agent.environment
            agent._format = FORMAT


def fork_run(
    agent: Agent[OutputT], parent: str | os.PathLike[str], at_step: int
) -> RunResult[OutputT]:
    """`Agent.fork`: the parent's steps before ``at_step`` served from its trace, then live."""
    loaded = Trace.load(parent)
    forked = plan_fork(loaded, os.fspath(parent), at_step)
    prefix = forked.prefix
    saved = (agent.model, agent.steering)
    agent.model = ThenLiveModel(
        [e.body.response for e in prefix if isinstance(e.body, ModelResponded)], agent.model, None
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
        return agent._run(forked.started.prompt)
    finally:
        (agent.model, agent.steering) = saved
        agent._served = {}
        agent._parent = None
