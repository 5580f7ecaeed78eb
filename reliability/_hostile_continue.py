"""Hostile continuations: traces that would make a resume repeat a call, or a fork re-decide one.

Three classes, each counted, in-process on scripted models (a few seconds in the short mode):

1. **Calls in flight.** A recorded run's trace is cut or rewritten (each event re-chained, so
   it verifies) so that a ``tool_called`` has no ``tool_returned`` of its id: cut right after
   it, followed by a ``run_failed`` of each recorded reason (timeout, full disk, Ctrl-C),
   answered by another call id's result, its id called twice with one result, a step's second
   call unanswered, its result line torn. `Agent.resume` must refuse naming the call, run no
   tool and write nothing; declared ``repeat_safe`` where a run could have left it, the call
   runs once more and ``run_resumed.repeated_call`` names it.
2. **Failure reasons.** A run whose model fails with each `TransportError` reason (and with
   the reason removed from the record): resume goes on only for ``connect``, ``timeout``,
   ``status`` and ``decode``, and asks the model nothing otherwise.
3. **Forks under another policy.** A parent that denied every call, and one that ran every
   call, forked at each step under the opposite policy (and under ``ask``): no served step is
   asked of the model or runs a tool, and the served decisions are byte for byte the parent's.
"""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from _common import Figures

from twinflow.agent import Agent, CannotResume, FunctionModel, Policy, RunPaused, Trace
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
from twinflow.vocab import CallId, Message, ModelRequest, TextPart, ToolCallPart

_START = datetime(2026, 1, 1, tzinfo=UTC)
_STEPS = 3


class _Model:
    """Calls `add` once per step (``c0``, ``c1``...), then answers; counts what it is asked
    and what runs. ``fail`` raises at that request (1-based), once."""

    def __init__(self, fail: tuple[int, BaseException] | None = None) -> None:
        self.requests = 0
        self.runs = 0
        self.fail = fail

    def add(self, a: int, b: int) -> int:
        """Add two integers."""
        self.runs += 1
        return a + b

    def reply(self, request: ModelRequest) -> Message:
        self.requests += 1
        if self.fail is not None and self.fail[0] == self.requests:
            error, self.fail = self.fail[1], None
            raise error
        n = sum(1 for m in request.transcript.messages if m.role == "tool")
        if n < _STEPS:
            call = ToolCallPart(id=CallId(f"c{n}"), name="add", arguments={"a": n, "b": 1})
            return Message(role="assistant", parts=(call,))
        return Message(role="assistant", parts=(TextPart(text="done"),))


def _agent(
    model: _Model,
    trace: Path | None = None,
    *,
    allow: frozenset[str] = frozenset({"add"}),
    ask: frozenset[str] = frozenset(),
    repeat_safe: frozenset[str] = frozenset(),
) -> Agent[Any]:
    return Agent(
        FunctionModel(model.reply),
        clock=SteppingClock(_START, timedelta(milliseconds=5)),
        ids=CountingIds(),
        tools=[model.add],
        policy=Policy(allow=allow, ask=ask, repeat_safe=repeat_safe),
        trace=None if trace is None else FileTraceSink(trace),
    )


def _record(path: Path, **policy: Any) -> Path:
    with _agent(_Model(), path, **policy) as a:
        a.run("add")
    return path


def _rewrite(bodies: list[EventBody], path: Path) -> Path:
    writer = TraceWriter(FileTraceSink(path))
    clock = SteppingClock(_START, timedelta(milliseconds=5))
    for body in bodies:
        writer.append(clock.now(), body)
    writer.end_step()
    writer.sink.close()
    return path


def _failed(started: RunStarted, error_type: str, reason: str | None) -> RunFailed:
    return RunFailed(
        run_id=started.run_id, steps=1, error_type=error_type, message="x", reason=reason
    )


_FAILURES = (
    ("TransportError", "timeout"),
    ("FileWriteError", "write"),
    ("KeyboardInterrupt", None),
)


def _in_flight_variants(bodies: list[EventBody]) -> dict[str, tuple[list[EventBody], str, bool]]:
    """Each variant: its events, the call id a resume must name, whether a run could leave it
    (then ``repeat_safe`` lets the call run once more)."""
    started = bodies[0]
    assert isinstance(started, RunStarted)
    variants: dict[str, tuple[list[EventBody], str, bool]] = {}
    for at, body in enumerate(bodies):
        if not isinstance(body, ToolCalled):
            continue
        name, head = body.call_id, bodies[: at + 1]
        variants[f"{name} cut"] = (head, name, True)
        for error_type, reason in _FAILURES:
            failed = _failed(started, error_type, reason)
            variants[f"{name} then {error_type}"] = ([*head, failed], name, True)
        returned = bodies[at + 1]
        assert isinstance(returned, ToolReturned)
        other = returned.model_copy(
            update={"result": returned.result.model_copy(update={"call_id": CallId("other")})}
        )
        variants[f"{name} answered by another id"] = ([*head, other], name, False)
        variants[f"{name} called twice"] = ([*head, body, returned], name, False)
        second = body.model_copy(update={"call_id": CallId(f"{name}b")})
        failed = _failed(started, "TransportError", "timeout")
        variants[f"{name} second call unanswered"] = (
            [*head, returned, second, failed],
            f"{name}b",
            True,
        )
    return variants


