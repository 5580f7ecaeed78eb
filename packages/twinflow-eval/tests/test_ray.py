"""The runner on Ray (a local Ray of two CPUs, once per session): the same results, verified."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from eval_testkit import START, dataset, dying_factory, factory

from twinflow.agent import Agent
from twinflow.eval import Case, EvalResults, RunAborted, run_eval
from twinflow.eval._limiter import EvalBudget
from twinflow.eval._rescore import merge_runs, rescore
from twinflow.eval._results import Shard
from twinflow.kernel import RayExecutor, SteppingClock
from twinflow.kernel._errors import TransportError
from twinflow.trace import TraceSink

CLOCK = SteppingClock(START)


def _same(results: EvalResults) -> list[tuple[Any, ...]]:
    """What must not depend on where cases ran: verdicts, scores and reasons, trace roots."""
    return [
        (c.key, c.status, c.scores, c.checkpoint, c.run_status, c.error, c.problem)
        for c in results.cases
    ]


def _files(run_dir: Path) -> list[str]:
    """Every file in the run's traces folder but the Lab Notes trace pages (``.html``)."""
    return sorted(p.name for p in (run_dir / "traces").iterdir() if p.suffix != ".html")


def test_a_run_on_ray_gives_the_local_runs_results(
    ray_executor: RayExecutor, tmp_path: Path
) -> None:
    """Same results.json (scores, reasons, roots) and trace bytes as a local run; rescore agrees."""
    data = dataset(10, wrong=(2, 7), bad=(5,))
    local = run_eval(data, factory(), tmp_path / "local", clock=CLOCK)
    seen: list[tuple[int, int]] = []
    on_ray = run_eval(
        data,
        factory(),
        tmp_path / "ray",
        clock=CLOCK,
        executor=ray_executor,
        concurrency=2,
        progress=lambda done, total, _: seen.append((done, total)),
    )
    assert _same(local) == _same(on_ray)
    assert (local.summary, local.complete) == (on_ray.summary, on_ray.complete)
    for name in _files(tmp_path / "local"):
        local_bytes = (tmp_path / "local" / "traces" / name).read_bytes()
        assert local_bytes == (tmp_path / "ray" / "traces" / name).read_bytes()
    assert _files(tmp_path / "local") == _files(tmp_path / "ray")
    assert [(n, 10) for n in range(11)] == seen
    assert _same(on_ray) == _same(rescore(tmp_path / "ray"))


def test_a_worker_killed_mid_case_is_retried_once_and_counted_once(
    ray_executor: RayExecutor, tmp_path: Path
) -> None:
    """c1's worker dies mid-case once; Ray runs it again; one result, one whole trace each."""
    markers = tmp_path / "markers"
    markers.mkdir()
    out = tmp_path / "run"
    results = run_eval(
        dataset(4),
        dying_factory(str(markers), "c1", deaths=1),
        out,
        clock=CLOCK,
        executor=ray_executor,
        concurrency=2,
    )
    assert 2 == len((markers / "c1").read_text().splitlines())
    assert ["c0@1", "c1@1", "c2@1", "c3@1"] == [c.key for c in results.cases]
    assert (4, 4, True) == (results.summary.total, results.summary.passed, results.complete)
    assert ["c0@1.jsonl", "c1@1.jsonl", "c2@1.jsonl", "c3@1.jsonl"] == _files(out)
    assert _same(results) == _same(rescore(out))


def test_a_case_whose_worker_dies_twice_aborts_the_run_naming_it(
    ray_executor: RayExecutor, tmp_path: Path
) -> None:
    """No third attempt: the run stops naming the case, and a resume finishes it."""
    markers = tmp_path / "markers"
    markers.mkdir()
    out = tmp_path / "run"
    with pytest.raises(RunAborted, match="case c0@1: call 0 was lost"):
        run_eval(
            dataset(3),
            dying_factory(str(markers), "c0", deaths=2),
            out,
            clock=CLOCK,
            executor=ray_executor,
        )
    assert 2 == len((markers / "c0").read_text().splitlines())
    assert [] == _files(out)
    resumed = run_eval(dataset(3), factory(), out, clock=CLOCK, executor=ray_executor)
    assert (3, True) == (resumed.summary.passed, resumed.complete)


def test_an_unreachable_model_aborts_naming_the_node_and_keeps_finished_cases(
    ray_executor: RayExecutor, tmp_path: Path
) -> None:
    """A transport failure on a worker stops the run, names the node; a resume runs only the rest."""
    inner = factory()

    def unreachable(case: Case, sink: TraceSink, seed: int) -> Agent[Any]:
        agent = inner(case, sink, seed)
        if case.id == "c2":

            def refuse(request: Any) -> Any:
                raise TransportError(
                    "connection refused", reason="connect", url="http://127.0.0.1:9"
                )

            agent.model = type(agent.model)(refuse)
        return agent

    out = tmp_path / "run"
    with pytest.raises(RunAborted, match="case c2@1: the model could not be reached") as caught:
        run_eval(dataset(4), unreachable, out, clock=CLOCK, executor=ray_executor)
    notes = getattr(caught.value, "__notes__", [])
    assert 1 == len(notes)
    assert notes[0].startswith("raised on Ray node ")
    assert ["c0@1.json", "c1@1.json"] == sorted(p.name for p in (out / "cases").iterdir())
    assert ["c0@1.jsonl", "c1@1.jsonl"] == _files(out)
    resumed = run_eval(dataset(4), factory(), out, clock=CLOCK, executor=ray_executor)
    assert (4, True) == (resumed.summary.passed, resumed.complete)


