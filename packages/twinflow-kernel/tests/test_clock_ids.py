"""Clock and id adapters."""

from datetime import UTC, datetime, timedelta, timezone

import pytest

from twinflow.kernel import Clock, CountingIds, Ids, SteppingClock, SystemClock, SystemIds
from twinflow.kernel._clock import FixedClock
from twinflow.kernel._ids import SeededIds
from twinflow.trace import UserError

START = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def test_system_clock_is_aware_utc_and_monotonic() -> None:
    """SystemClock gives an aware UTC now() and a non-decreasing monotonic()."""
    clock: Clock = SystemClock()
    first, second = clock.monotonic(), clock.monotonic()
    assert timedelta(0) == clock.now().utcoffset()
    assert first <= second


def test_fixed_clock_never_moves() -> None:
    """FixedClock returns the same instant and monotonic value every time."""
    clock: Clock = FixedClock(START, monotonic_at=7.5)
    expected = (START, START, 7.5, 7.5)
    assert expected == (
        clock.now(),
        clock.now(),
        clock.monotonic(),
        clock.monotonic(),
    )


def test_fixed_clock_normalises_to_utc() -> None:
    """An aware time in another zone is returned as the same instant in UTC."""
    paris = datetime(2026, 1, 2, 4, 4, 5, tzinfo=timezone(timedelta(hours=1)))
    expected = (START, UTC)
    assert expected == (FixedClock(paris).now(), FixedClock(paris).now().tzinfo)


def test_clocks_refuse_naive_datetimes() -> None:
    """A naive datetime is a usage error that says how to fix it."""
    with pytest.raises(UserError, match="timezone-aware"):
        FixedClock(datetime(2026, 1, 1))
    with pytest.raises(UserError, match="timezone-aware"):
        SteppingClock(datetime(2026, 1, 1))


def test_stepping_clock_advances_by_step() -> None:
    """SteppingClock moves now() and monotonic() forward by one step per reading."""
    clock = SteppingClock(START, timedelta(milliseconds=250))
    assert [START, START + timedelta(milliseconds=250), START + timedelta(milliseconds=500)] == [
        clock.now(),
        clock.now(),
        clock.now(),
    ]
    expected = [0.0, 0.25, 0.5]
    assert expected == [clock.monotonic(), clock.monotonic(), clock.monotonic()]


def test_stepping_clock_refuses_negative_step() -> None:
    """A clock that would go backwards is refused."""
    with pytest.raises(UserError, match="backwards"):
        SteppingClock(START, timedelta(seconds=-1))


def test_counting_ids_number_from_one_with_prefix() -> None:
    """CountingIds counts runs and calls separately, from 1, after the prefix."""
    ids: Ids = CountingIds("t-")
    expected = ["t-run-1", "t-call-1", "t-call-2", "t-run-2"]
    assert expected == [
        ids.run_id(),
        ids.call_id(),
        ids.call_id(),
        ids.run_id(),
    ]


def test_seeded_ids_repeat_for_the_same_seed() -> None:
    """Two SeededIds with one seed give the same sequence; another seed gives another."""
    a, b, c = SeededIds(42), SeededIds(42), SeededIds(43)
    seq_a = [a.run_id(), a.call_id(), a.call_id()]
    assert seq_a == [b.run_id(), b.call_id(), b.call_id()]
    assert seq_a != [c.run_id(), c.call_id(), c.call_id()]


def test_seeded_ids_are_pinned() -> None:
    """The seeded sequence is pinned, so it is the same in every process and Python version."""
    ids = SeededIds(0)
    expected = ("run_e3e70682c2094cac629f6fbed82c07cd", "call_42485e3a0a5d2f346baa9455")
    assert expected == (
        ids.run_id(),
        ids.call_id(),
    )


def test_system_ids_have_the_seeded_shape_and_differ() -> None:
    """SystemIds look like SeededIds and never repeat in practice."""
    ids = SystemIds()
    runs = {ids.run_id() for _ in range(100)}
    call = ids.call_id()
    expected = (100, 36, 29)
    assert expected == (len(runs), len(next(iter(runs))), len(call))
