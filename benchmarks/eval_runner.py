"""Benchmark: eval runner overhead per case with a scripted model, and wall time for 1000 cases.

Peer, measured in the same run: the same agent run directly in a loop, writing the same trace
files (no dataset, no scoring, no result files); the runner is given a progress callback, as
`twinflow eval run` gives it one. The runner's overhead per case is the difference in CPU time of this process (``time.process_time``: user and system), each side the
best of ``--repeats`` batches of ``--batch`` cases, the two interleaved within each repeat so
both see the same load; the target is at most 1 ms. Then 1000 scripted cases through the
runner at concurrency 1 (SerialExecutor) and 8 (ThreadExecutor), in wall time.

Ray (the ray extra; skipped with --no-ray): the same 1000 cases on a local Ray of ``--ray-cpus``
workers (RayExecutor, each case a task returning its trace to the driver, which verifies and
writes it), against the local ThreadExecutor at the same concurrency, in the same run. The
fixed start-up cost (starting Ray and its first workers) is timed apart from the run.

Usage: .venv/bin/python benchmarks/eval_runner.py [--cases N] [--no-ray] [--ray-cpus C]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from twinflow.agent import Agent, FunctionModel
from twinflow.eval import Case, Dataset, Summary, run_eval
from twinflow.kernel import (
    CountingIds,
    Executor,
    RayExecutor,
    SerialExecutor,
    SteppingClock,
    SystemClock,
    ThreadExecutor,
)
from twinflow.trace import FileTraceSink, TraceSink
from twinflow.vocab import Message, ModelSettings

START = datetime(2026, 1, 1, tzinfo=UTC)


def _agent(sink: TraceSink, seed: int | None = None) -> Agent[Any]:
    model = FunctionModel(lambda request: Message.assistant("yes"))
    return Agent(
        model,
        clock=SteppingClock(START),
        ids=CountingIds(),
        trace=sink,
        fsync="none",
        settings=ModelSettings(seed=seed),
    )


def _factory(case: Case, sink: TraceSink, seed: int) -> Agent[Any]:
    return _agent(sink, seed)


def _progress(done: int, total: int, summary: Summary) -> None:
    """The runner's progress callback, doing nothing with what it is given."""


def _dataset(n: int) -> Dataset:
    return Dataset(
        name="bench", cases=tuple(Case(id=f"c{i}", input=f"q{i}", expected="yes") for i in range(n))
    )


def _direct(n: int, root: Path, clock: Callable[[], float] = time.perf_counter) -> float:
    root.mkdir(exist_ok=True)
    start = clock()
    for i in range(n):
        sink = FileTraceSink(root / f"c{i}.jsonl")
        _agent(sink).run(f"q{i}")
        sink.close()
    return clock() - start


def _runner(
    n: int,
    root: Path,
    concurrency: int,
    executor: Executor | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> float:
    if executor is None:
        executor = ThreadExecutor() if concurrency > 1 else SerialExecutor()
    start = clock()
    results = run_eval(
        _dataset(n),
        _factory,
        root,
        clock=SystemClock(),
        executor=executor,
        concurrency=concurrency,
        progress=_progress,  # as `twinflow eval run` passes one (its redrawn line)
    )
    elapsed = clock() - start
    assert results.summary.passed == n
    return elapsed


def _overhead(batch: int, repeats: int, root: Path) -> tuple[float, float]:
    """(direct, runner) CPU ms per case, each the best of ``repeats`` interleaved batches."""
    direct = runner = float("inf")
    for repeat in range(repeats):
        direct = min(direct, _direct(batch, root / f"od{repeat}", time.process_time))
        runner = min(runner, _runner(batch, root / f"or{repeat}", 1, clock=time.process_time))
    return direct / batch * 1000, runner / batch * 1000


def main() -> None:
    """Print per-case overhead and wall times."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--no-ray", action="store_true", help="skip the Ray comparison")
    parser.add_argument("--ray-cpus", type=int, default=2, help="workers of the local Ray")
    parser.add_argument("--batch", type=int, default=200, help="cases per overhead batch")
    parser.add_argument("--repeats", type=int, default=7, help="overhead batches, best taken")
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="a few iterations: checks the benchmark runs, no figures to read",
    )
    args = parser.parse_args()
    n = 5 if args.smoke else args.cases
    batch, repeats = (5, 1) if args.smoke else (args.batch, args.repeats)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        _direct(batch, root / "warm-d")  # imports, schema builds, caches
        _runner(batch, root / "warm-r", 1)
        direct_cpu, runner_cpu = _overhead(batch, repeats, root)
        direct = _direct(n, root / "direct")
        serial = _runner(n, root / "c1", 1)
        threaded = _runner(n, root / "c8", 8)
        ray_lines = [] if args.no_ray else _ray(n, root, args.ray_cpus)
        print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    overhead_ms = runner_cpu - direct_cpu
    verdict = "meets" if overhead_ms <= 1 else "MISSES"
    print(
        f"CPU per case, best of {repeats} interleaved batches of {batch}: direct {direct_cpu:.3f} ms, "
        f"runner {runner_cpu:.3f} ms"
    )
    print(f"runner overhead per case:  {overhead_ms:.3f} ms CPU ({verdict} the <= 1 ms target)")
    print(f"cases: {n}")
    print(f"direct agent loop (peer):  {direct:.3f} s  ({direct / n * 1000:.3f} ms/case)")
    print(
        f"runner, concurrency 1:     {serial:.3f} s  ({serial / n * 1000:.3f} ms/case, {serial / direct:.2f}x peer)"
    )
    print(
        f"runner, concurrency 8:     {threaded:.3f} s  ({threaded / n * 1000:.3f} ms/case, {threaded / direct:.2f}x peer)"
    )
    for line in ray_lines:
        print(line)


def _ray(n: int, root: Path, cpus: int) -> list[str]:
    """Ray against the thread executor at the same concurrency; start-up timed apart."""
    start = time.perf_counter()
    executor = RayExecutor(num_cpus=cpus).start()
    started = time.perf_counter() - start
    try:
        # The first tasks wait for worker processes to start: part of the fixed cost too.
        start = time.perf_counter()
        list(executor.map_bounded(abs, range(cpus), cpus))
        warm = time.perf_counter() - start
        on_ray = _runner(n, root / "ray", cpus, executor)
    finally:
        executor.close()
    threads = _runner(n, root / f"t{cpus}", cpus, ThreadExecutor())
    per_case_ms = (on_ray - threads) / n * 1000
    return [
        f"Ray start-up (fixed):      {started + warm:.3f} s  "
        f"(ray.init {started:.3f} s, first workers {warm:.3f} s)",
        f"threads, concurrency {cpus}:   {threads:.3f} s  ({threads / n * 1000:.3f} ms/case)",
        f"Ray, concurrency {cpus}:       {on_ray:.3f} s  "
        f"({on_ray / n * 1000:.3f} ms/case, {on_ray / threads:.2f}x threads)",
        f"Ray overhead per case:     {per_case_ms:.3f} ms over the thread executor",
    ]


if __name__ == "__main__":
    main()
