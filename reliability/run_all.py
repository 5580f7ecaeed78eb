"""Run every reliability campaign in one mode, one after another, and summarise.

    .venv/bin/python reliability/run_all.py --short     (what `scripts/check --reliability` runs)
    .venv/bin/python reliability/run_all.py --full      (the figures in docs/reliability.md)

Each campaign runs in its own process (they fork, kill and set signal handlers) with a
wall-clock bound; the exit status is 0 only if every campaign passed.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
CAMPAIGNS = ("tamper", "crash", "fuzz", "faults", "load", "hostile", "resume")
# A hang guard per campaign, not a speed target: the short hostile campaign alone takes two to
# three minutes on a quiet two-core machine, and a CI machine may be running other jobs.
BOUND_S = {"short": 600, "full": 1800}


def main() -> int:
    """Run the campaigns; print a summary table."""
    parser = argparse.ArgumentParser(description=__doc__)
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--short", action="store_true", help="bounded CI mode (default)")
    group.add_argument("--full", action="store_true", help="the published figures")
    parser.add_argument("campaigns", nargs="*", help=f"a subset of {', '.join(CAMPAIGNS)}")
    args = parser.parse_args()
    unknown = set(args.campaigns) - set(CAMPAIGNS)
    if unknown:
        parser.error(f"unknown campaigns {sorted(unknown)}; choose from {', '.join(CAMPAIGNS)}")
    mode = "full" if args.full else "short"
    rows = []
    for name in args.campaigns or CAMPAIGNS:
        started = time.perf_counter()
        try:
            done = subprocess.run(
                [sys.executable, str(HERE / f"{name}.py"), f"--{mode}"],
                timeout=BOUND_S[mode],
                check=False,
            )
            status = "ok" if done.returncode == 0 else "FAILED"
        except subprocess.TimeoutExpired:
            status = f"TIMEOUT>{BOUND_S[mode]}s"
        rows.append((name, status, time.perf_counter() - started))
    print(f"\n=== reliability ({mode})")
    for name, status, seconds in rows:
        print(f"{name:8}  {status:10}  {seconds:7.1f}s")
    return 0 if all(status == "ok" for _, status, _ in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
