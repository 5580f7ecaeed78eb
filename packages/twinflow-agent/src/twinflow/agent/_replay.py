"""Verified replay: re-run the same agent code against a recorded trace, event by event.

The harness hands the agent factory replaying ports instead of real ones:

- the clock serves each recorded event's ``at``, in order;
- the ids serve the recorded run id;
- the model serves the recorded responses, in order (the requests need no second check: the
  agent records ``model_requested`` before it calls the model, and that event is compared
  like every other);
- the trace sink compares each line the re-run writes with the recorded line at the same
  sequence number, and stops at the first difference;
- steering messages are served from the trace (``ports.steering``), each before the step it
  was recorded at;
- tool results are served from the trace (``recorded`` mode: the tools' code does not run)
  or produced by running the tools again (``live`` mode: a changed tool shows up as a
  divergence).

The re-run happens under the kernel's nondeterminism guard, so code that reaches for the
clock, randomness or the network behind the ports' back fails with `NondeterminismError`
rather than with a confusing divergence.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import AwareDatetime, TypeAdapter

from twinflow.agent._compare import ComparingSink, ComparingWriter, ReplayDivergenceError
from twinflow.agent._errors import (
    RECORDED_AS,
    AgentConfigError,
    AgentError,
    RunPaused,
)
from twinflow.agent._events import (
    Environment,
    EventBody,
    ModelRequested,
    ModelResponded,
    ModelWaited,
    OutputRejected,
    RunFailed,
    RunStarted,
    SteeringReceived,
    ToolReturned,
    TraceEvent,
    UserTurn,
    _Frozen,
)
from twinflow.agent._inputs import recorded_inputs
from twinflow.agent._observe import Steering
from twinflow.agent._policy import RecordedResults
from twinflow.agent._replay_ports import (
    _RecordedSteering,
    _RecordedToolResults,
    _ReplayClock,
    _ReplayIds,
    _ReplayModel,
)
from twinflow.agent._resume import (
    call_id_of,
    recorded_decisions,
    recorded_fallbacks,
    recorded_inserts,
    recorded_tool_results,
    recorded_turns,
    served_calls,
    served_steps,
)
from twinflow.agent._subagent import replaying_children
from twinflow.agent._verify import Trace
from twinflow.kernel import Clock, Ids, NondeterminismError, nondeterminism_guard
from twinflow.trace import TraceSink
from twinflow.vocab import (
    Attempt,
    CallId,
    ChatModel,
    ToolCallPart,
)

if TYPE_CHECKING:
    from twinflow.agent._agent import Agent  # which builds its replays with `replay`

__all__ = [
    "REPLAY_KINDS",
    "ReplayDivergenceError",
    "ReplayMode",
    "ReplayPorts",
    "ReplayResult",
    "clock_readings",
    "replay",
    "served_results",
]

ReplayMode = Literal["recorded", "live"]
"""``recorded``: tool results come from the trace; ``live``: the tools run again."""


class ReplayResult(_Frozen):
    """A replay that matched the recorded trace, event for event."""

    mode: ReplayMode
    """How tool results were obtained."""
    events: int
    """Events compared (all of them)."""
    root: str
    """The Merkle root both traces share."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplayPorts:
    """What the agent factory must build the agent with, to be replayed.

    Pass each to `Agent` under its own name (``model`` first)::

        Agent(ports.model, clock=ports.clock, ids=ports.ids, trace=ports.trace,
              model_label=ports.model_label, tool_results=ports.tool_results,
              environment=ports.environment, ...)

    `replay` refuses an agent built without any of them, naming the one missing.
    """

    model: ChatModel
    """The replaying chat model: the recorded responses, in order."""
    clock: Clock
    """The replaying clock: each recorded event's time, in order."""
    ids: Ids
    """The replaying ids: the recorded run id and tool-call ids."""
    trace: TraceSink
    """The comparing trace sink: each line written is checked against the recorded one."""
    model_label: str
    """The recorded run's model name, for the agent's ``model_label``."""
    tool_results: RecordedResults | None
    """The recorded tool results (``recorded`` mode), or None: the tools run (``live``)."""
    prompt: str
    """The recorded prompt (the harness runs the agent on it)."""
    steering: Steering
    """The recorded steering messages, each before its step: the agent's ``steering``."""
    environment: Environment | None = None
    """The recorded run's environment, for the agent's ``environment``: a replay re-runs the
    record, so its ``run_started`` names where the run was recorded, not where it is replayed
    (compare it with the replaying machine's: `Environment.differences`)."""
    seed: int = 0
    """The recorded run's sampling seed (its configuration's), for the agent's ``seed``: an
    eval's later trials were sampled with their own."""


