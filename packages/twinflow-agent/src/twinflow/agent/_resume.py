"""Continuing a run from its trace: re-run the recorded prefix against the record, then go live.

The trace is the run's state. `Agent.resume` re-runs the same code against the recorded events
exactly as replay's recorded mode does (the model's responses, the tools' results, the clock
readings and the run id are served from the trace; every event the re-run writes is compared,
byte for byte, with the recorded one), and only once every recorded line has been matched do
the real ports take over: the next event is ``run_resumed``, appended to the same file through
the same writer, so the chain goes on unbroken and the continued trace extends what was on disk.

A port asked to act live before the prefix is matched (the re-run asks the model, or runs a
tool, where the record has nothing) is a divergence: nothing is done twice and nothing is done
that the prefix did not lead to.
"""

from __future__ import annotations

import json
import operator
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from pydantic import JsonValue

from twinflow._base._errors import FileWriteError
from twinflow.agent._approval import shared_id
from twinflow.agent._compare import _LONGEST_EVENT, ComparingSink, ReplayDivergenceError
from twinflow.agent._errors import CannotResume
from twinflow.agent._events import (
    ApprovalDecided,
    ApprovalRequested,
    EventBody,
    ForkParent,
    InputAnswered,
    InputRequested,
    ModelFellBack,
    ModelRequested,
    ModelResponded,
    ModelWaited,
    PolicyDecided,
    ReplyCost,
    RunFailed,
    RunFinished,
    RunResumed,
    RunStarted,
    SteeringReceived,
    ToolCalled,
    ToolReturned,
    TraceEvent,
    UserTurn,
    _Frozen,
)
from twinflow.agent._inputs import (
    CALLBACK,
    answer_problem,
    input_pause,
    input_waits,
    recorded_inputs,
    request_name,
)
from twinflow.agent._observe import Steering, poll_steering
from twinflow.agent._retry import recorded_refusal
from twinflow.agent._trace import TraceWriter
from twinflow.agent._verify import Trace
from twinflow.kernel import Clock, Ids, TransportError
from twinflow.trace import Checkpoint, FileTraceSink, FsyncPolicy, TraceSink
from twinflow.trace._merkle import leaf_hash
from twinflow.trace._repair import repair_trace
from twinflow.vocab import CallId, ChatModel, ModelRequest, ModelResponse, RunId, ToolCallPart

__all__ = [
    "Decision",
    "Paused",
    "record_decisions",
    "recorded_decisions",
    "recorded_inserts",
    "recorded_tool_results",
    "recorded_turns",
]


class Decision(_Frozen):
    """A person's decision on a call waiting for approval, for `Agent.resume`."""

    call_id: CallId
    """The waiting call (its ``approval_requested`` event)."""
    approve: bool
    """True to let it run, False to deny it (the model sees the denial and the reason)."""
    by: str = "unnamed"
    """Who decided."""
    reason: str = ""
    """Why."""
    signed_note: str | None = None
    """The decision's signed note (see `ApprovalDecided.signed_note`), if signed."""
    answer: dict[str, JsonValue] | None = None
    """For a call waiting on an MCP server's form (``input_requested``): the form's values,
    checked against its schema (``approve`` False declines the form instead)."""
    request: str | None = None
    """Which of the call's waiting requests ``answer`` is for, by the server's key; None when
    only one waits."""


class Paused(_Frozen):
    """A run that stopped for a person: the calls it waits on, and how far it got."""

    run_id: RunId
    """The run."""
    pending: tuple[ApprovalRequested | InputRequested, ...]
    """The calls waiting for a decision, in the order the model made them; or the requests
    for input an MCP server made during a call (``input_requested``), waiting for answers."""
    events: int
    """Events in the trace when it stopped."""


# Failures that say nothing about the run itself, by recorded name and ``reason`` tag: the same
# request may well succeed later. A transport error that is not named here as passing (a body
# past the size limit or a host the network switch refuses would be met again, and a failure
# recorded without its reason could be either) stops a resume. Names from traces written when
# each transport failure was a class of its own say their reason.
_PASSING_REASONS: dict[str, frozenset[str | None]] = {
    TransportError.__name__: frozenset({"connect", "timeout", "status", "decode"}),
    FileWriteError.__name__: frozenset({"write", "locked", "busy"}),
    TimeoutError.__name__: frozenset({None}),
    # Ctrl-C: a person stopped the run, as SIGTERM would have; it goes on where it stopped.
    KeyboardInterrupt.__name__: frozenset({None}),
    **dict.fromkeys(
        ("ConnectError", "TransportTimeout", "HTTPStatusError", "ResponseDecodeError"),
        frozenset({None}),
    ),
}


