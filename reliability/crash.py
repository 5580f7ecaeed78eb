"""Crash campaign: SIGKILL an agent mid-run, at random moments, and check what survived.

A forked child runs a scripted agent over and over (tool calls, big tool answers that make
lines longer than the file buffer, denials), appending to one `FileTraceSink` under the
fsync policy being tested (``event`` or ``step``). After each durable flush returns, the
child reports on a pipe how many events are durable and the digest of the last one. The
parent kills it with SIGKILL after a random delay, then checks:

- every event reported durable is in the file, with the reported digest, and verifies;
- the only damage is at the end: a partial last line (`truncated`) or a clean prefix that
  stops before a terminal event (`removed`, at the seq right after the last event);
- `repair_trace` then leaves a prefix that verifies, holding every durable event;
- the same after cutting the file at a random byte past the durable events (a torn write,
  as a power cut leaves it: SIGKILL alone never splits a line, see `torn_write`).

Then the eval runner: a child runs `run_eval` over a scripted dataset and is killed at a
random moment; the parent resumes the run to the end and checks that no case whose result
was written before the kill ran again, and that every case has exactly one result.

    .venv/bin/python reliability/crash.py --short | --full
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from _common import Figures, agent, call, parse_mode, scripted, text

from twinflow.agent import Trace, verify_agent_trace
from twinflow.trace import FileTraceSink, TraceSink
from twinflow.trace._format import LINE_PREFIX
from twinflow.trace._repair import repair_trace

DIGEST_START = len(LINE_PREFIX)
DIGEST_END = DIGEST_START + 64  # the line's sha256, in hex


class ReportingSink:
    """A `FileTraceSink` that reports, after each durable flush returns, what is durable."""

    def __init__(self, inner: FileTraceSink, report_fd: int) -> None:
        """Wrap ``inner``; reports go to ``report_fd`` as ``<count> <digest>\\n``."""
        self.inner = inner
        self.report_fd = report_fd
        self.count = 0
        self.last = b""

    def write(self, line: bytes) -> None:
        """Write and remember the line's digest."""
        self.inner.write(line)
        self.count += 1
        self.last = line[DIGEST_START:DIGEST_END]

    def flush(self, *, durable: bool) -> None:
        """Flush; once a durable flush has returned, report it."""
        self.inner.flush(durable=durable)
        if durable:
            os.write(self.report_fd, b"%d %s\n" % (self.count, self.last))

    def close(self) -> None:
        """Close the file."""
        self.inner.close()