def in_flight(figures: Figures, work: Path) -> None:
    """Class 1: every variant refused naming its call; repeat_safe repeats it, named."""
    recorded = _record(work / "in-flight.jsonl")
    bodies = [e.body for e in Trace.load(recorded).events]
    lines = recorded.read_bytes().splitlines(keepends=True)
    variants = _in_flight_variants(bodies)
    refused = repeated = 0
    for index, (label, (events, call_id, leavable)) in enumerate(variants.items()):
        path = _rewrite(events, work / f"flight-{index}.jsonl")
        data = path.read_bytes()
        model = _Model()
        try:
            with _agent(model) as a:
                a.resume(path)
            figures.fail(f"in flight / {label}: resumed")
        except CannotResume as exc:
            if f"tool call {call_id} (" not in str(exc):
                figures.fail(f"in flight / {label}: the refusal does not name {call_id}: {exc}")
        except Exception as exc:  # a divergence or a crash: not the refusal promised
            figures.fail(f"in flight / {label}: {type(exc).__name__}: {exc}")
        if (model.requests, model.runs, data) != (0, 0, path.read_bytes()):
            figures.fail(f"in flight / {label}: asked, ran or wrote something")
        refused += 1
        if not leavable or "second call" in label:
            continue
        # Only the last call of a step that a run left can be run again, once, and named.
        model = _Model()
        size = len(events)
        with _agent(model, repeat_safe=frozenset({"add"})) as a:
            a.resume(path)
        marker = Trace.load(path).events[size].body
        if not isinstance(marker, RunResumed) or marker.repeated_call != call_id:
            figures.fail(f"in flight / {label}: run_resumed does not name {call_id}")
        if model.runs != _STEPS - int(call_id[1:]):
            figures.fail(f"in flight / {label}: {model.runs} tool runs")
        repeated += 1
    for seq, line in enumerate(lines):
        if b'"kind":"tool_returned"' not in line:
            continue
        torn = work / f"torn-{seq}.jsonl"
        torn.write_bytes(b"".join(lines[:seq]) + line[: len(line) // 2])
        model = _Model()
        with contextlib.suppress(CannotResume), _agent(model) as a:
            a.resume(torn)
            figures.fail(f"in flight / result torn at seq {seq}: resumed")
        if (model.requests, model.runs) != (0, 0):
            figures.fail(f"in flight / result torn at seq {seq}: asked or ran something")
        refused += 1
    figures.values["continue_in_flight_refused"] = refused
    figures.values["continue_in_flight_repeated_named"] = repeated


_PASSING = {"connect", "timeout", "status", "decode"}


def failure_reasons(figures: Figures, work: Path) -> None:
    """Class 2: a failure passes only for a reason that can pass, read from the record."""
    checked = 0
    reasons = ("connect", "timeout", "status", "decode", "too_large", "blocked", None)
    for reason in reasons:
        url = "http://127.0.0.1:9/"
        error = TransportError(f"failed at {url}", url=url, reason=reason or "connect")  # type: ignore[arg-type]  # a recorded tag, as a str
        path = work / f"reason-{reason}.jsonl"
        with contextlib.suppress(TransportError), _agent(_Model((2, error)), path) as a:
            a.run("add")
        if reason is None:  # the record does not say why
            bodies = [e.body for e in Trace.load(path).events]
            last = bodies[-1]
            assert isinstance(last, RunFailed)
            unexplained = last.model_copy(update={"reason": None})
            path = _rewrite([*bodies[:-1], unexplained], work / "reason-unrecorded.jsonl")
        model = _Model()
        try:
            with _agent(model) as a:
                a.resume(path)
            resumed = True
        except CannotResume:
            resumed = False
        if resumed != (reason in _PASSING) or (not resumed and model.requests):
            figures.fail(f"failure reasons / {reason}: resumed={resumed}, {model.requests} asked")
        checked += 1
    figures.values["continue_failure_reasons"] = checked


_DECIDED = frozenset(
    {"approval_requested", "approval_decided", "policy_decided", "tool_called", "tool_returned"}
)


def forks(figures: Figures, work: Path) -> None:
    """Class 3: served steps are never asked, run or decided again, under any new policy."""
    checked = 0
    parents = {
        "denied": (frozenset[str](), _record(work / "denied.jsonl", allow=frozenset())),
        "allowed": (frozenset({"add"}), _record(work / "allowed.jsonl")),
    }
    for name, (allowed, parent) in parents.items():
        events = list(Trace.load(parent).events)
        policies: dict[str, dict[str, frozenset[str]]] = {
            "opposite": {"allow": frozenset({"add"}) - allowed},
            "ask": {"allow": frozenset(), "ask": frozenset({"add"})},
        }
        for step in range(2, _STEPS + 2):
            cut = next(
                e.seq
                for e in events
                if e.body.kind == "model_requested" and getattr(e.body, "step", 0) == step
            )
            decided = [e.body for e in events[:cut] if e.body.kind in _DECIDED]
            for label, policy in policies.items():
                child = work / f"fork-{name}-{step}-{label}.jsonl"
                model = _Model()
                with (
                    contextlib.suppress(RunPaused, ValueError),
                    _agent(model, child, **policy) as a,
                ):
                    a.fork(parent, at_step=step)
                served = [e.body for e in Trace.load(child).events if e.body.kind in _DECIDED]
                if served[: len(decided)] != decided:
                    figures.fail(f"fork {name} at {step} ({label}): served decisions differ")
                # Live steps only: from ``step`` on, one call each until the answer.
                allows = "add" in policy.get("allow", frozenset())
                runs = _STEPS + 1 - step if allows else 0
                asked = _STEPS + 2 - step if label == "opposite" else 1
                if (model.requests, model.runs) != (asked, runs):
                    figures.fail(
                        f"fork {name} at {step} ({label}): {model.requests} requests and "
                        f"{model.runs} runs, expected {asked} and {runs}"
                    )
                checked += 1
    figures.values["continue_forks_served"] = checked


def continuations(figures: Figures, work: Path) -> None:
    """The three classes, into ``work``."""
    (work / "continue").mkdir()
    for campaign in (in_flight, failure_reasons, forks):
        campaign(figures, work / "continue")
