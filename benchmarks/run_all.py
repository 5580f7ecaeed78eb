"""Run every benchmark in this folder, each in a fresh interpreter, and say which ones broke.

`--smoke` (what CI runs) passes `--smoke` to each: a few iterations, enough to prove the
benchmark still imports, builds what it measures and prints its table; its figures mean
nothing and no target is judged. Without `--smoke` each runs in full and prints its targets.

The list is this folder's `*.py` files (this runner and `_`-prefixed helpers aside), so a new
benchmark is run without being registered anywhere, and one that does not take `--smoke`
fails the run.

At the end it prints the five floors (`_bench.FLOORS`, docs/performance.md), each with the peer
measured in the same run and whether it is met: the lines the benchmarks printed through
`_bench.report_floor`. A floor whose benchmark was not run (or broke) says so.

Usage: .venv/bin/python benchmarks/run_all.py [--smoke] [NAME ...]
Exit status: 0 if every benchmark exited 0, 1 otherwise.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

from _bench import FLOOR_TAG, FLOORS  # this folder: sys.path[0]

HERE = Path(__file__).resolve().parent

# A safety net for a benchmark that hangs (a server that never answers): smoke runs take
# seconds to a minute or two each, even on a loaded two-core machine.
SMOKE_LIMIT_S = 900


def benchmarks() -> list[Path]:
    """Every benchmark script in this folder, by name."""
    return sorted(
        path
        for path in HERE.glob("*.py")
        if path.name != Path(__file__).name and not path.name.startswith("_")
    )


def run(command: list[str], limit: float | None, floors: dict[str, str]) -> int:
    """Run one benchmark, echoing its output; note the floor lines it prints in ``floors``.

    Returns:
        Its exit code (124 when stopped after ``limit`` seconds).
    """
    child = subprocess.Popen(command, cwd=HERE.parent, stdout=subprocess.PIPE, text=True)
    deadline = None if limit is None else time.monotonic() + limit
    assert child.stdout is not None
    for line in child.stdout:
        print(line, end="", flush=True)
        if line.startswith(FLOOR_TAG):
            name, _, rest = line[len(FLOOR_TAG) :].rstrip("\n").partition(" | ")
            floors[name] = rest
        if deadline is not None and time.monotonic() > deadline:
            child.kill()
            child.wait()
            return 124
    return child.wait()


def main() -> int:
    """Run the chosen benchmarks and print a summary table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="a few iterations each, no targets")
    parser.add_argument("names", nargs="*", help="benchmarks to run (default: all), e.g. loop")
    args = parser.parse_args()
    chosen = benchmarks()
    if args.names:
        known = {path.stem: path for path in chosen}
        unknown = [name for name in args.names if name.removesuffix(".py") not in known]
        if unknown:
            parser.error(f"no benchmark named {', '.join(unknown)}; known: {', '.join(known)}")
        chosen = [known[name.removesuffix(".py")] for name in args.names]
    results: list[tuple[str, int, float]] = []
    floors: dict[str, str] = {}
    for path in chosen:
        command = [sys.executable, str(path), *(["--smoke"] if args.smoke else [])]
        print(f"=== {path.stem}", flush=True)
        start = time.monotonic()
        code = run(command, SMOKE_LIMIT_S if args.smoke else None, floors)
        if code == 124:
            print(f"{path.stem}: still running after {SMOKE_LIMIT_S} s; stopped", flush=True)
        results.append((path.stem, code, time.monotonic() - start))
    print(f"{'benchmark':<22}{'status':>8}{'seconds':>9}")
    for name, code, seconds in results:
        print(f"{name:<22}{'ok' if code == 0 else f'exit {code}':>8}{seconds:>9.1f}")
    print("floors (figure | floor | peer in the same run | verdict):")
    for floor in FLOORS:
        print(f"  {floor}: {floors.get(floor, 'not measured in this run')}")
    broken = [name for name, code, _ in results if code != 0]
    if broken:
        print(f"broken: {', '.join(broken)}", file=sys.stderr)
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
