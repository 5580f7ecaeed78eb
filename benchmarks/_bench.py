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
