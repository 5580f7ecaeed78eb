"""Peak memory of `eval rescore` on a run whose trace is large, as a ratio to the trace's size.

A one-case run directory is written by the real runner (a scripted model), then its trace is
replaced by a synthetic valid trace of about `--mb` megabytes (tool calls with 2.3 kB
arguments, ending in `run_failed`). `rescore` runs in a fresh interpreter; its peak resident memory (VmHWM)
above the interpreter's baseline after its imports is printed, and its ratio to the file size.

Rescoring streams each trace (verify, type, observe and drop each event, growing the checkpoint
on a Merkle frontier), so the ratio falls as the trace grows; reading the trace whole held it
(and its verified copy) in memory, a ratio above 1.

Target: peak above baseline <= 0.25x the trace at 50 MB.

Run: .venv/bin/python benchmarks/eval_rescore_memory.py [--mb 60] [--smoke]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from twinflow.agent import Agent, FunctionModel
from twinflow.eval import Case, Dataset, run_eval
from twinflow.kernel import CountingIds, SteppingClock
from twinflow.trace import canonical_bytes
from twinflow.trace._format import GENESIS, encode_line
from twinflow.vocab import Message

START = datetime(2026, 1, 1, tzinfo=UTC)

CHILD = r"""
import json, sys
def hwm_kb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
from twinflow.eval._rescore import rescore
import twinflow.agent, twinflow.trace  # loaded before the baseline
base = hwm_kb()
results = rescore(sys.argv[1])
case = results.cases[0]
print(json.dumps({"peak_kb": hwm_kb() - base, "status": case.status, "size": case.checkpoint.size}))
"""


def padded_trace(path: Path, megabytes: float) -> None:
    """A complete, valid trace of about ``megabytes``: tool calls with long arguments."""
    events = max(int(megabytes * 1e6 / 2500), 10)
    prev = GENESIS
    with path.open("wb") as f:
        for seq in range(events):
            body: dict[str, object]
            if seq == events - 1:
                body = {
                    "kind": "run_failed",
                    "run_id": "run_0001",
                    "steps": seq,
                    "error_type": "MaxStepsExceeded",
                    "message": "the model was still calling tools",
                }
            else:
                body = {
                    "kind": "tool_called",
                    "call_id": f"call_{seq:08d}",
                    "tool": "get_weather",
                    "arguments": {"city": "Paris", "note": "x" * 2300},
                }
            event = {
                "at": f"2026-01-01T00:{seq // 60 % 60:02d}:{seq % 60:02d}.123456Z",
                "body": body,
                "prev": prev,
                "seq": seq,
            }
            line, prev = encode_line(canonical_bytes(event))
            f.write(line)


def main() -> int:
    """Write the run, measure rescore in a child interpreter, print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=60.0, help="trace size in MB")
    parser.add_argument("--smoke", action="store_true", help="a 1 MB trace; no target judged")
    args = parser.parse_args()
    megabytes = 1.0 if args.smoke else args.mb
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "run"
        data = Dataset.model_validate(
            {
                "name": "big",
                "scorers": [{"kind": "no_denied_calls"}],
                "cases": [Case(id="c0", input="hi", expected=None).model_dump()],
            }
        )

        def factory(case: Case, sink: object, seed: int = 0) -> Agent[str]:
            model = FunctionModel(lambda request: Message.assistant("hello"))
            return Agent(model, clock=SteppingClock(START), ids=CountingIds(), trace=sink)  # type: ignore[arg-type]  # the runner hands a TraceSink typed as object

        run_eval(data, factory, run_dir, clock=SteppingClock(START))
        trace = run_dir / "traces" / "c0@1.jsonl"
        padded_trace(trace, megabytes)
        size_mb = trace.stat().st_size / 1e6
        child = subprocess.run(
            [sys.executable, "-c", CHILD, str(run_dir)],
            capture_output=True,
            text=True,
            check=True,
        )
        figures = json.loads(child.stdout.strip().splitlines()[-1])
    peak_mb = figures["peak_kb"] / 1000
    ratio = peak_mb / size_mb
    print(
        f"trace {size_mb:.1f} MB ({figures['size']} events, rescored {figures['status']}); "
        f"rescore peak above baseline {peak_mb:.1f} MB = {ratio:.3f}x the trace"
    )
    if args.smoke:
        return 0
    ok = ratio <= 0.25
    print(f"target <= 0.25x: {'met' if ok else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
