"""Run every benchmark in this folder, each in a fresh interpreter, and say which ones broke.

`--smoke` (what CI runs) passes `--smoke` to each: a few iterations, enough to prove the
benchmark still imports, builds what it measures and prints its table; its figures mean
nothing and no target is judged. Without `--smoke` each runs in full and prints its targets.

The list is this folder's `*.py` files (this runner and `_`-prefixed helpers aside), so a new
benchmark is run without being registered anywhere, and one that does not take `--smoke`
fails the run.

Usage: .venv/bin/python benchmarks/run_all.py [--smoke] [NAME ...]
Exit status: 0 if every benchmark exited 0, 1 otherwise.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

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
    for path in chosen:
        command = [sys.executable, str(path), *(["--smoke"] if args.smoke else [])]
        print(f"=== {path.stem}", flush=True)
        start = time.monotonic()
        try:
            code = subprocess.run(
                command, cwd=HERE.parent, timeout=SMOKE_LIMIT_S if args.smoke else None
            ).returncode
        except subprocess.TimeoutExpired:
            print(f"{path.stem}: still running after {SMOKE_LIMIT_S} s; stopped", flush=True)
            code = 124
        results.append((path.stem, code, time.monotonic() - start))
    print(f"{'benchmark':<22}{'status':>8}{'seconds':>9}")
    for name, code, seconds in results:
        print(f"{name:<22}{'ok' if code == 0 else f'exit {code}':>8}{seconds:>9.1f}")
    broken = [name for name, code, _ in results if code != 0]
    if broken:
        print(f"broken: {', '.join(broken)}", file=sys.stderr)
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
