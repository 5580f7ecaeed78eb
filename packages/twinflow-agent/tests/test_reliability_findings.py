"""Regressions found by the reliability campaigns (reliability/, docs/reliability.md)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from twinflow.agent import Agent, FunctionModel, Trace, verify_agent_trace
from twinflow.kernel import CountingIds, SteppingClock
from twinflow.trace import MemoryTraceSink, TraceCorruptError
from twinflow.trace._testing import events_of, rechain
from twinflow.vocab import Message


def hello_trace() -> bytes:
    """A real, complete trace of one run answering "hi"."""
    sink = MemoryTraceSink()
    agent = Agent(
        FunctionModel(lambda request: Message.assistant("hi")),
        clock=SteppingClock(datetime(2026, 1, 1, tzinfo=UTC)),
        ids=CountingIds(),
        trace=sink,
    )
    agent.run("hello")
    return bytes(sink.data)


def test_a_rechained_trace_with_a_forged_event_is_refused_with_a_typed_error() -> None:
    """verify_agent_trace and Trace.load both refuse a chained but invalid event, at its seq."""
    events = events_of(hello_trace())
    events[1] = {**events[1], "body": {"kind": "run_started"}}
    forged = rechain(events)
    report = verify_agent_trace(forged)
    with pytest.raises(TraceCorruptError) as caught:
        Trace.load(forged)
    problem = caught.value.report.problem
    assert problem is not None
    assert ("not_event", 1) == (problem.kind, problem.seq)
    assert 1 == caught.value.report.events
    assert report == caught.value.report


def test_a_foreign_event_repeating_the_last_seq_is_named_where_it_was_inserted() -> None:
    """A foreign event claiming the previous seq, placed after it, is reported at its own line."""
    lines = hello_trace().splitlines(keepends=True)
    events = [json.loads(line)["event"] for line in lines]
    other = rechain([{**e, "at": "2027-01-01T00:00:00Z"} for e in events]).splitlines(keepends=True)
    tampered = b"".join([*lines[:2], other[1], *lines[2:]])
    report = verify_agent_trace(tampered)
    assert report.problem is not None
    assert ("inserted", 2, 3) == (report.problem.kind, report.problem.seq, report.problem.line)
