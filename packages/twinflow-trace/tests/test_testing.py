"""The trace test kit builds what it says: valid small traces, re-chained forgeries, framed lines."""

from __future__ import annotations

from twinflow.trace import verify_trace
from twinflow.trace._testing import events_of, framed, rechain, small_events, small_trace


def test_a_small_trace_verifies_complete() -> None:
    """small_trace(n) is a complete trace of n events that verifies."""
    report = verify_trace(small_trace(4))
    assert (True, 4) == (report.ok, report.checkpoint.size)


def test_a_rechained_edit_verifies_and_differs_from_the_original() -> None:
    """An edited event, re-chained, is a well-formed trace with another root."""
    events = small_events(3)
    events[1] = {**events[1], "body": {"kind": "tool_called", "n": 99}}
    forged = rechain(events)
    original = verify_trace(small_trace(3)).checkpoint.root
    report = verify_trace(forged)
    assert (True, False) == (report.ok, report.checkpoint.root == original)
    assert {"kind": "tool_called", "n": 99} == events_of(forged)[1]["body"]


def test_rechain_of_a_traces_own_events_gives_it_back() -> None:
    """Re-chaining the events of a valid trace reproduces its bytes."""
    data = small_trace(5)
    assert data == rechain(events_of(data))


def test_a_framed_non_canonical_event_is_refused_for_its_form() -> None:
    """A framed line whose event is not canonical JSON has a right digest and is refused."""
    report = verify_trace(framed(b'{"seq": 0}'), require_complete=False)
    assert (False, "whitespace") == (report.ok, report.problem.kind if report.problem else None)
