"""`summarize_trace`: one pass over a run's events, the summary the CLI and eval both read."""

from __future__ import annotations

from datetime import UTC, datetime

from pydantic import BaseModel

from twinflow.agent import Agent, FunctionModel, Policy, Trace
from twinflow.kernel import CountingIds, SteppingClock
from twinflow.trace import MemoryTraceSink
from twinflow.views import TraceSummary, summarize_trace
from twinflow.views._summary import CallSummary
from twinflow.vocab import CallId, Message, ModelRequest, ToolCallPart


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def boom(a: int) -> int:
    """Raise."""
    raise ValueError(f"no {a}")


def remove(path: str) -> None:
    """Never allowed."""


class Sum(BaseModel):
    """The answer."""

    total: int


def _calls(request: ModelRequest) -> Message:
    """Step 1: three calls (allowed, raising, denied); step 2: a bad answer; step 3: a good one."""
    asked = sum(1 for m in request.transcript.messages if m.role == "assistant")
    if asked == 0:
        return Message(
            role="assistant",
            parts=(
                ToolCallPart(id=CallId("c1"), name="add", arguments={"a": 2, "b": 3}),
                ToolCallPart(id=CallId("c2"), name="boom", arguments={"a": 1}),
                ToolCallPart(id=CallId("c3"), name="remove", arguments={"path": "/"}),
            ),
        )
    return Message.assistant('{"total": "five"}' if asked == 1 else '{"total": 5}')


def _summary() -> TraceSummary:
    sink = MemoryTraceSink()
    with Agent(
        FunctionModel(_calls),
        clock=SteppingClock(datetime(2026, 1, 1, tzinfo=UTC)),
        ids=CountingIds(),
        tools=[add, boom, remove],
        policy=Policy(allow=frozenset({"add", "boom"})),
        output_type=Sum,
        trace=sink,
    ) as agent:
        agent.run("add 2 and 3")
    return summarize_trace(Trace.load(sink.data).events)


def test_the_calls_say_what_the_policy_decided_and_what_became_of_each() -> None:
    """Each call keeps its decision, whether it ran, and its result or error type."""
    calls = _summary().tool_calls
    assert [
        ("c1", "add", "allow", True, False, None, "5"),
        ("c2", "boom", "allow", True, True, "ValueError", "ValueError: no 1"),
        (
            "c3",
            "remove",
            "deny",
            False,
            True,
            "ToolDenied",
            "ToolDenied: tool 'remove' is not allowed by the policy",
        ),
    ] == [(c.call_id, c.tool, c.decision, c.ran, c.is_error, c.error_type, c.result) for c in calls]
    assert isinstance(calls[0], CallSummary)


def test_the_run_is_counted_once_for_every_reader() -> None:
    """Decisions by verdict, tools run and raised, rejected outputs, replies and attempts."""
    summary = _summary()
    assert (
        "finished",
        {"allow": 2, "deny": 1},
        ["add", "boom"],
        ["boom: ValueError"],
        1,
        2,
        3,
        {"total": 5},
        "Sum",
    ) == (
        summary.status,
        summary.decisions,
        summary.tools_run,
        summary.tool_errors,
        summary.rejected,
        summary.attempts,
        summary.replies,
        summary.output,
        summary.schema_name,
    )


def test_no_events_is_an_incomplete_run() -> None:
    """A run with no events summarizes as incomplete, with nothing counted."""
    summary = summarize_trace([])
    assert ("incomplete", (), {}, 0, 0.0) == (
        summary.status,
        summary.tool_calls,
        summary.decisions,
        summary.replies,
        summary.duration_s,
    )
