"""The clock adapters wait through `sleep` and the id adapters draw a retry's `jitter`."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from twinflow.kernel import CountingIds, SteppingClock
from twinflow.kernel._clock import FixedClock
from twinflow.kernel._ids import SeededIds

START = datetime(2026, 1, 1, tzinfo=UTC)


def test_a_stepping_clock_moves_both_readings_by_the_sleep() -> None:
    """sleep(30) puts now() and monotonic() 30 s later, at once."""
    clock = SteppingClock(START, timedelta(seconds=1))
    clock.sleep(30)
    assert (START + timedelta(seconds=30), 30.0) == (clock.now(), clock.monotonic())


def test_a_fixed_clock_sleeps_without_moving() -> None:
    """A fixed clock's time stays where it is."""
    clock = FixedClock(START)
    clock.sleep(5)
    assert START == clock.now()


def test_jitters_are_fractions_the_same_for_the_same_seed() -> None:
    """Seeded jitters repeat per seed, lie in [0, 1); counting ids give the middle."""
    drawn = [SeededIds(1).jitter(), SeededIds(1).jitter(), SeededIds(2).jitter()]
    assert drawn[0] == drawn[1] != drawn[2]
    assert all(0 <= j < 1 for j in drawn)
    assert 0.5 == CountingIds().jitter()
