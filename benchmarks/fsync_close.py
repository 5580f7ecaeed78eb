"""Benchmark: an eval case's cost under ``fsync="none"``, against the old sink that synced at close.

Scenario: one scripted case as the eval runner runs it (a `FunctionModel` that answers at once,
an agent writing its trace to a new file, the file closed), repeated N times. Measured in the same
run: the current `FileTraceSink` (closing never syncs), the baseline (the same sink with the one
fsync at close it used to pay: `SyncOnCloseSink` below), ``fsync="step"`` for scale, and an
in-memory sink (no file at all). ``"none"`` means none; the figure to read is
the baseline / current ratio and the share of the baseline's time its close-time fsync took.

Usage: .venv/bin/python benchmarks/fsync_close.py [--cases N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from _bench import add_smoke  # this folder: sys.path[0]

from twinflow.agent import Agent, FunctionModel
from twinflow.kernel import CountingIds, SteppingClock
from twinflow.trace import FileTraceSink, FsyncPolicy, MemoryTraceSink, TraceSink
from twinflow.vocab import Message

START = datetime(2026, 1, 1, tzinfo=UTC)


class SyncOnCloseSink(FileTraceSink):
    """The baseline: the file sink as it was, paying one fsync when it closes."""

    synced = False

    def close(self) -> None:
        """Sync (once), then close."""
        if not self.synced:
            self.synced = True
            self.flush(durable=True)
        super().close()


def one_case(sink: TraceSink, fsync: FsyncPolicy) -> None:
    """Run one scripted case and close its trace, as the eval runner does."""
    model = FunctionModel(lambda request: Message.assistant("yes"))
    try:
        Agent(model, clock=SteppingClock(START), ids=CountingIds(), trace=sink, fsync=fsync).run(
            "q"
        )
    finally:
        sink.close()


def per_case_ms(make: Callable[[int], TraceSink], fsync: FsyncPolicy, n: int) -> float:
    """Median milliseconds per case over ``n`` cases."""
    times = []
    for i in range(n):
        sink = make(i)
        start = time.perf_counter()
        one_case(sink, fsync)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def main() -> None:
    """Print ms/case for each sink and the ratios."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", type=int, default=300)
    add_smoke(parser)
    args = parser.parse_args()
    n = 3 if args.smoke else args.cases
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)

        def file_sink(kind: str) -> Callable[[int], TraceSink]:
            cls = SyncOnCloseSink if kind == "baseline" else FileTraceSink
            return lambda i: cls(root / f"{kind}-{i}-{time.perf_counter_ns()}.jsonl")

        per_case_ms(file_sink("warm"), "none", 20)  # imports, schema builds, caches
        rows = {
            "memory sink (no file)": per_case_ms(lambda i: MemoryTraceSink(), "none", n),
            'file, fsync="none" (now)': per_case_ms(file_sink("none"), "none", n),
            'file, fsync="none", sync at close (baseline)': per_case_ms(
                file_sink("baseline"), "none", n
            ),
            'file, fsync="step"': per_case_ms(file_sink("step"), "step", n),
        }
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; cases: {n}")
    for name, ms in rows.items():
        print(f"{name:<46} {ms:8.3f} ms/case")
    now = rows['file, fsync="none" (now)']
    baseline = rows['file, fsync="none", sync at close (baseline)']
    print(
        f'fsync="none": baseline / now = {baseline / now:.2f}x; the close-time fsync was '
        f"{(baseline - now) / baseline:.0%} of the baseline's case"
    )


if __name__ == "__main__":
    main()
