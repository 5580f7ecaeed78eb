"""The eval holds off starting cases while most requests are refused, and stops at its budget."""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

import pytest
from eval_testkit import START, dataset, factory, reply, scripted_agent

from twinflow.eval import Case, DatasetError, EvalValueError, load_dataset, run_eval
from twinflow.eval._limiter import EvalBudget, SharedLimiter
from twinflow.kernel import SteppingClock, TransportError
from twinflow.trace import TraceSink
from twinflow.vocab import Message, ModelRequest

CLOCK = SteppingClock(START)


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


def test_an_eval_over_its_total_budget_stops_starting_cases(tmp_path: Path) -> None:
    """Two requests a case and a budget of three: two cases ran, the rest never started."""
    budget = EvalBudget({"requests": 3})
    results = run_eval(dataset(6), factory(), tmp_path / "run", clock=CLOCK, budget=budget)
    assert (2, False) == (len(results.cases), results.complete)
    expected = (
        "budget requests reached 4, over the eval's limit of 3 (budget_exceeded): "
        "no case started after 2 ran"
    )
    assert expected == results.stopped
    on_disk = json.loads((tmp_path / "run" / "results.json").read_bytes())
    assert expected == on_disk["stopped"]
    assert (
        f"**Stopped at its budget**: {expected}." in (tmp_path / "run" / "lab-notes.md").read_text()
    )
    assert (
        f"<strong>Stopped at its budget</strong>: {html.escape(expected)}."
        in (tmp_path / "run" / "lab-notes.html").read_text()
    )


def test_an_eval_within_its_budget_runs_every_case(tmp_path: Path) -> None:
    """A budget never crossed changes nothing: every case, no stopped field."""
    results = run_eval(
        dataset(3), factory(), tmp_path / "run", clock=CLOCK, budget=EvalBudget({"tokens": 1e9})
    )
    assert (3, True, None) == (len(results.cases), results.complete, results.stopped)
    assert "stopped" not in json.loads((tmp_path / "run" / "results.json").read_bytes())


@pytest.mark.parametrize(
    ("limits", "words"),
    [
        ({"dollars": 1.0}, "give one of tokens"),
        ({"tokens": 0}, "each above 0"),
    ],
)
def test_a_budget_that_cannot_be_kept_is_refused(limits: dict[str, float], words: str) -> None:
    """An unknown key or a limit of 0: a typed error before any case."""
    with pytest.raises(EvalValueError, match=words) as caught:
        EvalBudget(limits)
    assert "budget" == caught.value.reason


@pytest.mark.parametrize("budget", ["{requests: .inf}", "{cost_usd: .nan}", "{tokens: 1.5}"])
def test_a_dataset_budget_that_is_not_a_finite_count_is_refused_in_one_line(
    tmp_path: Path, budget: str
) -> None:
    """An infinite, NaN or fractional count in a dataset's budget: one DatasetError line."""
    path = tmp_path / "d.yaml"
    path.write_text(f"budget: {budget}\ncases: [{{id: c, input: x}}]\n")
    with pytest.raises(DatasetError, match="budget") as caught:
        load_dataset(path)
    assert "\n" not in str(caught.value)