def _check_built(agent: Agent[Any], ports: ReplayPorts) -> None:
    """Refuse an agent that does not use every replaying port: it would not be a replay."""
    used = {
        "model": agent.model,
        "clock": agent.clock,
        "ids": agent.ids,
        "trace": agent.writer.sink,
        "tool_results": agent.tool_results,
    }
    missing = [name for name, value in used.items() if value is not getattr(ports, name)]
    if agent.config.model != ports.model_label:
        missing.append("model_label")
    if agent.environment != ports.environment:
        missing.append("environment")
    if missing:
        raise AgentConfigError(
            f"the agent the replay factory built does not use the replaying "
            f"{', '.join(f'ports.{name}' for name in missing)}; pass each to Agent "
            "under its own name (see ReplayPorts)"
        )


# What replay reads of a trace, by body kind: only these events are typed (ADR 0136). A
# ``run_resumed`` is read with the event before it, so a trace holding one is typed whole.
_LIVE_KINDS = frozenset(
    {
        "run_started",
        "model_responded",
        "model_fell_back",
        "model_waited",
        "steering_received",
        "user_turn",
        "approval_decided",
        "run_failed",
        "input_requested",
        "input_answered",
    }
)
REPLAY_KINDS = _LIVE_KINDS | {"tool_returned"}
"""The body kinds `replay` reads typed (live mode all but ``tool_returned``): load a trace to
replay with ``Trace.load(path, keep=REPLAY_KINDS)``, and those events are kept as verification
typed them, so replay does not type them again (ADR 0143)."""
# The clock reading opens every event's canonical bytes (the envelope's first member).
_AT_PREFIX = b'{"at":"'
# All of a trace's readings in one call: the same validator as `TraceEvent.at`, per item.
_ATS = TypeAdapter(list[AwareDatetime])


def _events_for(trace: Trace, mode: ReplayMode) -> tuple[TraceEvent, ...]:
    """The typed events replay reads, in order: those of the kinds it serves from."""
    kinds = trace.kinds
    if "run_resumed" in kinds:
        return tuple(trace.events)
    wanted = REPLAY_KINDS if mode == "recorded" else _LIVE_KINDS
    events = trace.events
    return tuple(events[i] for i, kind in enumerate(kinds) if kind in wanted)


def served_results(
    trace: Trace, events: tuple[TraceEvent, ...], encoded: Sequence[bytes]
) -> list[ToolReturned]:
    """`recorded_tool_results` of the trace, a ``tool_called``'s call id read from its bytes
    (`call_id_of`: nothing else of it is needed, so it is not typed)."""
    if len(events) == trace.size:  # typed whole already (a resumed run's trace)
        return recorded_tool_results(events)
    returned = iter(e.body for e in events if isinstance(e.body, ToolReturned))
    called: set[str] = set()
    results: list[ToolReturned] = []
    for index, kind in enumerate(trace.kinds):
        if kind == "tool_called":
            called.add(call_id_of(encoded[index]))
        elif kind == "tool_returned":
            body = next(returned)
            if body.result.call_id in called:
                results.append(body)
    return results


def clock_readings(trace: Trace, encoded: Sequence[bytes]) -> list[datetime]:
    """Each event's ``at``, validated from its bytes as typing the event would."""
    stamps = []
    start = len(_AT_PREFIX)
    for event in encoded:
        end = event.find(b'"', start)
        if not event.startswith(_AT_PREFIX) or end < 0:
            return [typed.at for typed in trace.events]
        stamps.append(event[start:end].decode("ascii"))
    return _ATS.validate_python(stamps)


def _refusals(failed: RunFailed | None) -> bool:
    """Whether the recorded run failed because its model never gave a valid reply."""
    return failed is not None and failed.error_type == RECORDED_AS["invalid_reply"]