def passing_failure(failed: RunFailed) -> bool:
    """Whether a recorded failure can pass on its own (a dropped connection, a timeout, a full
    disk, a run interrupted with Ctrl-C), read from its recorded name and reason."""
    return failed.reason in _PASSING_REASONS.get(failed.error_type, frozenset())


def _failure_name(failed: RunFailed) -> str:
    return failed.error_type if failed.reason is None else f"{failed.error_type} ({failed.reason})"


def recorded_inserts(events: Iterable[TraceEvent]) -> dict[int, EventBody]:
    """Events a re-run writes where the record has them, not where its code reaches them.

    A ``run_resumed`` marks where an earlier resume went live, and a ``run_failed`` just before
    it is the failure that resume continued past: neither is produced by the loop's code at
    that point, so replays and later resumes put them back at their recorded positions.
    """
    inserts: dict[int, EventBody] = {}
    previous: TraceEvent | None = None
    for event in events:
        if isinstance(event.body, RunResumed):
            inserts[event.seq] = event.body
            if previous is not None and isinstance(previous.body, RunFailed):
                inserts[previous.seq] = previous.body
        previous = event
    return inserts


def recorded_decisions(events: Iterable[TraceEvent]) -> dict[str, ApprovalDecided]:
    """The decisions recorded in a trace, by call id."""
    return {e.body.call_id: e.body for e in events if isinstance(e.body, ApprovalDecided)}


def recorded_tool_results(events: Iterable[TraceEvent]) -> list[ToolReturned]:
    """The results of the calls that ran (a denial has no ``tool_called``), in order."""
    called: set[str] = set()
    results: list[ToolReturned] = []
    for event in events:
        body = event.body
        if isinstance(body, ToolCalled):
            called.add(body.call_id)
        elif isinstance(body, ToolReturned) and body.result.call_id in called:
            results.append(body)
    return results


_SERVED = (ApprovalRequested, ApprovalDecided, PolicyDecided, ToolCalled, ToolReturned)


def served_steps(events: Iterable[TraceEvent], before: int) -> dict[int, tuple[EventBody, ...]]:
    """What each step before ``before`` decided and ran, after its reply, by step: the
    approvals asked and given, the policy's decisions, the calls and their results, in order
    (a resume's own events between them are not the step's)."""
    steps: dict[int, list[EventBody]] = {}
    step = 0
    for event in events:
        body = event.body
        if isinstance(body, ModelResponded):
            step = body.step
        elif isinstance(body, _SERVED) and 0 < step < before:
            steps.setdefault(step, []).append(body)
    return {k: tuple(v) for k, v in steps.items()}


def served_calls(served: dict[int, tuple[EventBody, ...]]) -> int:
    """The calls that ran in served steps: the first recorded results are theirs."""
    return sum(isinstance(b, ToolCalled) for bodies in served.values() for b in bodies)


def pending_approvals(events: tuple[TraceEvent, ...]) -> tuple[ApprovalRequested, ...]:
    """The calls whose approval was asked for and not yet decided."""
    decided = recorded_decisions(events)
    return tuple(
        e.body
        for e in events
        if isinstance(e.body, ApprovalRequested) and e.body.call_id not in decided
    )


@dataclass(frozen=True, slots=True)
class Plan:
    """What a resume re-runs, writes where, and why."""

    events: tuple[TraceEvent, ...]
    """The typed events the resume serves from (`RESUME_KINDS`; all, past an earlier resume)."""
    recorded: Sequence[bytes]
    """The recorded events' bytes, as the trace verified them (the re-run is compared with them)."""
    digests: Sequence[str]
    """The recorded events' digests, as load checked them against those bytes."""
    gate: int
    """Lines the re-run must have matched before a port may act live."""
    inserts: dict[int, EventBody]
    decisions: dict[str, ApprovalDecided]
    started: RunStarted
    inputs: dict[str, list[InputRequested | InputAnswered]] = field(default_factory=dict)
    """Each call's recorded requests for input and answers (new answers last), by call id."""


RESUME_KINDS = frozenset(
    {
        "run_started",
        "model_responded",
        "model_fell_back",
        "model_waited",
        "steering_received",
        "user_turn",
        "approval_requested",
        "approval_decided",
        "run_failed",
        "tool_returned",
        "input_requested",
        "input_answered",
    }
)
"""The body kinds a resume reads typed: load a trace to resume keeping these, and they are
typed once, at load (the other events' bytes are compared, and their times read from them)."""


