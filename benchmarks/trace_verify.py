"""Trace verification against its peer: a streaming `json.loads` + sha256 pass over the same file.

Writes a trace of real agent events (the agent loop's own, `_agent_trace.py`: about 450 bytes
each; `--synthetic` writes the older synthetic one, about 300 bytes), then runs each operation
in its own fresh interpreter, so its peak memory is its own:

- `json.loads+sha256`: the peer, a streaming pass that parses and hashes each line;
- `trace.verify_trace`: the stdlib leaf's strict, streaming verify (what an auditor runs);
- `agent.verify_agent_trace`: the same walk plus the typed event check (what `twinflow verify` runs);
- `trace.read_checkpoint`, `trace.prove_inclusion`: the streaming checkpoint and proof;
- `agent Trace.load`: a verified trace in memory, each event typed once to check it (what replay
  and diff read);
- `agent Trace.load+events`: the same, then every typed event read once (`Trace.events` builds
  each from its bytes when read: ADR 0075), so the table shows what a reader pays for that.

Then the commands a user types, each timed as the CPU of its whole process (start-up and imports
included, from `os.wait4`) against the same floor run as a process of its own:
`twinflow verify` (the leaf's verifier, typed events not built), `twinflow verify --typed` (the
agent's typed check on every event as well) and the stdlib leaf's `python -P -m twinflow.trace
verify`. `--cli-only` measures only these.

Each is timed best-of-`--runs` in CPU seconds of its process (on a shared machine, wall time also
counts the time the scheduler gives others; the wall-clock ratio is printed beside); the table
gives throughput as a ratio to the peer measured in the same run, and peak memory above the child interpreter's baseline (its high-water mark after its
imports, before the file is opened; printed too), also as a ratio to the file size. Then the import cost of
`twinflow.trace` (and of its first use, `verify_trace`) against an empty interpreter (best of 15
fresh interpreters, startup excluded), with sources compiled on every import and with bytecode
cached as an installed wheel has it.

Floor (docs/performance.md): the command `twinflow verify` at least 0.35 of the peer process's
speed. The rest is printed for reading: peak memory, Trace.load, the import cost.

Run: .venv/bin/python benchmarks/trace_verify.py [--events 50000] [--million] [--runs 3] [--skip-load]
     [--cli-only] [--synthetic]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from _agent_trace import steps_for, write_agent_trace  # this folder: sys.path[0]
from _bench import add_smoke, process_cpu, report_floor
from vocab_canonical import import_times

from twinflow.trace import canonical_bytes
from twinflow.trace._format import GENESIS, encode_line

CHILD = r"""
import json, sys, time, hashlib
op, path, index = sys.argv[1], sys.argv[2], int(sys.argv[3])

def hwm_kb():
    # VmHWM is per address space, so it starts afresh at exec (ru_maxrss keeps the parent's).
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])

import twinflow.trace as trace
from twinflow.trace._verify import prove_inclusion
if op.startswith("agent"):
    import twinflow.agent as agent
    # twinflow.agent resolves its names on first use too.
    agent.verify_agent_trace, agent.Trace
base = hwm_kb()
t, c = time.perf_counter(), time.process_time()
if op == "json.loads+sha256":
    n = 0
    with open(path, "rb") as f:
        for line in f:
            hashlib.sha256(line).digest()
            json.loads(line)
            n += 1
elif op == "trace.verify_trace":
    r = trace.verify_trace(path)
    assert r.ok, r.problem
elif op == "agent.verify_agent_trace":
    r = agent.verify_agent_trace(path)
    assert r.ok, r.problem
elif op == "trace.read_checkpoint":
    trace.read_checkpoint(path)
elif op == "trace.prove_inclusion":
    prove_inclusion(path, index)
elif op == "agent Trace.load":
    loaded = agent.Trace.load(path)
    assert loaded.size > 0
elif op == "agent Trace.load+events":
    loaded = agent.Trace.load(path)
    assert sum(1 for event in loaded.events) == loaded.size > 0
