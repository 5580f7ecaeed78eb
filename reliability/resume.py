"""Resume campaign: SIGKILL an agent at a random event, resume it from its trace, count what repeats.

A forked child runs a scripted agent (a tool call per step; the tool appends each execution to
a file) writing its trace under the ``event`` fsync policy, and kills itself with SIGKILL right
after its K-th event is durable, K drawn at random over the run's events. The parent keeps the
pre-crash bytes and checkpoint, then resumes the run with `Agent.resume` (the tool declared
safe to repeat, so a crash inside a tool resumes too) and checks:

- no model request is made for a step whose response was on disk;
- no tool runs again for a call whose result was on disk (``repeated_returned``: must be 0);
- no event is lost: the pre-crash bytes are the resumed file's first bytes;
- the resumed trace verifies, is complete, and its consistency proof from the pre-crash
  checkpoint checks.

    .venv/bin/python reliability/resume.py --short | --full
"""

from __future__ import annotations

import os
import random
import signal
import tempfile
from collections import Counter
from datetime import timedelta
from pathlib import Path

from _common import START, Figures, parse_mode

from twinflow.agent import Agent, FunctionModel, Policy, Trace
from twinflow.kernel import CountingIds, SteppingClock
from twinflow.trace import FileTraceSink
from twinflow.trace._checkpoint import check_consistency
from twinflow.vocab import CallId, Message, ModelRequest, TextPart, ToolCallPart

STEPS = 6


class Scripted:
    """A model that calls `work` once per step, then answers; it counts requests by step."""

    def __init__(self) -> None:
        self.requests: Counter[int] = Counter()

    def __call__(self, request: ModelRequest) -> Message:
        done = sum(1 for m in request.transcript.messages if m.role == "tool")
        self.requests[done] += 1
        if done < STEPS:
            call = ToolCallPart(id=CallId(f"c{done}"), name="work", arguments={"n": done})
            return Message(role="assistant", parts=(call,))
        return Message(role="assistant", parts=(TextPart(text="done"),))


def build(log: Path, model: Scripted, trace: FileTraceSink | None = None) -> Agent[str]:
    """The campaign's agent; its tool appends ``n`` to ``log`` on every execution."""

    def work(n: int) -> str:
        """Do step n."""
        with log.open("a") as f:
            f.write(f"{n}\n")
        return f"step {n} done"

    return Agent(
        FunctionModel(model),
        clock=SteppingClock(START, timedelta(milliseconds=1)),
        ids=CountingIds(),
        tools=[work],
        policy=Policy(allow=frozenset({"work"}), repeat_safe=frozenset({"work"})),
        max_steps=STEPS + 1,
        trace=trace,
        fsync="event",
    )


class KillingSink(FileTraceSink):
    """A file sink whose process dies by SIGKILL once ``kill_at`` events are durable."""

    kill_at = 0
    durable = 0

    def flush(self, *, durable: bool) -> None:
        super().flush(durable=durable)
        if durable:
            self.durable += 1
            if self.durable >= self.kill_at:
                os.kill(os.getpid(), signal.SIGKILL)


def crash_at(directory: Path, kill_at: int) -> Path:
    """Run the agent in a forked child killed after ``kill_at`` durable events; the trace."""
    path = directory / "trace.jsonl"
    pid = os.fork()
    if pid == 0:
        try:
            sink = KillingSink(path)
            sink.kill_at = kill_at
            build(directory / "executions", Scripted(), sink).run("work")
        finally:
            os._exit(3)  # only reached if the kill point was past the run's end
    _, status = os.waitpid(pid, 0)
    if not (os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL):
        raise AssertionError(f"the child was not killed at event {kill_at} (status {status})")
    return path


def main(argv: list[str] | None = None) -> int:
    """Run the campaign and print the figures."""
    args = parse_mode(__doc__ or "", argv)
    runs = 300 if args.mode == "full" else 30
    rng = random.Random(args.seed)
    figures = Figures("resume", args.mode)
    with tempfile.TemporaryDirectory() as tmp:
        whole = Path(tmp) / "whole.jsonl"
        build(Path(tmp) / "whole.log", Scripted(), FileTraceSink(whole)).run("work")
        total = Trace.load(whole).size
    resumed = verified = extended = repeated_returned = repeated_requests = lost = 0
    rerun_inside_tool = 0
    for _ in range(runs):
        kill_at = rng.randrange(1, total)
        with tempfile.TemporaryDirectory() as tmp:
            directory = Path(tmp)
            path = crash_at(directory, kill_at)
            before_bytes = path.read_bytes()
            before = Trace.load(path)
            events = tuple(before.events)
            replied = {e.body.step - 1 for e in events if e.body.kind == "model_responded"}
            returned = {
                int(e.body.result.content.split()[1])
                for e in events
                if e.body.kind == "tool_returned"
            }
            model = Scripted()
            try:
                with build(directory / "executions", model) as agent:
                    agent.resume(path)
            except Exception as exc:  # any refusal is a failure of the campaign
                figures.fail(f"kill at {kill_at}: resume raised {type(exc).__name__}: {exc}")
                continue
            resumed += 1
            runs_of = Counter(int(n) for n in (directory / "executions").read_text().split())
            repeated_returned += sum(runs_of[n] - 1 for n in returned)
            repeated_requests += sum(model.requests[n] for n in replied)
            if events[-1].body.kind == "tool_called":
                rerun_inside_tool += 1
            after_bytes = path.read_bytes()
            if not after_bytes.startswith(before_bytes):
                lost += 1
                figures.fail(f"kill at {kill_at}: the pre-crash bytes are not a prefix")
            try:
                after = Trace.load(path, require_complete=True)
                verified += 1
                check_consistency(
                    after.consistency_proof(before.size), before.checkpoint(), after.checkpoint()
                )
                extended += 1
            except Exception as exc:
                figures.fail(f"kill at {kill_at}: {type(exc).__name__}: {exc}")
    if repeated_returned:
        figures.fail(f"{repeated_returned} tool executions repeated for calls that had returned")
    if repeated_requests:
        figures.fail(f"{repeated_requests} model requests repeated for recorded responses")
    figures.values.update(
        {
            "runs killed": runs,
            "events per run": total,
            "runs resumed": resumed,
            "tool runs repeated (returned calls)": repeated_returned,
            "model requests repeated (recorded)": repeated_requests,
            "calls re-run (killed inside tool)": rerun_inside_tool,
            "events lost": lost,
            "resumed traces that verify": verified,
            "extend the pre-crash checkpoint": extended,
        }
    )
    return figures.finish(args.json)


if __name__ == "__main__":
    raise SystemExit(main())