def served_events(trace: Trace) -> tuple[TraceEvent, ...]:
    """The typed events a resume serves from: those of `RESUME_KINDS`, or every event of a
    trace that was resumed before (its ``run_resumed`` is put back with the event before it)."""
    if "run_resumed" in trace.kinds:
        return tuple(trace.events)
    events = trace.events
    return tuple(events[i] for i, kind in enumerate(trace.kinds) if kind in RESUME_KINDS)


def _why(last: EventBody, decided: bool) -> str:
    """Why a run is continued, from its last event and whether decisions were given."""
    if isinstance(last, RunFailed):
        if last.error_type == KeyboardInterrupt.__name__:
            return "the run was interrupted (Ctrl-C), a pause"
        return f"the run failed with {_failure_name(last)}, which can pass"
    if isinstance(last, InputRequested | InputAnswered):
        return f"answers to the form an MCP server asked for during call {last.call_id}"
    if decided:
        return "decisions on calls waiting for approval"
    return "the trace ended without a terminal event"


# A verified ``tool_called`` event's bytes: its clock reading, then its body's members in
# canonical order, ``arguments`` (an object) first and ``call_id`` (a string) next. A quote
# inside a JSON string is escaped, so the first unescaped ``"body":{"arguments":`` is the body's.
_ARGUMENTS = '"body":{"arguments":'
_CALL_ID = ',"call_id":'
_scan = json.JSONDecoder().raw_decode


def call_id_of(event: bytes) -> str:
    """The call id of a verified ``tool_called`` event, from its canonical bytes: the arguments
    are scanned past and the id read, not the whole event parsed (it was, at load)."""
    text = event.decode()
    start = text.find(_ARGUMENTS)
    if start > 0:
        _, end = _scan(text, start + len(_ARGUMENTS))
        if text.startswith(_CALL_ID, end):
            call_id, _ = _scan(text, end + len(_CALL_ID))
            if type(call_id) is str:
                return call_id
    # Not laid out as the event type writes it today: the whole event says.
    call_id = json.loads(event)["body"]["call_id"]
    assert type(call_id) is str  # load typed it as a ToolCalled
    return call_id


def in_flight(trace: Trace) -> list[tuple[int, ToolCalled]]:
    """The calls the trace records as called (``tool_called``) with no ``tool_returned`` of
    their id after them, anywhere in it, each with its seq: their effect may have happened.

    A result of another call's id does not count, nor one for an id called twice that answers
    only one of the two: each ``tool_returned`` answers the earliest open call of its id.
    """
    encoded = trace.encoded
    open_calls: dict[str, list[int]] = {}
    for index, kind in enumerate(trace.kinds):
        if kind == "tool_called":
            open_calls.setdefault(call_id_of(encoded[index]), []).append(index)
        elif kind == "tool_returned":
            body = trace.events[index].body
            assert isinstance(body, ToolReturned)  # its kind says so
            waiting = open_calls.get(body.result.call_id)
            if waiting:
                waiting.pop(0)
    dangling: list[tuple[int, ToolCalled]] = []
    for index in sorted(i for seqs in open_calls.values() for i in seqs):
        body = trace.events[index].body
        assert isinstance(body, ToolCalled)  # its kind says so
        dangling.append((index, body))
    return dangling


def _trailing(trace: Trace) -> int:
    """How many events end the trace that no step's code writes: a failure continued past and
    the ``run_resumed`` of each earlier resume (put back at their places, `recorded_inserts`),
    and a last ``run_failed``. The re-run matches the lines before them, then acts live."""
    count = 0
    for kind in reversed(trace.kinds):
        if kind not in ("run_failed", "run_resumed"):
            break
        count += 1
    return count


def _called_at(trace: Trace, call_id: str) -> int:
    """The seq of the last ``tool_called`` of ``call_id``."""
    encoded = trace.encoded
    return max(
        i
        for i, kind in enumerate(trace.kinds)
        if kind == "tool_called" and call_id_of(encoded[i]) == call_id
    )


