"""Benchmark: the cost of one call in the bubblewrap sandbox (start-up and round trip).

Three ways to run the same small tool, `count_words(text)`, taking turns in one run:

- **sandboxed**: `Tool.from_function(count_words, sandbox=True)`, one fresh sandbox per call
  (`bwrap`, the launcher inside, the interpreter importing the tool, the work directory copied
  in and out);
- **in process**: the same tool unsandboxed, `Tool.from_function(count_words)`, as tools run
  by default;
- **subprocess.run**: the same code in a fresh interpreter, `subprocess.run([python, "-c", ...])`.

The built-in `run_python` is timed too against `subprocess.run` of the same code. Printed:
median milliseconds of wall time per call, and the sandboxed call over each of the others as
a ratio. No target: the figure tells what a sandboxed call costs.

Run: .venv/bin/python benchmarks/sandboxed_call.py [--calls N] [--smoke]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from _bench import add_smoke

from twinflow.agent import Tool
from twinflow.agent._sandboxed import SandboxSession, builtin_tools

TOOL = '''
def count_words(text: str) -> int:
    """Count the words of a text."""
    return len(text.split())
'''
CODE = "print(sum(len(line.split()) for line in ['to be or not to be'] * 100))"


def timed(call: Callable[[], object], calls: int) -> float:
    """Median wall seconds of ``call`` over ``calls`` calls."""
    seconds = []
    for _ in range(calls):
        start = time.perf_counter()
        call()
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds)


def main() -> None:
    """Parse the arguments, time the three ways in turns, print medians and ratios."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--calls", type=int, default=20)
    add_smoke(parser)
    args = parser.parse_args()
    calls = 1 if args.smoke else args.calls
    with tempfile.TemporaryDirectory(prefix="twinflow-bench-") as tmp:
        (Path(tmp) / "bench_tools.py").write_text(TOOL)
        sys.path.insert(0, tmp)
        import bench_tools  # written just above

        boxed = Tool.from_function(bench_tools.count_words, sandbox=True)
        plain = Tool.from_function(bench_tools.count_words)
        arguments = boxed.validate({"text": "to be or not to be"})
        script = f"import sys; sys.path.insert(0, {tmp!r}); import bench_tools; "
        script += "print(bench_tools.count_words('to be or not to be'))"
        (run_python,) = builtin_tools(("run_python",), SandboxSession())
        python = Tool.from_function(run_python)
        code = python.validate({"code": CODE})
        assert "6" == boxed.call(arguments) == plain.call(arguments)  # and a warm-up
        figures = {
            "tool, sandboxed": timed(lambda: boxed.call(arguments), calls),
            "tool, in process": timed(lambda: plain.call(arguments), calls),
            "tool, subprocess.run": timed(
                lambda: subprocess.run(
                    [sys.executable, "-c", script], check=True, capture_output=True
                ),
                calls,
            ),
            "run_python, sandboxed": timed(lambda: python.call(code), calls),
            "run_python code, subprocess.run": timed(
                lambda: subprocess.run(
                    [sys.executable, "-I", "-c", CODE], check=True, capture_output=True
                ),
                calls,
            ),
        }
    print(f"one call, median wall time of {calls} calls")
    for name, seconds in figures.items():
        print(f"  {name:34} {seconds * 1e3:9.2f} ms")
    sandboxed = figures["tool, sandboxed"]
    print(f"  ratio sandboxed / in process       {sandboxed / figures['tool, in process']:9.0f}")
    print(
        f"  ratio sandboxed / subprocess.run   {sandboxed / figures['tool, subprocess.run']:9.2f}"
    )
    ratio = figures["run_python, sandboxed"] / figures["run_python code, subprocess.run"]
    print(f"  ratio run_python / subprocess.run  {ratio:9.2f}")


if __name__ == "__main__":
    main()
