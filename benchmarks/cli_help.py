"""Benchmark: `twinflow --help`, `twinflow verify --help` and `twinflow --version` against an empty interpreter.

Peer, measured in the same run: `python -c pass` (the interpreter's own start-up, which no
command can beat). Each is started the same way (`python -m twinflow.cli ...`) and timed in CPU
of its process (user + system, from `os.wait4`): on a shared machine wall time also counts the
time the scheduler gives others. The runs are interleaved (a busy moment hits every command
alike) and the best of `--runs` is kept; the load average is printed beside.

Targets: `--help` and `verify --help` within 80 ms of the peer, which holds as long as the
command table stays lazy (`twinflow.cli._main.COMMAND_TABLE`: no command module, pydantic or
agent is imported to print the help) and the trace commands import the agent only in the
handlers that read typed events; `--version` below `--help` (no scan of the installed
distributions' metadata).

Both ways a module is loaded are measured: sources compiled on every import (where bytecode is
not written, PYTHONDONTWRITEBYTECODE, as in this workspace's shells and CI) and bytecode cached,
as an installed wheel has it.

Usage: .venv/bin/python benchmarks/cli_help.py [--runs N] [--smoke]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

from _bench import add_smoke, process_cpu  # this folder: sys.path[0]

TARGET_MS = 80.0

COMMANDS = {
    "empty interpreter": ["-c", "pass"],
    "twinflow --help": ["-m", "twinflow.cli", "--help"],
    "twinflow verify --help": ["-m", "twinflow.cli", "verify", "--help"],
    "twinflow diff --help": ["-m", "twinflow.cli", "diff", "--help"],
    "twinflow --version": ["-m", "twinflow.cli", "--version"],
}


def cpu_ms(argv: list[str], env: dict[str, str] | None) -> float:
    """CPU milliseconds (user + system) of one process running ``argv``."""
    return process_cpu(argv, env=env) * 1000


def best_ms(runs: int, env: dict[str, str] | None) -> dict[str, float]:
    """The best CPU milliseconds of each command over ``runs`` interleaved rounds."""
    best: dict[str, float] = {}
    for _ in range(runs):
        for name, args in COMMANDS.items():
            got = cpu_ms([sys.executable, *args], env)
            best[name] = min(best.get(name, got), got)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15, help="rounds of each (best reported)")
    add_smoke(parser)
    args = parser.parse_args()
    if args.smoke:
        args.runs = 1
    with tempfile.TemporaryDirectory() as cache:
        compiled = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
        cached = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        cached["PYTHONPYCACHEPREFIX"] = cache
        for argv in COMMANDS.values():  # fill the bytecode cache once
            cpu_ms([sys.executable, *argv], cached)
        for label, env in (("sources compiled", compiled), ("bytecode cached", cached)):
            load = os.getloadavg()[0]
            best = best_ms(args.runs, env)
            empty = best["empty interpreter"]
            print(f"{label}: CPU ms of the process, best of {args.runs}, load {load:.1f}")
            for name, ms in best.items():
                extra = "" if name == "empty interpreter" else f"  (+{ms - empty:.1f} ms)"
                print(f"  {name:<24}{ms:7.1f} ms{extra}")
            if args.smoke:
                continue  # a few iterations: no target is judged
            for name in ("twinflow --help", "twinflow verify --help"):
                over = best[name] - empty
                verdict = "met" if over <= TARGET_MS else "NOT MET"
                print(f"  target: {name} within {TARGET_MS:.0f} ms of the empty one: {verdict}")
            version, help_ = best["twinflow --version"], best["twinflow --help"]
            verdict = "met" if version < help_ else "NOT MET"
            print(f"  target: --version below --help ({version / help_:.2f}x): {verdict}")


if __name__ == "__main__":
    main()
