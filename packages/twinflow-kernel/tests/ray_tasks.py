"""Calls for the RayExecutor tests: importable by name on a Ray worker (its PYTHONPATH has this
directory), so they pickle by reference."""

from __future__ import annotations

import os
from pathlib import Path


def square(n: int) -> int:
    """The square of ``n``."""
    return n * n


def fail_on_three(n: int) -> int:
    """``n``, except that 3 raises ``ValueError``."""
    if n == 3:
        raise ValueError("three is not allowed")
    return n


def attempt(marker_dir: str, n: int, deaths: int) -> int:
    """Record an attempt at ``n``; the worker process dies on the first ``deaths`` attempts.

    The attempts are lines of ``<marker_dir>/<n>``, so the test counts them after the run.
    """
    path = Path(marker_dir) / str(n)
    with path.open("a") as f:
        f.write("attempt\n")
    if len(path.read_text().splitlines()) <= deaths:
        os._exit(1)  # the worker dies mid-call, unwarned, as a killed or crashed process does
    return n


def interpreter(n: int) -> tuple[int, str, str]:
    """``n`` with the worker's interpreter and its environment's prefix."""
    import sys

    return n, sys.executable, sys.prefix