def _check_in_flight(trace: Trace, path: str, repeat_safe: frozenset[str]) -> ToolCalled | None:
    """The call a resume will run again (left without a result at the end of the trace, its
    tool safe to repeat), or None; `CannotResume` for any other call left without a result."""
    dangling = in_flight(trace)
    if not dangling:
        return None
    unsafe = [(seq, call) for seq, call in dangling if call.tool not in repeat_safe]
    if unsafe:
        names = ", ".join(f"{c.call_id} ({c.tool}, seq {seq})" for seq, c in unsafe)
        tools = ", ".join(dict.fromkeys(repr(c.tool) for _, c in unsafe))
        raise CannotResume(
            f"{path}: the run stopped inside tool call {names} with no result recorded: it may "
            f"have taken effect, so it is not run again; declare {tools} safe to repeat (policy "
            "repeat_safe) if running it twice is harmless, or fork the run before that step",
            reason="in_flight",
        )
    # Only the last call of the prefix can be run again: a re-run that has matched every line
    # before it runs the tool live, and the run goes on from its result.
    end = trace.size - 1 - _trailing(trace)
    last_seq, last = dangling[-1]
    if len(dangling) > 1 or last_seq != end:
        seq, call = dangling[0]
        raise CannotResume(
            f"{path}: tool call {call.call_id} ({call.tool}, seq {seq}) has no result, yet the "
            "run went on past it: no run writes such a trace, so it is not continued",
            reason="in_flight",
        )
    return last


def plan(
    trace: Trace,
    path: str,
    *,
    repeat_safe: frozenset[str],
    decisions: Iterable[Decision],
) -> Plan:
    """Check the trace can be continued and say how; raise `CannotResume` if not."""
    if not trace.size or trace.kinds[0] != "run_started":
        raise CannotResume(f"{path}: does not start with run_started; it is not a run's trace")
    events = served_events(trace)
    started = events[0].body
    assert isinstance(started, RunStarted)  # kinds[0] says so
    size = trace.size
    last = trace.events[size - 1].body
    if isinstance(last, RunFinished):
        raise CannotResume(
            f"{path}: the run already finished (run_finished at seq {size - 1}); "
            "there is nothing to resume: send it another turn (twinflow run SPEC --continue "
            f"{path} --prompt TEXT), or fork it to try another continuation"
        )
    if isinstance(last, RunFailed) and not passing_failure(last):
        raise CannotResume(
            f"{path}: the run failed with {_failure_name(last)} (seq {size - 1}), a failure "
            "a resume would meet again (or one whose cause the trace does not record): remove "
            "its cause and fork the run at a step before it (twinflow fork --at-step N)"
        )
    if "input_answered" in trace.kinds:
        input_waits(trace, path)  # refuses an answer twice, or to nothing asked
    asking = input_pause(trace)
    dangling = None if asking is not None else _check_in_flight(trace, path, repeat_safe)
    recorded = recorded_decisions(events)
    new = check_decisions(events, decisions, path, asking or ())
    inputs = recorded_inputs(events)
    for decided in new:
        if isinstance(decided, InputAnswered):
            inputs.setdefault(decided.call_id, []).append(decided)
        else:
            recorded[decided.call_id] = decided
    gate = size - _trailing(trace)
    if asking is not None:
        unanswered = [
            r
            for r in asking
            if not any(isinstance(d, InputAnswered) and d.key == r.key for d in new)
        ]
        if unanswered:
            names = ", ".join(
                request_name(r.call_id, r.round, r.key) + f" ({r.tool}: {r.message[:200]!r})"
                for r in unanswered
            )
            raise CannotResume(
                f"{path}: the run waits for an answer to {names}: answer first (twinflow "
                f"approve {path} --answer JSON --trust-spec, or --deny to decline)",
                reason="paused",
            )
        # The call is sent again from its start (the server kept nothing: its state may have
        # expired): the re-run may act live once it has matched the call's ``tool_called``.
        dangling = in_flight(trace)[-1][1]
        gate = _called_at(trace, dangling.call_id) + 1
    inserts = recorded_inserts(events)
    if isinstance(last, RunFailed):
        inserts[size - 1] = last
    inserts[size] = RunResumed(
        why=_why(last, bool(new)),
        prefix_size=size,
        prefix_root=trace.checkpoint().root,
        repeated_call=None if dangling is None else dangling.call_id,
    )
    return Plan(
        events=events,
        recorded=list(trace.encoded),  # read out of the buffer once (an index makes a copy)
        digests=trace.digests,
        gate=gate,
        inserts=inserts,
        decisions=recorded,
        started=started,
        inputs=inputs,
    )


class Gate:
    """Opens once the re-run has matched every recorded line it is to produce."""

    def __init__(self, sink: ResumeSink, at: int) -> None:
        self._sink = sink
        self._at = at

    @property
    def open(self) -> bool:
        """Whether the prefix is matched."""
        return self._sink.written >= self._at

    def check(self, what: str) -> None:
        """Refuse to act live before the prefix is matched: the code no longer reproduces it."""
        if self.open:
            return
        seq = self._sink.written
        expected = json.loads(self._sink.recorded[seq])
        raise ReplayDivergenceError(
            f"the re-run {what} after {seq} events, where the recorded prefix goes on with event "
            f"{seq} ({expected['body']['kind']}): the code no longer reproduces the trace",
            seq=seq,
            expected=expected,
            actual=None,
        )