def _refused_replies(
    events: tuple[TraceEvent, ...], failed: RunFailed | None
) -> tuple[Attempt, ...]:
    """The replies a model refused as its last request, when that is why the run failed."""
    if failed is None or not _refusals(failed):
        return ()
    refused: list[Attempt] = []
    for event in reversed(events[:-1]):
        body = event.body
        if isinstance(body, OutputRejected):
            refused.append(Attempt(number=body.attempt, emission=body.emission, error=body.error))
        elif isinstance(body, ModelRequested):
            return tuple(reversed(refused))
        else:
            return ()
    return ()


def _call_ids(events: tuple[TraceEvent, ...]) -> Iterator[CallId]:
    for event in events:
        body = event.body
        if isinstance(body, ModelResponded):
            # The parts, not `Message.tool_calls`: that builds a tuple per message.
            yield from (p.id for p in body.response.message.parts if isinstance(p, ToolCallPart))


def _replay_ports(
    trace: Trace,
    mode: ReplayMode,
    events: tuple[TraceEvent, ...],
    sink: ComparingSink,
    failed: RunFailed | None,
    encoded: list[bytes],
    served: int = 0,
) -> ReplayPorts:
    """The ports that serve the record to the re-run, and compare what it writes (past the
    ``served`` results of a fork's steps taken from its parent, which the loop serves)."""
    started = events[0].body
    assert isinstance(started, RunStarted)  # kinds[0] says so, and it is always wanted
    return ReplayPorts(
        model=_ReplayModel(
            [
                e.body.response if isinstance(e.body, ModelResponded) else e.body
                for e in events
                if isinstance(e.body, ModelResponded | ModelWaited)
            ],
            failed,
            _refused_replies(tuple(trace.events), failed) if _refusals(failed) else (),
            recorded_fallbacks(events),
            [e.body.cost for e in events if isinstance(e.body, ModelResponded)],
        ),
        clock=_ReplayClock(clock_readings(trace, encoded)),
        ids=_ReplayIds(
            started.run_id,
            list(_call_ids(events)),
            [e.body.jitter for e in events if isinstance(e.body, ModelWaited)],
        ),
        trace=sink,
        model_label=started.config.model,
        tool_results=(
            _RecordedToolResults(served_results(trace, events, encoded)[served:])
            if mode == "recorded"
            else None
        ),
        prompt=started.prompt,
        steering=_RecordedSteering(
            [e.body for e in events if isinstance(e.body, SteeringReceived)]
        ),
        environment=started.environment,
        seed=started.config.settings.seed or 0,
    )


_GUARDED: ContextVar[bool] = ContextVar("twinflow_replay_guarded", default=False)
"""Whether a replay runs already (a sub-agent's child is replayed inside its parent's guard:
the guard is not re-entrant, and the outer one already covers the child)."""


@contextlib.contextmanager
def _guard() -> Iterator[Sequence[NondeterminismError]]:
    """The nondeterminism guard, once per replay tree; yields where its refusals go."""
    if _GUARDED.get():
        yield ()
        return
    token = _GUARDED.set(True)
    try:
        with nondeterminism_guard() as guard:
            yield guard.violations
    finally:
        _GUARDED.reset(token)


def _rerun(
    agent: Agent[Any],
    turns: tuple[str | UserTurn, ...],
    sink: ComparingSink,
    failed: RunFailed | None,
) -> None:
    """Run the agent under the nondeterminism guard; raise what the comparison found."""
    with _guard() as violations:
        try:
            # Each recorded user turn, in order: one call for a run of one turn.
            agent._run(turns)
        except NondeterminismError:
            raise
        except RunPaused:
            # A run that waits for a person stops where its trace does; missing or extra
            # events are reported by the caller like any others.
            pass
        except Exception:
            # A recorded failure replays as the same failure; anything else is reported as
            # the divergence it caused (or, if events still matched, re-raised here).
            if sink.divergence is None and failed is None:
                raise
    if violations:
        raise violations[0]
    if sink.divergence is not None:
        raise sink.divergence


def _on_record(
    agent: Agent[Any],
    sink: ComparingSink,
    trace: Trace,
    events: tuple[TraceEvent, ...],
    served: dict[int, tuple[EventBody, ...]],
) -> None:
    """Set ``agent`` to write into the comparison and to take what the record holds."""
    first = events[0].body
    assert isinstance(first, RunStarted)  # `replay` checked it
    # Events re-run as recorded are compared by their bytes and take their recorded digests:
    # no line is framed or hashed again, and the checkpoint is the one load computed.
    agent.writer = ComparingWriter(sink, trace, fsync=agent.writer.fsync)
    # Where the record went on past a resume, and what people decided on calls that waited.
    agent._inserts = recorded_inserts(events)
    agent._decisions = recorded_decisions(events)
    agent._inputs = recorded_inputs(events)
    agent._format = first.format  # as recorded: absent in runs recorded before formats
    agent._parent = first.parent
    agent._served = served


