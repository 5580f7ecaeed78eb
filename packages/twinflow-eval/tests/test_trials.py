"""Trials: each case run K times with recorded seeds; pass@k, pass^k and the clustered interval
checked against known values; resume, shards, merge and rescore per trial."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path
from typing import Any

import pytest
from eval_testkit import START, dataset, factory, reply, scripted_agent

from twinflow.agent import Agent
from twinflow.eval import (
    Case,
    Dataset,
    DatasetError,
    EvalResults,
    RunDirError,
    load_dataset,
    run_eval,
)
from twinflow.eval._report import render_markdown
from twinflow.eval._rescore import load_run, merge_runs, rescore
from twinflow.eval._results import Shard
from twinflow.eval._stats import compare_runs
from twinflow.eval._trials import clustered_stderr, pass_at_k, pass_hat_k, trial_stats
from twinflow.kernel import SteppingClock
from twinflow.trace import TraceSink
from twinflow.vocab import Message, ModelRequest, digest

CLOCK = SteppingClock(START)


def _brute_pass_at_k(n: int, c: int, k: int) -> float:
    """pass@k by enumerating every k-subset of n trials of which the first c passed."""
    subsets = list(itertools.combinations(range(n), k))
    return sum(1 for s in subsets if any(i < c for i in s)) / len(subsets)


def _brute_pass_hat_k(n: int, c: int, k: int) -> float:
    subsets = list(itertools.combinations(range(n), k))
    return sum(1 for s in subsets if all(i < c for i in s)) / len(subsets)


def test_pass_at_k_matches_known_values_and_enumeration() -> None:
    """pass@k: 0.3 for 3 of 10 at k=1, 0.7 for 2 of 5 at k=2, and every subset count agrees."""
    assert 0.3 == pytest.approx(pass_at_k(10, 3, 1))
    assert 0.7 == pytest.approx(pass_at_k(5, 2, 2))
    assert 1.0 == pass_at_k(4, 3, 2)
    for n in range(1, 8):
        for c in range(n + 1):
            for k in range(1, n + 1):
                assert _brute_pass_at_k(n, c, k) == pytest.approx(pass_at_k(n, c, k))
                # Chen et al.'s numerically stable form of the same estimator.
                stable = 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))
                assert (1.0 if n - c < k else stable) == pytest.approx(pass_at_k(n, c, k))


def test_pass_hat_k_matches_known_values_and_enumeration() -> None:
    """pass^k: 0.3 for 3 of 5 at k=2; c/n at k=1; every subset count agrees."""
    assert 0.3 == pytest.approx(pass_hat_k(5, 3, 2))
    assert 0.4 == pytest.approx(pass_hat_k(5, 2, 1))
    for n in range(1, 8):
        for c in range(n + 1):
            for k in range(1, n + 1):
                assert _brute_pass_hat_k(n, c, k) == pytest.approx(pass_hat_k(n, c, k))


def test_pass_at_k_refuses_impossible_counts() -> None:
    """More passes than trials, or k above n, is a ValueError naming the numbers."""
    with pytest.raises(ValueError, match="n=2, c=3, k=1"):
        pass_at_k(2, 3, 1)
    with pytest.raises(ValueError, match="n=2, c=1, k=3"):
        pass_hat_k(2, 1, 3)


def test_clustered_stderr_matches_a_hand_computed_value() -> None:
    """Clusters A=[1,1], B=[0,0], C=[1,0]: sqrt(3/2 * (1 + 1 + 0)) / 6 = sqrt(3) / 6."""
    values = [("a", 1.0), ("a", 1.0), ("b", 0.0), ("b", 0.0), ("c", 1.0), ("c", 0.0)]
    assert math.sqrt(3) / 6 == pytest.approx(clustered_stderr(values))


def test_clustered_stderr_with_singleton_clusters_is_the_ordinary_one() -> None:
    """One value per cluster: the clustered standard error is s / sqrt(n)."""
    xs = [1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 1.0]
    n = len(xs)
    mean = sum(xs) / n
    s = math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1))
    assert s / math.sqrt(n) == pytest.approx(
        clustered_stderr([(str(i), x) for i, x in enumerate(xs)])
    )


def test_clustered_stderr_is_wider_than_the_naive_one_when_cases_agree_with_themselves() -> None:
    """Trials that repeat their case's verdict carry less information: the clustered error grows."""
    values = [(case, float(case in "ab")) for case in "abcd" for _ in range(5)]
    n = len(values)
    naive = math.sqrt(0.5 * 0.5 / (n - 1))
    clustered = clustered_stderr(values)
    assert clustered is not None and clustered > 2 * naive
    assert None is clustered_stderr([("a", 1.0), ("a", 0.0)])


