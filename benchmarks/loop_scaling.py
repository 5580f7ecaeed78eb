"""Benchmark: agent loop µs/step as the run grows (10 to 10,000 steps), against a copying append.

Scenario: `benchmarks/loop.py`'s scripted model (one ``add`` tool call per step, then an answer),
trace to an in-memory sink so only the loop is measured. Printed for N = 10, 100, 1000, 10000:
µs/step now, the same with garbage collection off (what the collector adds), and the baseline,
measured in the same run: `Transcript.append` replaced by the copying append it used to be (each
step a new tuple of every message so far). Target: µs/step at 10,000 steps
within 1.2x of 10 steps.

Usage: .venv/bin/python benchmarks/loop_scaling.py [--max-steps N]
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from _bench import add_smoke  # this folder: sys.path[0]
from loop import twinflow_run

from twinflow.vocab import Message, Transcript

SIZES = (10, 100, 1000, 10000)


def copying_append(self: Transcript, *messages: Message) -> Transcript:
    """The baseline: a new tuple of every message so far on each append (no call-id check)."""
    return Transcript.model_construct(messages=self.messages + messages)


@contextmanager
def baseline() -> Iterator[None]:
    """Run the loop with the copying append."""
    real = Transcript.append
    Transcript.append = copying_append  # type: ignore[method-assign]
    try:
        yield
    finally:
        Transcript.append = real  # type: ignore[method-assign]


@contextmanager
def no_gc() -> Iterator[None]:
    """Run with the cyclic garbage collector off."""
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def us_per_step(steps: int, directory: Path) -> float:
    """Median µs/step over a few runs (more for short runs, which are noisy)."""
    repeats = 30 if steps <= 10 else 9 if steps <= 100 else 3
    times = []
    for _ in range(repeats):
        gc.collect()
        times.append(twinflow_run(steps, directory, "memory"))
    return statistics.median(times) / steps * 1e6


def main() -> None:
    """Print the table and the ratios."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--max-steps", type=int, default=SIZES[-1])
    add_smoke(parser)
    args = parser.parse_args()
    sizes = [n for n in SIZES if n <= (100 if args.smoke else args.max_steps)]
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        for _ in range(3):  # warm-up: imports, schema builds
            twinflow_run(10, directory, "memory")
        print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        print(f"{'steps':>6} {'now us/step':>12} {'gc off':>8} {'copying append (baseline)':>26}")
        rows = {}
        for steps in sizes:
            now = us_per_step(steps, directory)
            with no_gc():
                off = us_per_step(steps, directory)
            with baseline():
                base = us_per_step(steps, directory)
            rows[steps] = (now, off, base)
            print(f"{steps:>6} {now:>12.1f} {off:>8.1f} {base:>26.1f}")
        print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    first, last = rows[sizes[0]], rows[sizes[-1]]
    print(
        f"{sizes[-1]} steps / {sizes[0]} steps: now {last[0] / first[0]:.2f}x (target <= 1.2x), "
        f"baseline {last[2] / first[2]:.2f}x; the collector adds {last[0] / last[1] - 1:.0%} "
        f"at {sizes[-1]} steps now"
    )


if __name__ == "__main__":
    main()