class ResumeSink:
    """Compares the recorded prefix line by line, then appends to the trace file."""

    def __init__(
        self, recorded: Sequence[bytes], live: TraceSink, digests: Sequence[str] = ()
    ) -> None:
        self.recorded = recorded
        self._compare = ComparingSink(recorded, digests)
        self._live = live
        self.written = 0

    def matched(self, event: bytes) -> str | None:
        """The recorded digest of the next prefix event if ``event`` is its bytes (it then
        counts as written), else None: the writer frames the line and `write` compares it."""
        if self.written >= len(self.recorded):
            return None
        digest = self._compare.matched(event)
        if digest is not None:
            self.written += 1
        return digest

    def write(self, line: bytes) -> None:
        if self._compare.divergence is not None:
            # Off the record: whatever the re-run writes now (its run_failed) is not the run's.
            return
        if self.written < len(self.recorded):
            self._compare.write(line)
        else:
            self._live.write(line)
        self.written += 1

    def flush(self, *, durable: bool) -> None:
        if self._compare.divergence is None and self.written > len(self.recorded):
            self._live.flush(durable=durable)

    def close(self) -> None:
        self._live.close()


class ResumeWriter(TraceWriter):
    """A resume's writer: each event the re-run writes as recorded takes the recorded digest.

    As a replay's writer does (`ComparingWriter`), it compares the event's bytes with the
    recorded ones before any line is framed: load checked the recorded digest against those
    bytes, so the event is not hashed or framed again; its leaf joins the tree, which the
    continuation grows on. Past the prefix, lines are framed and appended as by any writer.
    """

    def __init__(self, sink: ResumeSink, *, fsync: FsyncPolicy = "step") -> None:
        """Write through ``sink``, which holds the prefix's bytes and digests."""
        super().__init__(sink, fsync=fsync)
        self._resume = sink

    def _put(self, event: bytes, kind: str) -> str:
        # An event too long for its line is refused by the framing writer, as in the original run.
        digest = self._resume.matched(event) if len(event) <= _LONGEST_EVENT else None
        if digest is None:
            return super()._put(event, kind)
        self._tree.append_hash(leaf_hash(bytes.fromhex(digest)))
        return digest


Fallbacks = tuple[tuple[ModelFellBack, ...], str | None]
"""A model call's recorded switches (``model_fell_back``) and the label that answered it."""


def recorded_fallbacks(events: Sequence[TraceEvent]) -> list[Fallbacks]:
    """Each recorded model call's fallback switches and answering label, in order: one per
    ``model_responded``, and one more for switches before a call that failed for good."""
    calls: list[Fallbacks] = []
    pending: list[ModelFellBack] = []
    for event in events:
        body = event.body
        if isinstance(body, ModelFellBack):
            pending.append(body)
        elif isinstance(body, ModelResponded):
            calls.append((tuple(pending), body.answered_by))
            pending = []
    if pending:
        calls.append((tuple(pending), None))
    return calls


def recorded_costs(events: Sequence[TraceEvent]) -> list[ReplyCost | None]:
    """Each recorded reply's cost, in order (None where its price was unknown)."""
    return [e.body.cost for e in events if isinstance(e.body, ModelResponded)]


class ThenLiveModel:
    """The recorded responses, in order; then the live model, once the prefix is matched.

    A fallback list's switches are served with each recorded response (`take_fallbacks`), and
    asked of the live model after."""

    def __init__(
        self,
        recorded: Sequence[ModelResponse | ModelWaited],
        live: ChatModel,
        gate: Gate | None,
        fallbacks: list[Fallbacks] | None = None,
        costs: Sequence[ReplyCost | None] = (),
    ) -> None:
        self._recorded = iter(recorded)
        self._fallbacks = iter(fallbacks or ())
        self._costs = iter(costs)
        self._cost: ReplyCost | None = None
        self._live = live
        self._gate = gate
        self._served = False

    def request(self, request: ModelRequest) -> ModelResponse:
        response = next(self._recorded, None)
        self._served = response is not None
        if isinstance(response, ModelWaited):
            raise recorded_refusal(response)  # the record waited here: so does the re-run
        if response is not None:
            self._cost = next(self._costs, None)
            return response
        if self._gate is not None:
            self._gate.check("asked the model")
        return self._live.request(request)

    def take_cost(self) -> tuple[bool, ReplyCost | None]:
        """Whether the last response was a recorded one, and its recorded cost."""
        return self._served, self._cost

    def take_fallbacks(self) -> Fallbacks:
        """The switches of the last request: recorded ones while serving, then the live model's."""
        if self._served:
            return next(self._fallbacks, ((), None))
        take = getattr(self._live, "take_fallbacks", None)
        if take is None:
            return (), None
        switches, answered_by = take()
        return tuple(switches), answered_by


