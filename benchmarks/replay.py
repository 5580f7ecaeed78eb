"""Replay cost: re-running a 1000-step recorded trace, against the original scripted run.

Scenario: a scripted model makes one tool call per step (``add(a, b)``) for N steps, then
answers; the run writes its trace to memory. The trace is then read back as `twinflow replay`
reads it (`Trace.load(..., keep=REPLAY_KINDS)`: verified, the events replay serves from kept as
verification typed them) and replayed in both modes, each event compared with the recorded
one, under the runtime nondeterminism guard.

Each figure is the CPU time of this process (``time.process_time``), the best of ``--repeats``
rounds, each round running the original and both replays one after the other so all see the
same load. Floor: the recorded-mode replay (of the loaded trace) at most 1.2x the original
run's CPU (docs/performance.md); the ratio with `Trace.load` included is printed beside it
(keeping typed events moves their cost to the load: compare that figure too).

Run: .venv/bin/python benchmarks/replay.py [--steps N] [--repeats R]
"""

from __future__ import annotations

import argparse
import os
import time
from datetime import UTC, datetime, timedelta

from _bench import report_floor  # this folder: sys.path[0]

from twinflow.agent import Agent, FunctionModel, Policy, Trace, replay
from twinflow.agent._replay import REPLAY_KINDS, ReplayPorts
from twinflow.kernel import CountingIds, SteppingClock
from twinflow.trace import MemoryTraceSink
from twinflow.vocab import CallId, Message, ModelRequest, TextPart, ToolCallPart


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def build(steps: int, ports: ReplayPorts | None = None) -> Agent[str]:
    """The benchmark's agent: scripted for the original run, replaying ports for replay."""
    count = 0

    def handler(request: ModelRequest) -> Message:
        nonlocal count
        count += 1
        if count <= steps:
            call = ToolCallPart(id=CallId(f"c{count}"), name="add", arguments={"a": count, "b": 1})
            return Message(role="assistant", parts=(call,))
        return Message(role="assistant", parts=(TextPart(text="done"),))

    common = {
        "tools": [add],
        "policy": Policy(allow=frozenset({"add"})),
        "max_steps": steps + 1,
    }
    if ports is None:
        return Agent(
            FunctionModel(handler),
            clock=SteppingClock(datetime(2026, 1, 1, tzinfo=UTC), timedelta(milliseconds=1)),
            ids=CountingIds(),
            trace=MemoryTraceSink(),
            **common,
        )
    return Agent(
        ports.model,
        clock=ports.clock,
        ids=ports.ids,
        trace=ports.trace,
        model_label=ports.model_label,
        tool_results=ports.tool_results,
        **common,
    )


def main() -> None:
    """Print the original run's time, the load, and each replay mode's time and ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000)
    # Fifteen: on a shared two-core machine one round's CPU varies by a fifth, so the best of
    # five still landed on either side of the target from run to run.
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="a few iterations: checks the benchmark runs, no figures to read",
    )
    args = parser.parse_args()
    if args.smoke:
        args.steps, args.repeats = 20, 1

    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    build(20).run("warm up")  # imports, schema builds, caches
    runs, loads = [], []
    replays: dict[str, list[float]] = {"recorded": [], "live": []}
    for _ in range(args.repeats):
        agent = build(args.steps)
        start = time.process_time()
        agent.run("add numbers")
        runs.append(time.process_time() - start)
        sink = agent.writer.sink
        assert isinstance(sink, MemoryTraceSink)
        data = sink.data
        start = time.process_time()
        # As `twinflow replay` loads a trace to replay: the events replay serves from are kept
        # as verification typed them (ADR 0143).
        trace = Trace.load(data, keep=REPLAY_KINDS)
        loads.append(time.process_time() - start)
        for mode in replays:
            start = time.process_time()
            replay(trace, lambda ports: build(args.steps, ports), mode=mode)
            replays[mode].append(time.process_time() - start)
        # Nothing of this round stays alive into the next one's original run: the objects a
        # trace keeps would make that run's collector work more, and the ratio look better.
        events = trace.size
        del agent, sink, trace

    run, load = min(runs), min(loads)
    print(f"{args.steps}-step trace: {events} events, {len(data) / 1e6:.2f} MB")
    print(f"original scripted run      {run:8.3f} s CPU   (best of {args.repeats})")
    print(f"Trace.load (verify+parse)  {load:8.3f} s CPU")
    for mode, seconds in replays.items():
        best = min(seconds)
        print(
            f"replay, {mode:<8} mode     {best:8.3f} s CPU   ratio to the original run "
            f"{best / run:5.2f}x; with Trace.load {(best + load) / run:5.2f}x"
        )
    recorded = min(replays["recorded"])
    report_floor(
        "replay",
        f"{recorded / run:.2f}x the run ({(recorded + load) / run:.2f}x with Trace.load)",
        "<= 1.2x",
        f"the original run {run:.3f} s CPU",
        met=recorded / run <= 1.2,
        smoke=args.smoke,
    )
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