def _rerun_with_children(
    agent: Agent[Any],
    trace: Trace,
    mode: ReplayMode,
    directory: Path | None,
    events: tuple[TraceEvent, ...],
    sink: ComparingSink,
    failed: RunFailed | None,
) -> None:
    """`_rerun` the recorded turns; live, with the sub-agent runs the trace records replayed
    from their traces in ``directory`` (a child's divergence is raised as the cause)."""
    children: list[ToolReturned] = []
    if mode == "live" and "tool_returned" in trace.kinds:
        children = [
            body
            for i, kind in enumerate(trace.kinds)
            if kind == "tool_returned"
            and isinstance(body := trace.events[i].body, ToolReturned)
            and body.child is not None
        ]
    with replaying_children(directory, children) as live:
        try:
            _rerun(agent, recorded_turns(events), sink, failed)
        except ReplayDivergenceError:
            # A child that diverged made the parent's result differ: the child's is the cause.
            if live is not None and live.divergence is not None:
                raise live.divergence from None
            raise


def _stopped_early(trace: Trace, written: int, encoded: list[bytes]) -> ReplayDivergenceError:
    """The error of a re-run that wrote only ``written`` of the recorded events."""
    return ReplayDivergenceError(
        f"the re-run stopped after {written} events; the recorded trace goes on with "
        f"event {written} ({trace.kinds[written]})",
        seq=written,
        expected=json.loads(encoded[written]),
        actual=None,
    )


def replay(
    trace: Trace,
    build: Callable[[ReplayPorts], Agent[Any]],
    *,
    mode: ReplayMode = "recorded",
    directory: Path | None = None,
) -> ReplayResult:
    """Re-run the agent ``build`` makes against ``trace`` and compare every event.

    Args:
        trace: The recorded trace (`Trace.load` verified it).
        build: Makes the agent from the replaying ports; it must pass every one of them to
            `Agent` (see `ReplayPorts`), and configure it exactly as the recorded run was
            (same tools, policy, output type, settings); ``ports.steering`` too when the run
            was steered.
        mode: ``recorded`` serves tool results from the trace; ``live`` runs the tools.
        directory: Where the trace file is: a live replay replays the sub-agent runs it
            records from their traces beside it (recorded mode serves their results).

    Returns:
        The result, when every event matched.

    Raises:
        ReplayDivergenceError: The first event that differs, or the first recorded event the
            re-run did not produce.
        NondeterminismError: Replayed code reached time, randomness or the network from
            outside the kernel (even if that code caught the error).
        AgentConfigError: ``build`` made an agent that does not use every replaying port.
        AgentError: The trace does not start with ``run_started``.
    """
    if not trace.kinds or trace.kinds[0] != "run_started":
        raise AgentError("a replayable trace starts with run_started; this one does not")
    events = _events_for(trace, mode)
    if trace.kinds.count("run_started") > 1:  # the first is kinds[0]
        raise AgentError("the trace holds several runs; replay replays one run per trace")
    last = trace.events[-1].body
    failed = last if isinstance(last, RunFailed) else None
    # The verified event bytes the re-run is compared with, read out of the buffer once.
    encoded = list(trace.encoded)
    sink = ComparingSink(encoded, trace.digests)
    first = events[0].body
    assert isinstance(first, RunStarted)  # kinds[0] says so, and it is always wanted
    # A fork: its first steps were served from its parent, and replay serves them again.
    served = {} if first.parent is None else served_steps(trace.events, first.parent.step)
    ports = _replay_ports(trace, mode, events, sink, failed, encoded, served_calls(served))
    agent = build(ports)
    _check_built(agent, ports)
    _on_record(agent, sink, trace, events, served)
    _rerun_with_children(agent, trace, mode, directory, events, sink, failed)
    if sink.written < trace.size:
        raise _stopped_early(trace, sink.written, encoded)
    # Every event matched: the re-run's checkpoint is the one load computed.
    return ReplayResult(mode=mode, events=trace.size, root=trace.checkpoint().root)