class ThenLiveClock:
    """Each recorded event's time, in order; then the live clock."""

    def __init__(
        self, ats: list[datetime], live: Clock, real_sleep: Callable[[float], None]
    ) -> None:
        self._ats: Iterator[datetime] = iter(ats)
        self._live = live
        self._real_sleep = real_sleep

    def now(self) -> datetime:
        at = next(self._ats, None)
        return self._live.now() if at is None else at

    def monotonic(self) -> float:
        return self._live.monotonic()

    def sleep(self, seconds: float) -> None:
        """Nothing while recorded times remain (a recorded wait); then the live clock's."""
        if operator.length_hint(self._ats) == 0:
            getattr(self._live, "sleep", self._real_sleep)(seconds)


class RecordedRunIds:
    """The recorded run id; call ids from the live port."""

    def __init__(self, run_id: RunId, live: Ids, jitters: Sequence[float] = ()) -> None:
        self._run_id = run_id
        self._live = live
        self._jitters = iter(jitters)

    def jitter(self) -> float:
        """The recorded retry jitters, in order; then the live port's (0.5 without one)."""
        recorded = next(self._jitters, None)
        if recorded is not None:
            return recorded
        draw = getattr(self._live, "jitter", None)
        return 0.5 if draw is None else float(draw())

    def run_id(self) -> RunId:
        return self._run_id

    def call_id(self) -> CallId:
        return self._live.call_id()


class ThenLiveResults:
    """The recorded results of the calls that returned; past the prefix, None: the tool runs."""

    def __init__(self, returned: list[ToolReturned], gate: Gate) -> None:
        self._returned = iter(returned)
        self._gate = gate

    def __call__(self, call: ToolCallPart) -> ToolReturned | None:
        returned = next(self._returned, None)
        if returned is not None:
            return returned
        self._gate.check(f"ran tool {call.name!r} (call {call.id})")
        return None


class ThenLiveSteering:
    """The recorded steering messages, each before its step; then the live source, if any."""

    def __init__(
        self,
        received: list[SteeringReceived],
        live: Steering | None,
        gate: Gate | None,
        live_from: int = 1,
    ) -> None:
        """Serve ``received``; the live source only once ``gate`` is open and from step
        ``live_from`` on (a fork's served steps get their recorded steering only)."""
        self._by_step: dict[int, list[str]] = {}
        for event in received:
            self._by_step.setdefault(event.step, []).append(event.text)
        self._live = live
        self._gate = gate
        self._live_from = live_from

    def __call__(self, step: int) -> list[str]:
        recorded = self._by_step.pop(step, None)
        if recorded is not None:
            return recorded
        if step < self._live_from:
            return []
        if self._live is None or (self._gate is not None and not self._gate.open):
            return []
        return poll_steering(self._live, step)


def _decided(decision: Decision) -> ApprovalDecided:
    return ApprovalDecided(
        call_id=decision.call_id,
        decision="approve" if decision.approve else "deny",
        by=decision.by,
        reason=decision.reason or ("approved" if decision.approve else "denied"),
        signed_note=decision.signed_note,
    )


def check_decisions(
    events: tuple[TraceEvent, ...],
    decisions: Iterable[Decision],
    path: str,
    inputs: tuple[InputRequested, ...] = (),
) -> list[ApprovalDecided | InputAnswered]:
    """The decisions as events, each for a call that waits (for approval, or for an answer to
    one of ``inputs``, the requests waiting); `CannotResume` otherwise, or if two requests
    share a call id (one decision would be taken for both)."""
    asked: dict[str, int] = {}
    for event in events:
        if isinstance(event.body, ApprovalRequested):
            first = asked.setdefault(event.body.call_id, event.seq)
            if first != event.seq:
                raise shared_id(path, event.body.call_id, first, event.seq)
    pending: dict[str, ApprovalRequested] = {p.call_id: p for p in pending_approvals(events)}
    forms: dict[tuple[str, str], InputRequested] = {(r.call_id, r.key): r for r in inputs}
    decided: list[ApprovalDecided | InputAnswered] = []
    for decision in decisions:
        if decision.call_id not in pending:
            decided.append(_answered(decision, forms, path, pending))
            continue
        if decision.answer is not None:
            raise CannotResume(
                f"{path}: call {decision.call_id!a} waits for approval, not for input: "
                "approve or deny it, with no answer"
            )
        del pending[decision.call_id]
        decided.append(_decided(decision))
    return decided


