"""The eval holds off starting cases while most of its model requests are being refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from eval_testkit import START, dataset, reply, scripted_agent

from twinflow.eval import Case, run_eval
from twinflow.eval._limiter import SharedLimiter
from twinflow.kernel import SteppingClock, TransportError
from twinflow.trace import TraceSink
from twinflow.vocab import Message, ModelRequest


class SleepingClock(SteppingClock):
    """A stepping clock that keeps each sleep it was asked for."""

    def __init__(self) -> None:
        super().__init__(START)
        self.sleeps: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        super().sleep(seconds)


def limited_factory(refusals: int) -> Any:
    """Agents whose model is refused with 429 (Retry-After: 5) ``refusals`` times per case."""

    def build(case: Case, sink: TraceSink, seed: int) -> Any:
        left = [refusals]

        def answer(request: ModelRequest) -> Message:
            if left[0]:
                left[0] -= 1
                raise TransportError(
                    "HTTP 429",
                    url="http://127.0.0.1:9/",
                    reason="status",
                    status=429,
                    retry_after="5",
                )
            return reply(request)

        return scripted_agent(sink, seed, answer, max_steps=3)

    return build


def test_cases_start_later_while_most_requests_are_refused(tmp_path: Path) -> None:
    """Three refusals of five sends per case: each case after the first waits, doubling."""
    clock = SleepingClock()
    results = run_eval(dataset(3), limited_factory(3), tmp_path / "run", clock=clock)
    assert 3 == results.summary.passed
    assert 2 == len(clock.sleeps)
    assert 5.0 <= clock.sleeps[0] <= 5.5
    assert clock.sleeps[1] == 2 * clock.sleeps[0]


def test_cases_start_at_once_while_most_requests_go_through(tmp_path: Path) -> None:
    """One refusal of three sends per case: no case waits for the others."""
    clock = SleepingClock()
    run_eval(dataset(3), limited_factory(1), tmp_path / "run", clock=clock)
    assert [] == clock.sleeps


def test_the_hold_is_capped_and_ends_when_requests_go_through() -> None:
    """A hold doubles up to max_hold, and drops to none once refusals are a minority."""
    slept: list[float] = []
    limiter = SharedLimiter(slept.append, window=4, max_hold=3.0)
    refused = b'{"kind":"model_waited","wait_seconds":2.5}' * 3 + b'{"kind":"model_requested"}'
    for _ in range(3):
        limiter.note(refused)
        limiter.hold()
    limiter.note(b'{"kind":"model_requested"}' * 4)
    assert (0.0, [2.5, 3.0, 3.0]) == (limiter.hold(), slept)