def _flaky_factory(flaky: dict[str, set[int]]) -> Any:
    """The scripted agent, answering 0 (a failure) for case ids in ``flaky`` at those seeds."""

    def build(case: Case, sink: TraceSink, seed: int) -> Agent[Any]:
        def answer(request: ModelRequest) -> Message:
            if request.settings.seed in flaky.get(case.id, set()):
                return Message.assistant(json.dumps({"total_eur": 0}))
            return reply(request)

        return scripted_agent(sink, seed, answer, max_steps=3)

    return build


def _trials_dataset(n: int = 3, trials: int = 3) -> Dataset:
    return dataset(n).model_copy(update={"trials": trials})


def test_a_run_of_three_trials_records_distinct_seeds_and_per_case_counts(tmp_path: Path) -> None:
    """Each case runs 3 times with seeds 0, 1000, 2000 read back from the traces; a case that fails
    at one seed passes 2 of 3, pass@3 is 1 and pass^3 is 0."""
    results = run_eval(
        _trials_dataset(), _flaky_factory({"c1": {1000}}), tmp_path / "run", clock=CLOCK
    )
    assert ["c0@1", "c0@2", "c0@3", "c1@1", "c1@2", "c1@3", "c2@1", "c2@2", "c2@3"] == [
        c.key for c in results.cases
    ]
    assert [0, 1000, 2000] * 3 == [c.seed for c in results.cases]
    stats = results.trials
    assert stats is not None
    assert [("c0", 3, 3), ("c1", 3, 2), ("c2", 3, 3)] == [
        (c.case_id, c.trials, c.passed) for c in stats.cases
    ]
    c1 = stats.cases[1]
    assert (1.0, 0.0) == (c1.pass_at_k, c1.pass_hat_k)
    assert 3 == stats.k
    assert 8 / 9 == pytest.approx(stats.rate)
    assert stats.interval is not None and stats.interval[0] < 8 / 9 <= stats.interval[1]
    notes = (tmp_path / "run" / "lab-notes.md").read_text()
    assert "## Trials" in notes and "| c1 | 2 | 3 | 100.0% | 0.0% |" in notes
    assert "pass@3 100.0%, pass^3 66.7%" in notes
    assert "3 trial(s) per case" in (tmp_path / "run" / "lab-notes.html").read_text()


def test_trials_argument_overrides_the_dataset_and_a_case_repeats_is_a_floor(
    tmp_path: Path,
) -> None:
    """run_eval(trials=2) runs each case twice; a case with repeats 3 runs three times."""
    data = dataset(2)
    cases = (data.cases[0].model_copy(update={"repeats": 3}), data.cases[1])
    data = data.model_copy(update={"cases": cases, "trials": 5})
    results = run_eval(data, factory(), tmp_path / "run", clock=CLOCK, trials=2)
    assert ["c0@1", "c0@2", "c0@3", "c1@1", "c1@2"] == [c.key for c in results.cases]
    assert results.trials is not None and 2 == results.trials.k
    assert 2 == load_run(tmp_path / "run")[0].trials


def test_a_resume_runs_only_the_missing_trial_and_another_trial_count_is_refused(
    tmp_path: Path,
) -> None:
    """A trial whose result is gone runs again alone; resuming with --trials 2 names both counts."""
    run_dir = tmp_path / "run"
    first = run_eval(_trials_dataset(2), factory(), run_dir, clock=CLOCK)
    (run_dir / "cases" / "c1@2.json").unlink()
    (run_dir / "traces" / "c1@2.jsonl").unlink()
    built: list[str] = []
    again = run_eval(_trials_dataset(2), factory(built), run_dir, clock=CLOCK)
    assert ["c1"] == built
    assert first.trials == again.trials
    with pytest.raises(RunDirError, match=r"another trial count \(recorded: 3; this run: 2\)"):
        run_eval(_trials_dataset(2), factory(), run_dir, clock=CLOCK, trials=2)


