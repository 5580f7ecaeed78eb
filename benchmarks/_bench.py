"""What the benchmarks share: the ``--smoke`` option `run_all.py` passes to each, and the CPU of
a whole child process.

Not a benchmark itself (the leading underscore keeps `run_all.py` from running it).
"""

from __future__ import annotations

import argparse
import os
import subprocess
from collections.abc import Collection, Sequence


def add_smoke(parser: argparse.ArgumentParser) -> None:
    """Give ``parser`` the ``--smoke`` flag: a few iterations, to check the benchmark runs."""
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="a few iterations: checks the benchmark runs, no figures to read",
    )


def process_cpu(
    argv: Sequence[str],
    *,
    name: str | None = None,
    env: dict[str, str] | None = None,
    stderr: int | None = None,
    exits: Collection[int] = (0,),
) -> float:
    """CPU seconds (user + system, from `os.wait4`) of one process running ``argv``.

    Its output is discarded (``stderr`` too when it is `subprocess.DEVNULL`); an exit code not
    in ``exits`` stops the benchmark, saying ``name`` (the command line unless given) failed.
    """
    child = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=stderr, env=env)
    _, status, usage = os.wait4(child.pid, 0)
    if os.waitstatus_to_exitcode(status) not in exits:
        raise SystemExit(f"{name or ' '.join(argv)} failed")
    return usage.ru_utime + usage.ru_stime


FLOOR_TAG = "floor | "
"""Opens each line `report_floor` prints: `run_all.py` collects those lines into its table."""

FLOORS = (
    "loop at 10 steps",
    "replay",
    "resume of a 1,000-step prefix",
    "twinflow verify",
    "first streamed delta",
)
"""The floors, in the order `run_all.py` prints them (docs/performance.md says why each)."""


def report_floor(
    name: str, value: str, floor: str, peer: str, *, met: bool, smoke: bool = False
) -> None:
    """Print one floor's line: the figure, the floor, the peer measured in the same run, met or not.

    Args:
        name: One of `FLOORS`.
        value: The figure held to the floor (``7.1x``, ``0.62 ms``).
        floor: The floor (``>= 5x``).
        peer: The peer measured in the same run, and its figure.
        met: Whether the figure meets the floor.
        smoke: A smoke run: its figures mean nothing, and no verdict is given.
    """
    if name not in FLOORS:
        raise ValueError(f"{name!r} is not one of the floors {FLOORS}")
    verdict = "smoke, not judged" if smoke else "met" if met else "NOT MET"
    print(f"{FLOOR_TAG}{name} | {value} | {floor} | {peer} | {verdict}", flush=True)