def _answered(
    decision: Decision,
    asked: dict[tuple[str, str], InputRequested],
    path: str,
    pending: dict[str, ApprovalRequested],
) -> InputAnswered:
    """A decision on a call waiting for input, as its ``input_answered`` (``asked``: the
    requests waiting, by call and key; one is taken off when answered)."""
    keys = [k for c, k in asked if c == decision.call_id]
    if decision.request is not None:
        keys = [k for k in keys if k == decision.request]
    if len(keys) != 1:
        waiting = [
            *(f"{p.call_id} ({p.tool}) for a decision" for p in pending.values()),
            *(f"{r.call_id} ({r.tool}) for an answer to {r.key!a}" for r in asked.values()),
        ]
        what = "an answer" if decision.answer is not None else "a decision"
        given = "" if decision.request is None else f" to request {decision.request!a}"
        several = " (name the request)" if len(keys) > 1 else ""
        raise CannotResume(
            f"{path}: no call {decision.call_id!a} is waiting for {what}{given}{several}; "
            f"waiting: {', '.join(waiting) or 'none'}"
        )
    request = asked.pop((decision.call_id, keys[0]))
    if decision.by == CALLBACK:
        raise CannotResume(f"{path}: {CALLBACK!r} names the Python callback: give who answers")
    if decision.approve and decision.answer is None:
        raise CannotResume(
            f"{path}: {request_name(request.call_id, request.round, request.key)} waits for "
            "an answer, not an approval: give the form's values (or decline it)"
        )
    if decision.answer is not None:
        problem = answer_problem(request.requested_schema, decision.answer)
        if problem is not None:
            raise CannotResume(
                f"{path}: the answer to {request.tool}'s request {request.key!a} does not "
                f"match the requested schema {problem}; nothing was written"
            )
    return InputAnswered(
        call_id=request.call_id,
        round=request.round,
        key=request.key,
        action="accept" if decision.approve else "decline",
        content=decision.answer if decision.approve else None,
        by=decision.by,
        signed_note=decision.signed_note,
    )


def record_decisions(
    trace: str | os.PathLike[str], decisions: Iterable[Decision], clock: Clock
) -> Checkpoint:
    """Append decisions on calls waiting for approval to a paused run's trace, without resuming.

    No code of the run is imported or run: a person (or a tool acting for one) can decide
    without the agent's spec. `Agent.resume` later re-runs the run, reads the decisions where
    they were recorded, and goes on.

    Args:
        trace: The trace of a paused run.
        decisions: One per call decided.
        clock: Each decision's time.

    Returns:
        The trace's checkpoint after the decisions.

    Raises:
        FileWriteError (``locked``): Another process is writing the trace; nothing was written.
        TraceCorruptError: The trace does not verify.
        CannotResume: A decision names a call that is not waiting; nothing was written.
    """
    sink = FileTraceSink.append_to(trace)
    try:
        repair_trace(trace)
        loaded = Trace.load(trace)
        decided = check_decisions(
            tuple(loaded.events), decisions, os.fspath(trace), input_pause(loaded) or ()
        )
        writer = TraceWriter.continuing(sink, loaded.digests)
        for body in decided:
            writer.append(clock.now(), body)
        writer.end_step()
        return writer.checkpoint()
    finally:
        sink.close()


def recorded_turns(events: Iterable[TraceEvent]) -> tuple[str | UserTurn, ...]:
    """The user's messages of a run, turn by turn: ``run_started``'s prompt, then each
    ``user_turn`` (its text, and the simulated user's link when one wrote it; ``events``
    must hold those two kinds typed)."""
    turns: list[str | UserTurn] = []
    for event in events:
        body = event.body
        if isinstance(body, RunStarted):
            turns.append(body.prompt)
        elif isinstance(body, UserTurn):
            turns.append(body.text if body.simulator is None else body)
    return tuple(turns)


def _last_step(trace: Trace) -> int:
    """The run's last step number (0 before its first), read from its last model request."""
    for index in range(trace.size - 1, -1, -1):
        if trace.kinds[index] == "model_requested":
            body = trace.events[index].body
            assert isinstance(body, ModelRequested)  # its kind says so
            return body.step
    return 0


