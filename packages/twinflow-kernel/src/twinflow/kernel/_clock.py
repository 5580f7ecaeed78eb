"""Clock adapters: the real one and the deterministic ones."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

from twinflow.trace import UserError


def _aware(value: datetime, name: str) -> datetime:
    if value.tzinfo is None or value.utcoffset() is None:
        raise UserError(
            f"{name} {value.isoformat()} is a naive datetime: pass a timezone-aware one, "
            "for example datetime(2026, 1, 1, tzinfo=UTC)"
        )
    return value.astimezone(UTC)


class SystemClock:
    """The real clock: wall time in UTC and the process's monotonic clock."""

    def now(self) -> datetime:
        """Return the current time in UTC."""
        return datetime.now(UTC)

    def monotonic(self) -> float:
        """Return `time.monotonic()`."""
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        """Wait `seconds` of real time (a retry's backoff)."""
        time.sleep(seconds)


class FixedClock:
    """A clock that never moves: every `now()` is `at`, every `monotonic()` is `monotonic_at`."""

    def __init__(self, at: datetime, *, monotonic_at: float = 0.0) -> None:
        """Create the clock.

        Args:
            at: The time every `now()` returns; must be timezone-aware.
            monotonic_at: The value every `monotonic()` returns.

        Raises:
            UserError: `at` is naive.
        """
        self._at = _aware(at, "FixedClock(at=...)")
        self._monotonic_at = monotonic_at

    def now(self) -> datetime:
        """Return the fixed time."""
        return self._at

    def monotonic(self) -> float:
        """Return the fixed monotonic value."""
        return self._monotonic_at

    def sleep(self, seconds: float) -> None:
        """Return at once: a fixed clock's time never moves, so nothing is waited for."""
        del seconds


class SteppingClock:
    """A clock that moves forward by `step` on every reading.

    `now()` returns `start`, `start + step`, `start + 2*step`, ...; `monotonic()` independently
    returns `0`, `step`, `2*step`, ... in seconds.
    """

    def __init__(self, start: datetime, step: timedelta = timedelta(seconds=1)) -> None:
        """Create the clock.

        Args:
            start: The first `now()`; must be timezone-aware.
            step: How far each reading advances; must not be negative.

        Raises:
            UserError: `start` is naive or `step` is negative.
        """
        if step < timedelta(0):
            raise UserError(
                f"SteppingClock(step={step!r}) goes backwards: pass a step >= timedelta(0)"
            )
        self._start = _aware(start, "SteppingClock(start=...)")
        self._step = step
        self._now_count = 0
        self._monotonic_count = 0
        self._slept = 0.0

    def now(self) -> datetime:
        """Return the next time in the sequence."""
        value = self._start + self._step * self._now_count
        self._now_count += 1
        return value

    def monotonic(self) -> float:
        """Return the next monotonic reading, in seconds."""
        value = self._step.total_seconds() * self._monotonic_count + self._slept
        self._monotonic_count += 1
        return value

    def sleep(self, seconds: float) -> None:
        """Move both readings `seconds` forward at once, without waiting."""
        self._start += timedelta(seconds=seconds)
        self._slept += seconds