elapsed, cpu = time.perf_counter() - t, time.process_time() - c
peak = hwm_kb()
print(json.dumps({"seconds": cpu, "wall": elapsed, "peak_kb": peak - base, "base_kb": base}))
"""

OPS = (
    "json.loads+sha256",
    "trace.verify_trace",
    "agent.verify_agent_trace",
    "trace.read_checkpoint",
    "trace.prove_inclusion",
    "agent Trace.load",
    "agent Trace.load+events",
)


FLOOR = r"""
import hashlib, json, sys
with open(sys.argv[1], "rb") as f:
    for line in f:
        hashlib.sha256(line).digest()
        json.loads(line)
"""

COMMANDS = {
    "floor: json.loads+sha256": ["-c", FLOOR, "{path}"],
    "twinflow verify": ["-m", "twinflow.cli", "verify", "{path}"],
    "twinflow verify --typed": ["-m", "twinflow.cli", "verify", "--typed", "{path}"],
    "python -m twinflow.trace verify": ["-P", "-m", "twinflow.trace", "verify", "{path}"],
}
"""Whole processes, timed by the CPU `os.wait4` reports: what a user who types them waits for."""


def command_cpu(name: str, path: Path) -> float:
    """CPU seconds (user + system) of one process of ``COMMANDS[name]`` over ``path``."""
    argv = [sys.executable, *(a.format(path=path) for a in COMMANDS[name])]
    return process_cpu(argv, name=f"{name} on {path}")


def commands_table(path: Path, runs: int, judge: bool = True) -> None:
    """The commands against the peer process, interleaved, best of ``runs``; the floor judged."""
    loads = []
    best: dict[str, float] = {}
    for _ in range(runs):
        loads.append(os.getloadavg()[0])
        for name in COMMANDS:
            got = command_cpu(name, path)
            best[name] = min(best.get(name, got), got)
    floor = best["floor: json.loads+sha256"]
    print(
        f"commands, CPU of the whole process, best of {runs} interleaved "
        f"(load {min(loads):.1f}-{max(loads):.1f}, {os.cpu_count()} cores):"
    )
    for name, seconds in best.items():
        print(f"  {name:<34}{seconds:>8.2f} s{floor / seconds:>8.2f} of the floor")
    ratio = floor / best["twinflow verify"]
    report_floor(
        "twinflow verify",
        f"{ratio:.2f} of the peer's speed",
        ">= 0.35",
        f"json.loads+sha256 process {floor:.2f} s CPU",
        met=ratio >= 0.35,
        smoke=not judge,
    )


def write_trace(path: Path, events: int) -> None:
    """A complete trace of ``events`` valid agent events (policy decisions and tool calls)."""
    prev = GENESIS
    with path.open("wb") as f:
        for seq in range(events):
            if seq == events - 1:
                body: dict[str, object] = {
                    "kind": "run_failed",
                    "run_id": "run_0001",
                    "steps": seq,
                    "error_type": "MaxStepsExceeded",
                    "message": "the model was still calling tools",
                }
            elif seq % 2:
                body = {
                    "kind": "tool_called",
                    "call_id": f"call_{seq:08d}",
                    "tool": "get_weather",
                    "arguments": {
                        "city": "Paris",
                        "days": seq % 7,
                        "units": "metric",
                        "hourly": False,
                    },
                }
            else:
                body = {
                    "kind": "policy_decided",
                    "call_id": f"call_{seq + 1:08d}",
                    "tool": "get_weather",
                    "decision": "allow",
                    "by": "policy",
                    "reason": "allowed by name",
                    "arguments": None,
                }
            event = {
                "at": f"2026-01-01T00:{seq // 60 % 60:02d}:{seq % 60:02d}.123456Z",
                "body": body,
                "prev": prev,
                "seq": seq,
            }
            line, prev = encode_line(canonical_bytes(event))
            f.write(line)


def measure(op: str, path: Path, events: int) -> dict[str, float]:
    """Run one operation in a fresh interpreter; its seconds and peak kB above its baseline."""
    index = 12345 % min(1000, events)  # the event whose inclusion is proved
    out = subprocess.run(
        [sys.executable, "-c", CHILD, op, str(path), str(index)],
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, float] = json.loads(out.stdout)
    return result


def main() -> None:
    """Write the trace, measure every operation, print the table and the import cost."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=50_000)
    parser.add_argument("--million", action="store_true", help="1e6 events (the issue's figure)")
    parser.add_argument("--runs", type=int, default=3, help="best of this many runs per operation")
    parser.add_argument(
        "--skip-load",
        action="store_true",
        help="leave out Trace.load (the slowest: about 2 minutes at 1e6 events)",
    )
    add_smoke(parser)
    parser.add_argument(
        "--cli-only", action="store_true", help="only the commands against the floor process"
    )
    parser.add_argument(
        "--synthetic",
        action="store_true",
        help="a synthetic trace of three event kinds instead of the agent loop's own",
    )
    args = parser.parse_args()
    if args.smoke:
        args.events, args.million, args.runs = 200, False, 1
    ops = tuple(op for op in OPS if not (args.skip_load and op.startswith("agent Trace.load")))
    events = 1_000_000 if args.million else args.events
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.jsonl"
        if args.synthetic:
            write_trace(path, events)
        else:
            events = write_agent_trace(path, steps_for(events))
        size = path.stat().st_size
        kind = "synthetic" if args.synthetic else "real agent"
        print(f"{events} {kind} events, {size / 1e6:.1f} MB ({size / events:.0f} bytes per line)")
        commands_table(path, args.runs, judge=not args.smoke)
        if args.cli_only:
            return
        print(f"sha256 of the file: {hashlib.sha256(path.read_bytes()).hexdigest()[:16]}...")
        best: dict[str, dict[str, float]] = {}
        for _ in range(args.runs):
            for op in ops:  # interleaved, so a busy moment hits every operation alike
                got = measure(op, path, events)
                if op not in best or got["seconds"] < best[op]["seconds"]:
                    best[op] = {
                        **got,
                        "peak_kb": max(got["peak_kb"], best.get(op, got)["peak_kb"]),
                        "wall": min(got["wall"], best.get(op, got)["wall"]),
                    }
        peer = best["json.loads+sha256"]["seconds"]
        peer_wall = best["json.loads+sha256"]["wall"]
        print(f"best of {args.runs} runs, each in a fresh interpreter:")
        print(
            f"  {'operation':<24}{'CPU s':>9}{'events/s':>12}{'vs peer':>9}{'(wall)':>8}"
            f"{'+peak MB':>9}{'x file':>8}{'base MB':>9}"
        )
        for op in ops:
            s, kb = best[op]["seconds"], best[op]["peak_kb"]
            print(
                f"  {op:<24}{s:>9.2f}{events / s:>12,.0f}{peer / s:>9.2f}"
                f"{peer_wall / best[op]['wall']:>8.2f}"
                f"{kb / 1024:>9.1f}{kb * 1024 / size:>8.2f}{best[op]['base_kb'] / 1024:>9.1f}"
            )
    runs = 1 if args.smoke else 15
    statements = (
        "pass",
        "import twinflow.trace",
        "from twinflow.trace import verify_trace",
        "import json, hashlib",
    )
    # Sources are compiled on every import where bytecode is not written (PYTHONDONTWRITEBYTECODE,
    # as on the CI machines); an installed wheel has its bytecode. Both are printed.
    with tempfile.TemporaryDirectory() as cache:
        cached = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        cached["PYTHONPYCACHEPREFIX"] = cache
        for label, env in (("sources compiled", None), ("bytecode cached", cached)):
            times = import_times(statements, runs, env)
            print(
                f"import cost above an empty interpreter, {label} "
                f"(best of {runs} fresh interpreters):"
            )
            for statement in statements[1:]:
                print(f"  {statement:<40}{(times[statement] - times['pass']) * 1000:>7.1f} ms")


if __name__ == "__main__":
    main()