def test_shards_of_a_trials_run_merge_into_the_unsharded_result(tmp_path: Path) -> None:
    """Every trial of a case sits in one shard; merging gives the unsharded run's trial stats."""
    data = _trials_dataset(5, 2)
    whole = run_eval(data, _flaky_factory({"c3": {0}}), tmp_path / "whole", clock=CLOCK)
    shards = []
    for i in (1, 2):
        path = tmp_path / f"s{i}"
        run_eval(
            data, _flaky_factory({"c3": {0}}), path, clock=CLOCK, shard=Shard(index=i, count=2)
        )
        shards.append(path)
    merged = merge_runs(shards, tmp_path / "merged")
    assert whole.trials == merged.trials
    assert [c.key for c in whole.cases] == [c.key for c in merged.cases]
    other = tmp_path / "other"
    run_eval(data, factory(), other, clock=CLOCK, shard=Shard(index=2, count=2), trials=3)
    with pytest.raises(RunDirError, match=r"different numbers of trials \(2, 3\)") as caught:
        merge_runs([shards[0], other], tmp_path / "mixed")
    assert "shards" == caught.value.reason


def test_rescore_of_a_trials_run_gives_the_same_statistics(tmp_path: Path) -> None:
    """Rescoring from the traces alone reproduces every trial's verdict, seed and the statistics."""
    run_dir = tmp_path / "run"
    results = run_eval(_trials_dataset(), _flaky_factory({"c2": {0, 2000}}), run_dir, clock=CLOCK)
    again = rescore(run_dir)
    assert results.cases == again.cases
    assert results.trials == again.trials


def test_results_written_before_trials_read_and_report_as_before(tmp_path: Path) -> None:
    """A results.json without seeds or trials reads; its Lab Notes have no trials section; a
    dataset that names no trials keeps the digest it had before the field existed."""
    run_dir = tmp_path / "run"
    run_eval(dataset(3), factory(), run_dir, clock=CLOCK)
    raw = json.loads((run_dir / "results.json").read_bytes())
    assert "trials" not in raw
    for case in raw["cases"]:
        case.pop("seed")
    old = EvalResults.model_validate(raw)
    assert None is old.trials and all(c.seed is None for c in old.cases)
    assert "## Trials" not in render_markdown(old)
    data = dataset(3)
    assert digest(json.loads(data.model_dump_json())) == data.digest
    assert "trials" not in data.model_dump()
    assert None is trial_stats(old.cases, 1)


def test_compare_of_two_trials_runs_resamples_cases_and_says_mcnemar_counts_trials(
    tmp_path: Path,
) -> None:
    """Pairs are trials, clusters are cases: the bootstrap resamples 3 cases and records its
    seed, the McNemar caveat says 9 paired trials come from 3 cases, the field scorer's delta
    is 9/9 to 5/9."""
    run_eval(_trials_dataset(), factory(), tmp_path / "a", clock=CLOCK)
    flaky = _flaky_factory({"c0": {0, 1000, 2000}, "c1": {1000}})
    run_eval(_trials_dataset(), flaky, tmp_path / "b", clock=CLOCK)
    c = compare_runs(tmp_path / "a", tmp_path / "b", seed=11)
    assert -4 / 9 == pytest.approx(c.rate_delta)
    assert c.bootstrap is not None
    assert (3, 11) == (c.bootstrap.cases, c.bootstrap.seed)
    assert c.bootstrap.low <= -4 / 9 <= c.bootstrap.high
    assert "the 9 paired trials come from 3 cases: McNemar counts them" in (c.caveat or "")
    fields = c.scorers[0]
    assert (9, 9, 5) == (fields.scored, fields.passed_a, fields.passed_b)


def test_a_dataset_asking_for_no_trials_is_refused_naming_the_key(tmp_path: Path) -> None:
    """`trials: 0` in a dataset file is a DatasetError naming the file and the key."""
    path = tmp_path / "d.yaml"
    path.write_text("name: d\ntrials: 0\ncases:\n- {id: a, input: x}\n")
    with pytest.raises(DatasetError, match=r"d\.yaml:2: trials: "):
        load_dataset(path)
