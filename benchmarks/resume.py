"""Resume cost: continuing a run after a 1000-step recorded prefix, against replaying it.

Scenario: a scripted model makes one tool call per step (``add(a, b)``) for N steps, then
answers; the run writes its trace to a file. A crash is simulated by cutting the file back to
the end of step N (every event up to its last ``tool_returned``: what a process killed before
its final request leaves). `Agent.resume` then verifies the prefix, re-runs it against the
record (no model request, no tool call), appends ``run_resumed`` and asks the model once.
The comparison is `Trace.load` plus ``replay(mode="recorded")`` of the finished run: the same
re-run of the same steps, without a file to append to, the trace loaded as `twinflow replay`
loads it (``keep=REPLAY_KINDS``). Both are timed in CPU seconds of this process
(``time.process_time``: the resume's fsyncs cost their system calls, not the disk's wait, which
a shared machine's other writers move), the median of ``--repeats`` rounds, each running both.
Floor: resume at most 1.1x the replay (docs/performance.md).

Second figure: a 10-step run whose tool needs a person's approval (``Policy(ask=...)``) pauses
at every step; each pause is approved with `Agent.resume(..., decisions=...)` until the run
finishes. Target: all the pauses and resumes add at most 1 s to the same run without approval.

Run: .venv/bin/python benchmarks/resume.py [--steps N] [--repeats R] [--smoke]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from _bench import add_smoke, report_floor  # this folder: sys.path[0]

from twinflow.agent import Agent, Decision, FunctionModel, Policy, RunPaused, Trace, replay
from twinflow.agent._replay import REPLAY_KINDS, ReplayPorts
from twinflow.kernel import CountingIds, SteppingClock
from twinflow.trace import FileTraceSink
from twinflow.vocab import CallId, Message, ModelRequest, TextPart, ToolCallPart


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def build(
    steps: int,
    trace: FileTraceSink | None = None,
    ports: ReplayPorts | None = None,
    *,
    ask: bool = False,
) -> Agent[str]:
    """The benchmark's agent: scripted by the number of tool results it has seen."""

    def handler(request: ModelRequest) -> Message:
        done = sum(1 for m in request.transcript.messages if m.role == "tool")
        if done < steps:
            call = ToolCallPart(id=CallId(f"c{done}"), name="add", arguments={"a": done, "b": 1})
            return Message(role="assistant", parts=(call,))
        return Message(role="assistant", parts=(TextPart(text="done"),))

    policy = Policy(ask=frozenset({"add"})) if ask else Policy(allow=frozenset({"add"}))
    common = {"tools": [add], "policy": policy, "max_steps": steps + 1}
    if ports is None:
        return Agent(
            FunctionModel(handler),
            clock=SteppingClock(datetime(2026, 1, 1, tzinfo=UTC), timedelta(milliseconds=1)),
            ids=CountingIds(),
            trace=trace,
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


def approval_overhead(tmp: Path, steps: int) -> tuple[float, float, int]:
    """Seconds for a run without approval, with approval at every step, and the pauses taken."""
    plain = tmp / "plain.jsonl"
    start = time.perf_counter()
    with build(steps, FileTraceSink(plain)) as agent:
        agent.run("add numbers")
    without = time.perf_counter() - start
    asked = tmp / "asked.jsonl"
    pauses = 0
    start = time.perf_counter()
    try:
        with build(steps, FileTraceSink(asked), ask=True) as agent:
            agent.run("add numbers")
    except RunPaused as exc:
        pending = exc.paused.pending
        while pending:
            pauses += 1
            decisions = [Decision(call_id=p.call_id, approve=True) for p in pending]
            try:
                with build(steps, ask=True) as agent:
                    agent.resume(asked, decisions=decisions)
                pending = ()
            except RunPaused as again:
                pending = again.paused.pending
    return without, time.perf_counter() - start, pauses


def main() -> None:
    """Print the resume's and the replay's medians and their ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=5)
    add_smoke(parser)
    args = parser.parse_args()
    if args.smoke:
        args.steps, args.repeats = 20, 1

    with tempfile.TemporaryDirectory() as tmp:
        without, with_approval, pauses = approval_overhead(Path(tmp), 10)
        full = Path(tmp) / "full.jsonl"
        with build(args.steps, FileTraceSink(full)) as agent:
            agent.run("add numbers")
        data = full.read_bytes()
        lines = data.splitlines(keepends=True)
        trace = Trace.load(data)
        last_result = max(e.seq for e in trace.events if e.body.kind == "tool_returned")
        prefix = b"".join(lines[: last_result + 1])

        resumes, replays = [], []
        for n in range(args.repeats):
            path = Path(tmp) / f"crashed{n}.jsonl"
            path.write_bytes(prefix)
            agent = build(args.steps)
            start = time.process_time()
            agent.resume(path)
            resumes.append(time.process_time() - start)
            agent.close()
            start = time.process_time()
            replay(
                Trace.load(data, keep=REPLAY_KINDS), lambda ports: build(args.steps, ports=ports)
            )
            replays.append(time.process_time() - start)

    resumed, replayed = statistics.median(resumes), statistics.median(replays)
    ratio = resumed / replayed
    print(f"{args.steps}-step prefix: {last_result + 1} events, {len(prefix) / 1e6:.2f} MB")
    print(f"Trace.load + replay (recorded)  {replayed:8.3f} s CPU (median of {args.repeats})")
    print(f"resume (verify, re-run, append) {resumed:8.3f} s CPU")
    added = with_approval - without
    print(f"10-step run, no approval        {without:8.3f} s")
    print(f"10-step run, {pauses} approvals        {with_approval:8.3f} s   (+{added:.3f} s)")
    report_floor(
        "resume of a 1,000-step prefix",
        f"{ratio:.2f}x load + recorded replay",
        "<= 1.1x",
        f"Trace.load + replay {replayed:.3f} s CPU",
        met=ratio <= 1.1,
        smoke=args.smoke,
    )
    if not args.smoke:
        verdict = "meets" if added <= 1.0 else "MISSES"
        print(f"approvals add                   {added:8.3f} s   ({verdict} the 1 s target)")


if __name__ == "__main__":
    main()
