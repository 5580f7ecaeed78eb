"""BENCHMARKS.md from the output of a benchmark run: one row per floor, met or not.

Reads what `run_all.py` prints (each benchmark's ``=== NAME`` header and the ``floor | ...``
lines `_bench.report_floor` prints under it; everything else is skipped) and writes the page:
the method and the machine once, then per floor one row ``path | peer or floor | ratio |
target | met``, a chart of the loop's cost per step as a run grows (the one scale a floor
involves: pydantic-ai's cost per step grows with the run, twinflow's does not), and the command
that reproduces each row.

Usage:
    .venv/bin/python benchmarks/run_all.py | tee benchmarks/logs/floors.log
    .venv/bin/python benchmarks/_report.py benchmarks/logs/floors.log > BENCHMARKS.md
"""

from __future__ import annotations

import math
import re
import sys
from pathlib import Path

from _bench import FLOOR_TAG, FLOORS  # this folder: sys.path[0]

HEAD = """\
# Benchmarks

Each row is a floor a hot path is held to: a ratio to a peer measured in the same run on the
same machine, so load that slows both moves it little. Method: CPU time (`time.process_time`,
or `os.wait4` for a whole process) where the figure is the code's own cost; wall time only for
the first streamed delta, as the median of paired rounds' differences; subject and peer
interleaved in each repeat. Machine: a 2-core VM shared with other jobs; the load average during
each benchmark is in the log the table is written from (`benchmarks/logs/floors.log`, 10-20 for
this one), and a verdict near its floor can flip with it. Why each floor, and what was retired
to keep the core plain: docs/performance.md.

Regenerate: `.venv/bin/python benchmarks/run_all.py | tee benchmarks/logs/floors.log`, then
`.venv/bin/python benchmarks/_report.py benchmarks/logs/floors.log > BENCHMARKS.md`.

"""


def floor_rows(log: str) -> list[tuple[str, str, str, str, str, str]]:
    """(benchmark, path, peer, ratio, target, verdict) per floor line of a run's output."""
    rows = []
    benchmark = "?"
    for line in log.splitlines():
        if line.startswith("=== "):
            benchmark = line[4:].strip()
        elif line.startswith(FLOOR_TAG):
            name, value, floor, peer, verdict = line[len(FLOOR_TAG) :].split(" | ")
            rows.append((benchmark, name, peer, value, floor, verdict))
    return sorted(rows, key=lambda row: FLOORS.index(row[1]))


# A row of loop.py's scaling table: steps, twinflow us/step, no fsync, memory, pydantic-ai, ...
_SCALING_ROW = re.compile(r"^\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s")
_BAR_WIDTH = 40


def loop_scaling(log: str) -> list[tuple[int, float, float]]:
    """(steps, twinflow us/step without fsync, pydantic-ai us/step) from the loop's table."""
    rows, inside = [], False
    for line in log.splitlines():
        if line.startswith("=== "):
            inside = line[4:].strip() == "loop"
        elif inside and (match := _SCALING_ROW.match(line)):
            steps, _, no_fsync, _, peer = match.groups()
            rows.append((int(steps), float(no_fsync), float(peer)))
    return rows


def chart(rows: list[tuple[int, float, float]]) -> list[str]:
    """A text bar chart of CPU per step against run length, on a log scale (one bar per run)."""
    if not rows:
        return []
    top = max(max(ours, peer) for _, ours, peer in rows)
    # The scale starts at the power of ten below the smallest figure: a bar's length is
    # log10(value / base) over the longest bar's, so equal steps in length are equal factors.
    base = 10 ** math.floor(math.log10(min(min(ours, peer) for _, ours, peer in rows)))

    def bar(value: float) -> str:
        share = math.log10(value / base) / math.log10(top / base) if top > base else 1.0
        return "#" * max(1, round(_BAR_WIDTH * share))

    title = f"CPU per step as a run grows (loop.py, no fsync; log scale from {base:g} us):"
    lines = ["", title, ""]
    lines.append("```text")
    for steps, ours, peer in rows:
        lines.append(
            f"{steps:>5} steps  {'twinflow':<12} {bar(ours):<{_BAR_WIDTH}} {ours:>6.0f} us"
        )
        lines.append(f"{'':>12} {'pydantic-ai':<12} {bar(peer):<{_BAR_WIDTH}} {peer:>6.0f} us")
    lines.append("```")
    return lines


def render(log: str) -> str:
    """The page for one run's output."""
    rows = floor_rows(log)
    table = ["| path | peer or floor | ratio | target | met |", "| --- | --- | --- | --- | --- |"]
    table += [
        f"| {path} | {peer} | {ratio} | {target} | {met} |"
        for _, path, peer, ratio, target, met in rows
    ]
    commands = ["", "Reproduce one row:", ""]
    commands += [f"- {path}: `.venv/bin/python benchmarks/{bench}.py`" for bench, path, *_ in rows]
    missing = [name for name in FLOORS if name not in {row[1] for row in rows}]
    if missing:
        commands += ["", f"Not measured in this run: {', '.join(missing)}."]
    return HEAD + "\n".join(table + chart(loop_scaling(log)) + commands) + "\n"


if __name__ == "__main__":
    sys.stdout.write(render(Path(sys.argv[1]).read_text(encoding="utf-8")))
