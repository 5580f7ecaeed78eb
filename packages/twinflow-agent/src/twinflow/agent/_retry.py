"""Retries of a model request the server refused for now: which, how long to wait, when to stop.

A request answered 429 (rate limited), 503 (unavailable) or 529 (overloaded), or whose
connection reset before the request was written whole, is sent again after a wait; nothing
else is (a timeout or a reset after the whole request went out may have been acted on, and
no model API takes the request as idempotent: ADR 0179). The wait honours the answer's
``Retry-After`` (seconds, or an HTTP date read against the time of the run's last event),
else backs off exponentially from ``base_seconds``; a fraction drawn from the ids port spreads
it. Each wait is a ``model_waited`` event and goes through the clock port, so a replay
reproduces it without waiting. A request stops after ``attempts`` sends, and a run after
``total_wait_seconds`` of waiting; a ``Retry-After`` past ``max_wait_seconds`` is not waited
for. Each ends the run with the server's error, its message saying why it was not retried.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import NoReturn

from pydantic import Field

from twinflow.agent._code_record import SpecValue
from twinflow.agent._events import ModelWaited
from twinflow.kernel import TransportError

RETRIED_STATUSES = frozenset({429, 503, 529})
"""The statuses a request is sent again after: rate limited, unavailable, overloaded."""

_SECONDS = re.compile(r"[0-9]+(\.[0-9]+)?")


class RetryLimits(SpecValue):
    """How a run retries model requests the server refused for now (the spec's ``retries:``)."""

    attempts: int = Field(default=4, ge=1, le=100)
    """Sends of one request, the first included (1: never retried)."""
    base_seconds: float = Field(default=1.0, ge=0, le=600)
    """The first wait without a ``Retry-After``; each next one doubles (up to the cap)."""
    max_wait_seconds: float = Field(default=60.0, ge=0, le=86400)
    """The longest single wait; a ``Retry-After`` asking for more ends the run instead."""
    total_wait_seconds: float = Field(default=300.0, ge=0, le=604800)
    """The most a run waits in all; a wait that would pass it ends the run instead."""


@dataclass(frozen=True, slots=True)
class Refusal:
    """A refusal worth a retry: its status (None for a reset) and ``Retry-After``."""

    status: int | None
    retry_after: str | None


def refusal(error: BaseException) -> Refusal | None:
    """The refusal ``error`` is, if a retry may follow it (see the module docstring)."""
    if not isinstance(error, TransportError):
        return None
    if error.reason == "status" and error.status in RETRIED_STATUSES:
        return Refusal(error.status, error.retry_after)
    if error.reason == "connect" and error.unsent:
        return Refusal(None, None)
    return None


_IMF_FIXDATE = re.compile(
    r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun), ([0-9]{2}) ([A-Z][a-z]{2}) ([0-9]{4}) "
    r"([0-9]{2}):([0-9]{2}):([0-9]{2}) GMT"
)
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def retry_after_seconds(header: str, now: datetime | None) -> float | None:
    """Seconds a ``Retry-After`` asks for: delay-seconds, or an HTTP date (IMF-fixdate, the
    form servers must send) less ``now`` (a date past is 0). None for anything else
    (negative, garbage, a date with no ``now``)."""
    text = header.strip()
    if _SECONDS.fullmatch(text):
        seconds = float(text)
        return seconds if math.isfinite(seconds) else None
    found = _IMF_FIXDATE.fullmatch(text)
    if found is None or now is None or found[2] not in _MONTHS:
        return None
    day, month, year, hour, minute, second = (
        int(found[1]),
        _MONTHS.index(found[2]) + 1,
        int(found[3]),
        int(found[4]),
        int(found[5]),
        int(found[6]),
    )
    try:
        when = datetime(year, month, day, hour, minute, second, tzinfo=UTC)
    except ValueError:
        return None
    return max(0.0, (when - now).total_seconds())


def give_up(error: TransportError, why: str) -> TransportError:
    """The server's error, its message saying why it was not sent again."""
    return error.with_url(error.url, f"; not retried: {why}")


def next_wait(
    limits: RetryLimits,
    error: TransportError,
    found: Refusal,
    attempt: int,
    waited: float,
    now: datetime | None,
    jitter: float,
) -> float:
    """The wait before send ``attempt + 1``, after send ``attempt`` was refused.

    Raises:
        TransportError: ``error``, saying why it is not retried: the sends are used up, the
            ``Retry-After`` asks for more than ``max_wait_seconds``, or the wait would pass
            ``total_wait_seconds``.
    """
    header = found.retry_after
    if attempt >= limits.attempts:
        quoted = "" if header is None else f", the last with Retry-After {header!r}"
        _raise(error, f"{attempt} sends refused{quoted} (retries.attempts={limits.attempts})")
    asked = None if header is None else retry_after_seconds(header, now)
    if asked is not None and asked > limits.max_wait_seconds:
        _raise(
            error,
            f"its Retry-After {header!r} asks for {asked:g} s, over retries.max_wait_seconds="
            f"{limits.max_wait_seconds:g}",
        )
    if asked is not None:
        # Honoured, never shortened: the spread only ever adds up to a tenth.
        wait = min(limits.max_wait_seconds, asked * (1 + jitter / 10))
    else:
        # No usable header (none, negative or garbage: the spread backoff instead).
        backoff = limits.base_seconds * 2 ** (attempt - 1)
        wait = min(limits.max_wait_seconds, backoff) * (0.5 + jitter / 2)
    wait = round(wait, 3)
    if waited + wait > limits.total_wait_seconds:
        unusable = (
            "" if header is None or asked is not None else f" (Retry-After {header!r} unusable)"
        )
        _raise(
            error,
            f"waiting {wait:g} s more would pass retries.total_wait_seconds="
            f"{limits.total_wait_seconds:g} after {waited:g} s waited{unusable}",
        )
    return wait


def _raise(error: TransportError, why: str) -> NoReturn:
    raise give_up(error, why) from error


def waited_event(
    step: int, attempt: int, found: Refusal, jitter: float, wait: float
) -> ModelWaited:
    """The ``model_waited`` event of one wait."""
    return ModelWaited(
        step=step,
        attempt=attempt,
        status=found.status,
        retry_after=found.retry_after,
        jitter=jitter,
        wait_seconds=wait,
    )


def recorded_refusal(event: ModelWaited) -> TransportError:
    """What a replay's model raises where the record waited: the refusal, as recorded."""
    if event.status is None:
        return TransportError(
            "the connection reset before the request was sent (recorded)",
            url="recorded",
            reason="connect",
            unsent=True,
        )
    return TransportError(
        f"HTTP {event.status} (recorded)",
        url="recorded",
        reason="status",
        status=event.status,
        retry_after=event.retry_after,
    )