def _no_turn(trace: Trace, path: str) -> CannotResume:
    """Why a run whose trace does not end with ``run_finished`` takes no turn, and what to do."""
    size = trace.size
    last = trace.events[size - 1].body
    if isinstance(last, RunFailed) and passing_failure(last):
        return CannotResume(
            f"{path}: the run's last turn failed with {_failure_name(last)} (seq {size - 1}), "
            f"which can pass: resume it first (twinflow resume {path} --trust-spec), then send "
            "the turn",
            reason="failed",
        )
    if isinstance(last, RunFailed):
        return CannotResume(
            f"{path}: the run failed with {_failure_name(last)} (seq {size - 1}) and takes no "
            f"more turns: fork it at the step that failed (twinflow fork {path} --at-step "
            f"{max(_last_step(trace), 1)} --spec SPEC) and continue the fork",
            reason="failed",
        )
    waiting = pending_approvals(tuple(trace.events))
    if waiting:
        names = ", ".join(f"{p.call_id} ({p.tool})" for p in waiting)
        return CannotResume(
            f"{path}: the run is paused, waiting for a decision on {names}: decide first "
            f"(twinflow approve {path} --all --trust-spec), then send the turn",
            reason="paused",
        )
    if input_pause(trace) is not None:
        return CannotResume(
            f"{path}: the run is paused, waiting for an answer to the input an MCP server "
            f"asked for: answer first (twinflow approve {path} --answer JSON --trust-spec), "
            "then send the turn",
            reason="paused",
        )
    return CannotResume(
        f"{path}: the run stopped mid-turn (its last event, seq {size - 1}, is "
        f"{trace.kinds[size - 1]}): resume it first (twinflow resume {path} --trust-spec), "
        "then send the turn",
        reason="unfinished",
    )


def plan_turn(trace: Trace, path: str) -> Plan:
    """How a finished run takes another turn: every recorded line re-run against the record,
    then the new turn live; `CannotResume` saying why and what to do if it cannot take one."""
    if not trace.size or trace.kinds[0] != "run_started":
        raise CannotResume(f"{path}: does not start with run_started; it is not a run's trace")
    if trace.kinds[-1] != "run_finished":
        raise _no_turn(trace, path)
    events = served_events(trace)
    started = events[0].body
    assert isinstance(started, RunStarted)  # kinds[0] says so
    return Plan(
        events=events,
        recorded=list(trace.encoded),
        digests=trace.digests,
        gate=trace.size,
        inserts=recorded_inserts(events),
        decisions=recorded_decisions(events),
        started=started,
        inputs=recorded_inputs(events),
    )


@dataclass(frozen=True, slots=True)
class ForkPlan:
    """What a fork serves from its parent, and the link its first event records."""

    parent: ForkParent
    started: RunStarted
    prefix: tuple[TraceEvent, ...]
    """The parent's events before the model request of the fork's step."""


def _first_step(events: tuple[TraceEvent, ...], path: str, at_turn: int) -> int:
    """The first step of turn ``at_turn``; `CannotResume` if the run has no such turn."""
    turn = 1
    for event in events:
        body = event.body
        if isinstance(body, UserTurn):
            turn = body.turn
        elif isinstance(body, ModelRequested) and turn == at_turn and body.purpose == "step":
            return body.step
    raise CannotResume(
        f"{path}: the run has no turn {at_turn} to fork at; its turns are 1 to {turn}"
        + ("" if at_turn != turn else f" (turn {turn} made no model request)")
    )


def plan_fork(trace: Trace, path: str, at_step: int | None, at_turn: int | None = None) -> ForkPlan:
    """The parent's prefix before step ``at_step``, or before the first step of turn
    ``at_turn``; `CannotResume` if the parent has no such step or turn."""
    events = tuple(trace.events)
    if not events or not isinstance(events[0].body, RunStarted):
        raise CannotResume(f"{path}: does not start with run_started; it is not a run's trace")
    if at_turn is not None:
        at_step = _first_step(events, path, at_turn)
    assert at_step is not None  # Agent.fork takes one of the two
    steps = [
        e.seq
        for e in events
        if isinstance(e.body, ModelRequested)
        and e.body.purpose == "step"
        and e.body.step == at_step
    ]
    if at_step < 1 or not steps:
        last = max((e.body.step for e in events if isinstance(e.body, ModelRequested)), default=0)
        raise CannotResume(
            f"{path}: the run has no step {at_step} to fork at; its steps are 1 to {last}"
        )
    return ForkPlan(
        parent=ForkParent(root=trace.checkpoint().root, size=trace.size, step=at_step),
        started=events[0].body,
        prefix=events[: steps[0]],
    )
