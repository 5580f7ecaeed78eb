"""`twinflow diff` of two real agent traces against a floor: read both, parse, hash and compare.

Two runs of the scripted agent (`_agent_trace.py`) of the same length that differ only in the
final answer, 10k events each by default: `twinflow diff A B` (behaviour: every divergence)
finds the last events changed; `twinflow diff --exact A B` compares bytes. The floor is a process
that reads both files line by line, `json.loads` + sha256 of each line, and compares the two
lists of values: the least any diff that checks what it reads can do.

`--exact` stops at the first differing event: two traces that differ at seq 0 (another step
count changes `run_started`) are compared at 10k and at ten times the events, and the CPU of
the two is printed side by side (equal when the reading stops there).

Every figure is the CPU of the whole process (start-up and imports included, from `os.wait4`),
best of `--runs` interleaved rounds, with the load average.

Target: `twinflow diff` <= 3x the floor; `--exact` at seq 0 costs the same at 10x the events.

Run: .venv/bin/python benchmarks/trace_diff.py [--events 10000] [--runs 5] [--smoke]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from _agent_trace import steps_for, write_agent_trace  # this folder: sys.path[0]
from _bench import add_smoke, process_cpu

FLOOR = r"""
import hashlib, json, sys
def read(path):
    values = []
    with open(path, "rb") as f:
        for line in f:
            hashlib.sha256(line).digest()
            values.append(json.loads(line))
    return values
a, b = read(sys.argv[1]), read(sys.argv[2])
sys.exit(0 if a == b else 1)
"""

TARGET = 3.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=10_000, help="events in each trace")
    parser.add_argument("--runs", type=int, default=5, help="interleaved rounds (best reported)")
    add_smoke(parser)
    args = parser.parse_args()
    if args.smoke:
        args.events, args.runs = 200, 1
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        steps = steps_for(args.events)
        a, b = root / "a.jsonl", root / "b.jsonl"
        events = write_agent_trace(a, steps)
        write_agent_trace(b, steps, answer="done, differently")
        # Another step count changes run_started: these differ at seq 0.
        first, first_big = root / "first.jsonl", root / "first-big.jsonl"
        big = root / "big.jsonl"
        write_agent_trace(first, steps + 1)
        write_agent_trace(big, steps * 10)
        write_agent_trace(first_big, steps * 10 + 1)
        cases = {
            "floor: loads+sha256+compare": ["-c", FLOOR, str(a), str(b)],
            "twinflow diff": ["-m", "twinflow.cli", "diff", str(a), str(b)],
            "twinflow diff --exact": ["-m", "twinflow.cli", "diff", "--exact", str(a), str(b)],
            "--exact, differ at seq 0": [
                "-m",
                "twinflow.cli",
                "diff",
                "--exact",
                str(a),
                str(first),
            ],
            "--exact, differ at seq 0, 10x": [
                "-m",
                "twinflow.cli",
                "diff",
                "--exact",
                str(big),
                str(first_big),
            ],
        }
        best: dict[str, float] = {}
        loads = []
        for _ in range(args.runs):
            loads.append(os.getloadavg()[0])
            for name, argv in cases.items():
                got = process_cpu(
                    [sys.executable, *argv], name=name, stderr=subprocess.DEVNULL, exits=(0, 1)
                )
                best[name] = min(best.get(name, got), got)
    floor = best["floor: loads+sha256+compare"]
    print(
        f"two real agent traces of {events} events, CPU of the whole process, best of "
        f"{args.runs} interleaved (load {min(loads):.1f}-{max(loads):.1f}, {os.cpu_count()} cores):"
    )
    for name, seconds in best.items():
        print(f"  {name:<34}{seconds:>8.3f} s{seconds / floor:>8.2f}x the floor")
    if args.smoke:
        return  # a few iterations: no target is judged
    for name in ("twinflow diff", "twinflow diff --exact"):
        ratio = best[name] / floor
        print(
            f"  target: {name} <= {TARGET:.0f}x the floor: {ratio:.2f}x {'met' if ratio <= TARGET else 'NOT MET'}"
        )
    small, large = best["--exact, differ at seq 0"], best["--exact, differ at seq 0, 10x"]
    verdict = "met" if large <= small * 1.25 else "NOT MET"
    print(
        f"  target: --exact stops at seq 0 (10x the events costs {large / small:.2f}x): {verdict}"
    )


if __name__ == "__main__":
    main()