def test_a_trace_that_does_not_verify_is_flagged_and_never_kept_as_the_trace(
    ray_executor: RayExecutor, tmp_path: Path
) -> None:
    """The driver verifies what a worker returns: a bad trace flags its case and is set aside."""
    inner = factory()

    def tampering(case: Case, sink: TraceSink, seed: int) -> Agent[Any]:
        if case.id == "c1":
            sink.write(b'{"not": "a trace event"}\n')
        return inner(case, sink, seed)

    out = tmp_path / "run"
    results = run_eval(dataset(3), tampering, out, clock=CLOCK, executor=ray_executor)
    flagged = [c for c in results.cases if c.status == "flagged"]
    assert ["c1@1"] == [c.key for c in flagged]
    assert (flagged[0].problem or "").startswith("the trace a worker returned did not verify: ")
    assert ["c0@1.jsonl", "c1@1.rejected.jsonl", "c2@1.jsonl"] == _files(out)
    assert ["c1@1"] == [c.key for c in rescore(out).cases if c.status == "flagged"]


def test_shards_run_on_ray_merge_into_the_local_runs_results(
    ray_executor: RayExecutor, tmp_path: Path
) -> None:
    """Two shards on Ray, merged, equal one local unsharded run."""
    data = dataset(8, wrong=(3,))
    local = run_eval(data, factory(), tmp_path / "local", clock=CLOCK)
    shards = [tmp_path / "s1", tmp_path / "s2"]
    for index, shard_dir in enumerate(shards, start=1):
        run_eval(
            data,
            factory(),
            shard_dir,
            clock=CLOCK,
            executor=ray_executor,
            concurrency=2,
            shard=Shard(index=index, count=2),
        )
    merged = merge_runs(shards, tmp_path / "merged")
    assert _same(local) == _same(merged)


def test_a_good_trace_of_another_case_is_flagged(ray_executor: RayExecutor, tmp_path: Path) -> None:
    """A worker returning a verifying trace of another prompt (c0's, for c1) is caught."""
    inner = factory()

    def swapping(case: Case, sink: TraceSink, seed: int) -> Agent[Any]:
        agent = inner(case, sink, seed)
        if case.id == "c1":
            run = agent.run
            agent.run = lambda prompt: run("10.0 USD")  # type: ignore[method-assign]  # c0's prompt
        return agent

    out = tmp_path / "run"
    results = run_eval(dataset(3), swapping, out, clock=CLOCK, executor=ray_executor)
    assert ["flagged"] == [c.status for c in results.cases if c.key == "c1@1"]
    assert "another prompt than this case's" in (results.cases[1].problem or "")
    assert ["c0@1.jsonl", "c1@1.rejected.jsonl", "c2@1.jsonl"] == _files(out)


def test_trials_on_ray_give_the_local_runs_seeds_and_statistics(
    ray_executor: RayExecutor, tmp_path: Path
) -> None:
    """Three trials of each case on Ray: the same keys, seeds, trace bytes and trial statistics
    as a local run."""
    data = dataset(3, wrong=(1,)).model_copy(update={"trials": 3})
    local = run_eval(data, factory(), tmp_path / "local", clock=CLOCK)
    on_ray = run_eval(
        data, factory(), tmp_path / "ray", clock=CLOCK, executor=ray_executor, concurrency=2
    )
    assert [0, 1000, 2000] * 3 == [c.seed for c in on_ray.cases]
    assert _same(local) == _same(on_ray)
    assert local.trials == on_ray.trials
    for name in _files(tmp_path / "local"):
        local_bytes = (tmp_path / "local" / "traces" / name).read_bytes()
        assert local_bytes == (tmp_path / "ray" / "traces" / name).read_bytes()


def test_an_eval_on_ray_stops_starting_cases_at_its_total_budget(
    ray_executor: RayExecutor, tmp_path: Path
) -> None:
    """Two requests a case and a budget of three, one case at a time: two ran, as locally."""
    results = run_eval(
        dataset(6),
        factory(),
        tmp_path / "run",
        clock=CLOCK,
        executor=ray_executor,
        budget=EvalBudget({"requests": 3}),
    )
    expected = (
        "budget requests reached 4, over the eval's limit of 3 (budget_exceeded): "
        "no case started after 2 ran"
    )
    assert (2, False, expected) == (len(results.cases), results.complete, results.stopped)
    assert ["c0@1.jsonl", "c1@1.jsonl"] == _files(tmp_path / "run")
