"""BENCHMARKS.md from the output of a benchmark run: one row per floor, met or not.

Reads what `run_all.py` prints (each benchmark's ``=== NAME`` header and the ``floor | ...``
lines `_bench.report_floor` prints under it; everything else is skipped) and writes the page:
the method and the machine once, then per floor one row ``path | peer or floor | ratio |
target | met`` and the command that reproduces it.

Usage:
    .venv/bin/python benchmarks/run_all.py | tee benchmarks/logs/floors.log
    .venv/bin/python benchmarks/_report.py benchmarks/logs/floors.log > BENCHMARKS.md
"""

from __future__ import annotations

import sys
from pathlib import Path

from _bench import FLOOR_TAG, FLOORS  # this folder: sys.path[0]

HEAD = """\
# Benchmarks

Each row is a floor a hot path is held to: a ratio to a peer measured in the same run on the
same machine, so load that slows both moves it little. Method: CPU time (`time.process_time`,
or `os.wait4` for a whole process) where the figure is the code's own cost; wall time only for
the first streamed delta, as the median of paired rounds' differences; subject and peer
interleaved in each repeat. Machine: a 2-core VM shared with other test runs (load average
5-6). Why each floor, and what was retired to keep the core plain: docs/performance.md.

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
    return HEAD + "\n".join(table + commands) + "\n"


if __name__ == "__main__":
    sys.stdout.write(render(Path(sys.argv[1]).read_text(encoding="utf-8")))