def child_agent(path: Path, fsync: str, report_fd: int) -> None:
    """Run scripted agents forever (until killed), appending to one trace."""
    sink = ReportingSink(FileTraceSink(path), report_fd)
    replies = [
        call("add", {"a": 1, "b": 2}, "c1"),
        call("blob", {"n": 12000}, "c2"),
        call("shell", {"command": "ls"}, "c3"),
        call("boom", {"x": 3}, "c4"),
        text("done"),
    ]
    worker = agent(
        scripted(lambda request: replies[sum(1 for _ in request.transcript.messages) // 2 % 5]),
        trace=sink,
        fsync=fsync,
        max_steps=6,
    )
    run = 0
    while True:
        run += 1
        with contextlib.suppress(Exception):  # a failed run is in the trace; keep writing
            worker.run(f"run {run}")


def read_reports(fd: int) -> tuple[int, bytes]:
    """The last complete durable report from the pipe (0 events if none)."""
    chunks = []
    while True:
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        chunks.append(chunk)
    data = b"".join(chunks)
    complete = data[: data.rfind(b"\n") + 1].splitlines()
    if not complete:
        return 0, b""
    count, digest = complete[-1].split(b" ")
    return int(count), digest


def kill_agent_once(
    figures: Figures,
    rng: random.Random,
    workdir: Path,
    number: int,
    fsync: str,
    kinds: Counter[str],
) -> int:
    """One kill of the agent child; returns the number of durable events it had reported."""
    path = workdir / f"agent-{fsync}-{number}.jsonl"
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        os.close(read_fd)
        try:
            child_agent(path, fsync, write_fd)
        finally:
            os._exit(3)
    os.close(write_fd)
    time.sleep(rng.uniform(0.0, 0.25))
    os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    if not (os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL):
        figures.fail(f"kill {number}: the child ended on its own (status {status})")
    durable, durable_digest = read_reports(read_fd)
    os.close(read_fd)
    if not path.exists():
        if durable:
            figures.fail(f"kill {number}: {durable} durable events but no trace file")
        kinds["no file yet"] += 1
        return durable
    data = path.read_bytes()
    report = verify_agent_trace(data)
    problem = report.problem
    if problem is None:
        kinds["complete"] += 1
    else:
        kinds[problem.kind] += 1
        at_end = problem.seq == report.events
        if problem.kind == "truncated":
            if not at_end or data.endswith(b"\n"):
                figures.fail(f"kill {number}: truncated but not at the end: {problem}")
        elif problem.kind == "removed":
            clean = data.endswith(b"\n") or not data
            if not at_end or not clean or data.count(b"\n") != report.events:
                figures.fail(f"kill {number}: removed but not a clean prefix: {problem}")
        else:
            figures.fail(f"kill {number}: damage other than a cut end: {problem}")
    if report.events < durable:
        figures.fail(f"kill {number}: {durable} events were durable, {report.events} verify")
        return durable
    if durable:
        kept = data.split(b"\n")[durable - 1][DIGEST_START:DIGEST_END]
        if kept != durable_digest:
            figures.fail(f"kill {number}: durable event {durable - 1} changed after the kill")
    repair_trace(path)
    repaired = verify_agent_trace(path, require_complete=False)
    if not repaired.ok or repaired.events != report.events:
        figures.fail(f"kill {number}: after repair_trace: {repaired.problem}")
    torn_write(figures, rng, path, data, durable, number, kinds)
    return durable


def torn_write(
    figures: Figures,
    rng: random.Random,
    path: Path,
    data: bytes,
    durable: int,
    number: int,
    kinds: Counter[str],
) -> None:
    """Cut the killed trace at a random byte past the durable events, as a power cut may.

    SIGKILL alone never tears a line: each line reaches the kernel in one write(2), and the
    page cache outlives the process. A power cut can lose any suffix of what was not
    synced, so this cuts there and checks that verification and repair still hold.
    """
    floor = sum(len(line) + 1 for line in data.split(b"\n")[:durable])
    if floor >= len(data):
        return
    cut = rng.randrange(floor, len(data))
    torn = path.with_name(path.stem + ".torn.jsonl")
    torn.write_bytes(data[:cut])
    report = verify_agent_trace(torn)
    problem = report.problem
    kinds[f"torn:{problem.kind if problem else 'complete'}"] += 1
    if (
        problem is None
        or problem.kind not in {"truncated", "removed"}
        or problem.seq != report.events
    ):
        figures.fail(f"torn {number}: damage other than a cut end: {problem}")
    if report.events < durable:
        figures.fail(f"torn {number}: {durable} events were durable, {report.events} verify")
    repair_trace(torn)
    repaired = verify_agent_trace(torn, require_complete=False)
    if not repaired.ok or repaired.events != report.events:
        figures.fail(f"torn {number}: after repair_trace: {repaired.problem}")


EVAL_CHILD = """
import sys
sys.path.insert(0, {here!r})
from crash import eval_child
eval_child({out!r}, {cases})
"""


def eval_dataset(cases: int) -> Any:
    """A dataset of ``cases`` arithmetic cases, scored by exact match."""
    from twinflow.eval import Dataset

    return Dataset.model_validate(
        {
            "name": "crash",
            "scorers": [{"kind": "exact"}],
            "cases": [
                {"id": f"c{i:03d}", "input": f"add {i} and 1", "expected": str(i + 1)}
                for i in range(cases)
            ],
        }
    )


def eval_factory(log: Path) -> Any:
    """An agent factory that logs (durably) every case it builds an agent for."""

    def factory(case: Any, sink: TraceSink, seed: int = 0) -> Any:
        with log.open("a") as f:
            f.write(case.id + "\n")
            f.flush()
            os.fsync(f.fileno())
        i = int(case.id[1:])
        return agent(scripted([call("add", {"a": i, "b": 1}, "c1"), text(str(i + 1))]), trace=sink)

    return factory


def eval_child(out: str, cases: int) -> None:
    """The eval child: run the dataset into ``out`` (killed before it ends, usually)."""
    from twinflow.eval import run_eval
    from twinflow.kernel import SystemClock

    run_dir = Path(out)
    run_eval(
        eval_dataset(cases),
        eval_factory(run_dir.parent / "built.log"),
        run_dir,
        clock=SystemClock(),
    )


def kill_eval_once(
    figures: Figures, rng: random.Random, workdir: Path, number: int, cases: int
) -> dict[str, int]:
    """One kill-and-resume of the eval runner."""
    from twinflow.eval import run_eval
    from twinflow.kernel import SystemClock

    root = workdir / f"eval-{number}"
    root.mkdir()
    out = root / "run"
    pid = os.fork()
    if pid == 0:
        try:
            eval_child(str(out), cases)
        finally:
            os._exit(0)
    time.sleep(rng.uniform(0.05, 0.6))
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    log = root / "built.log"
    before = set((out / "cases").glob("*.json")) if (out / "cases").exists() else set()
    done_before = {p.stem.split("@")[0] for p in before}
    built_before = log.read_text().split() if log.exists() else []
    run_eval(eval_dataset(cases), eval_factory(log), out, clock=SystemClock())
    built_after = log.read_text().split()[len(built_before) :]
    rerun = done_before & set(built_after)
    if rerun:
        figures.fail(f"eval kill {number}: completed cases ran again: {sorted(rerun)}")
    results = sorted(p.stem for p in (out / "cases").glob("*.json"))
    expected = sorted(f"c{i:03d}@1" for i in range(cases))
    if results != expected:
        figures.fail(f"eval kill {number}: results {len(results)} != {cases} cases")
    missing = {f"c{i:03d}" for i in range(cases)} - set(built_before) - set(built_after)
    if missing:
        figures.fail(f"eval kill {number}: cases never run: {sorted(missing)}")
    for p in (out / "traces").glob("*.jsonl"):
        if ".interrupted" in p.name:
            continue
        report = verify_agent_trace(p)
        if not report.ok:
            figures.fail(f"eval kill {number}: {p.name}: {report.problem}")
    interrupted = len(list((out / "traces").glob("*.interrupted*.jsonl")))
    return {"done_before_kill": len(done_before), "interrupted": interrupted}


def main(argv: list[str] | None = None) -> int:
    """Run the campaign and print the figures."""
    args = parse_mode(__doc__ or "", argv)
    full = args.mode == "full"
    figures = Figures("crash", args.mode)
    rng = random.Random(args.seed)
    kills = 200 if full else 30
    eval_kills = 30 if full else 5
    cases = 40 if full else 20
    with tempfile.TemporaryDirectory(prefix="twinflow-crash-") as tmp:
        workdir = Path(tmp)
        for fsync in ("event", "step"):
            kinds: Counter[str] = Counter()
            durable_total = 0
            for number in range(kills):
                durable_total += kill_agent_once(figures, rng, workdir, number, fsync, kinds)
            figures.values[f"agent_kills_fsync_{fsync}"] = kills
            figures.values[f"durable_events_checked_{fsync}"] = durable_total
            figures.values[f"end_state_{fsync}"] = dict(sorted(kinds.items()))
        sample = Trace.load(next(workdir.glob("agent-event-*.jsonl")).read_bytes())
        figures.values["events_in_one_trace_sample"] = sample.size
        if cases:
            resumed = Counter[str]()
            for number in range(eval_kills):
                for key, value in kill_eval_once(figures, rng, workdir, number, cases).items():
                    resumed[key] += value
            figures.values["eval_kills_resumed"] = eval_kills
            figures.values["eval_cases_per_run"] = cases
            figures.values["eval_cases_done_before_kills"] = resumed["done_before_kill"]
            figures.values["eval_interrupted_traces_set_aside"] = resumed["interrupted"]
    return figures.finish(args.json)


if __name__ == "__main__":
    sys.exit(main())
