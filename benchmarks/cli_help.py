"""Benchmark: `twinflow --help` against an empty interpreter, started the same way.

Peer, measured in the same run: `python -c pass` (the interpreter's own start-up, which no
command can beat). Target: `twinflow --help` within 80 ms of the peer, which holds
as long as the command table stays lazy (`twinflow.cli._main.COMMAND_TABLE`: no command
module, pydantic or agent is imported to print the help).

Usage: .venv/bin/python benchmarks/cli_help.py [--runs N]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

TARGET_MS = 80.0


def _median_ms(argv: list[str], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=21, help="runs of each (median reported)")
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="a few iterations: checks the benchmark runs, no figures to read",
    )
    args = parser.parse_args()
    if args.smoke:
        args.runs = 2
    empty = _median_ms([sys.executable, "-c", "pass"], args.runs)
    help_ = _median_ms([sys.executable, "-m", "twinflow.cli", "--help"], args.runs)
    version = _median_ms([sys.executable, "-m", "twinflow.cli", "--version"], args.runs)
    print(f"empty interpreter       {empty:7.1f} ms (median of {args.runs})")
    print(f"twinflow --help         {help_:7.1f} ms  (+{help_ - empty:.1f} ms)")
    print(f"twinflow --version      {version:7.1f} ms  (+{version - empty:.1f} ms)")
    verdict = "ok" if help_ - empty <= TARGET_MS else "OVER TARGET"
    print(f"target: --help within {TARGET_MS:.0f} ms of the empty interpreter: {verdict}")


if __name__ == "__main__":
    main()
