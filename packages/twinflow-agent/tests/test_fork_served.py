"""A fork's first steps are its parent's: served, never asked, run or decided again.

The fork is resumed after a crash and replayed: both serve those steps as the child recorded
them, whatever the spec's policy says now.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from agent_testkit import Counts, crashed_at
from test_resume import STEPS, make

from twinflow.agent import RunPaused, Trace, replay
from twinflow.trace import FileTraceSink

_DECIDED = {"policy_decided", "tool_called", "tool_returned", "approval_requested"}


def _served(path: Path, before: int) -> list[bytes]:
    """The decisions, calls and results of the steps before ``before``, as recorded."""
    trace = Trace.load(path)
    cut = next(
        e.seq for e in trace.events if e.body.kind == "model_requested" and e.body.step == before
    )
    return [
        b
        for b, kind, seq in zip(trace.encoded, trace.kinds, range(cut), strict=False)
        if kind in _DECIDED and seq < cut
    ]


def _bodies(encoded: list[bytes]) -> list[bytes]:
    """Events without their seq, prev and time: only the body is the parent's."""
    return [e[e.index(b'"body":') : e.index(b',"prev":')] for e in encoded]


@pytest.fixture
def denied(tmp_path: Path) -> Path:
    """A run whose policy denied every call (its model fails on the denial at the end)."""
    path = tmp_path / "denied.jsonl"
    failing = make(Counts(STEPS), FileTraceSink(path), allow=frozenset())
    with failing, pytest.raises(ValueError, match="ToolDenied"):
        failing.run("add")
    return path


def test_a_denied_call_stays_denied_in_a_fork_that_allows_it(denied: Path, tmp_path: Path) -> None:
    """The parent's denials at steps 1-2 are served; only step 3's call runs, once."""
    child = tmp_path / "child.jsonl"
    counts = Counts(STEPS)
    with make(counts, FileTraceSink(child)) as agent:
        agent.fork(denied, at_step=3)
    assert (2, 1) == (counts.requests, counts.tools)
    assert _bodies(_served(denied, 3)) == _bodies(_served(child, 3))


def test_an_allowed_call_is_served_in_a_fork_that_asks_about_it(tmp_path: Path) -> None:
    """A spec asking a person about the tool does not stop the fork at a served step."""
    parent = tmp_path / "parent.jsonl"
    with make(Counts(STEPS), FileTraceSink(parent)) as agent:
        agent.run("add")
    child = tmp_path / "child.jsonl"
    counts = Counts(STEPS)
    asking = make(counts, FileTraceSink(child), allow=frozenset(), ask=frozenset({"add"}))
    with asking, pytest.raises(RunPaused, match="waits for a decision on c2"):
        asking.fork(parent, at_step=3)
    assert (1, 0) == (counts.requests, counts.tools)
    assert _bodies(_served(parent, 3)) == _bodies(_served(child, 3))


def test_a_crashed_fork_resumes_and_replays_serving_its_parent_steps(
    denied: Path, tmp_path: Path
) -> None:
    """A fork killed after its served steps resumes and replays with the served decisions kept."""
    full = tmp_path / "full.jsonl"
    with make(Counts(STEPS), FileTraceSink(full)) as agent:
        agent.fork(denied, at_step=3)
    size = max(e.seq for e in Trace.load(full).events if e.body.kind == "model_requested")
    cut = crashed_at(full, size, tmp_path / "cut.jsonl")
    counts = Counts(STEPS)
    with make(counts) as agent:
        result = agent.resume(cut)
    assert ({"total": 3}, 1, 0) == (result.output.model_dump(), counts.requests, counts.tools)
    trace = Trace.load(cut, require_complete=True)
    assert trace.size == replay(trace, lambda ports: make(Counts(STEPS), ports=ports)).events


def test_a_fork_polls_its_steering_from_its_first_live_step_only(tmp_path: Path) -> None:
    """A served step takes the parent's steering: the fork's own source is first asked at N."""
    parent = tmp_path / "parent.jsonl"
    with make(Counts(STEPS), FileTraceSink(parent)) as agent:
        agent.run("add")
    polled: list[int] = []

    def steering(step: int) -> list[str]:
        polled.append(step)
        return []

    with make(Counts(STEPS), FileTraceSink(tmp_path / "child.jsonl")) as agent:
        agent.steering = steering
        agent.fork(parent, at_step=3)
    assert [3, 4] == polled
