"""Runs that continue: real `twinflow run` processes killed with SIGKILL, then resumed or approved.

The model is a scripted OpenAI-compatible server on loopback that counts the requests of each
step; the tool appends each execution to a file. A run is stopped where the test chooses: the
tool kills its own process at a given step, or blocks on a FIFO the test holds (a barrier, not
a sleep), so the test can act while the run is held there.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import sys
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from cli_testkit import chat_answer, completion

from twinflow.agent import Trace
from twinflow.cli._demo import PROMPT, SYSTEM
from twinflow.cli._demo_cli import DEMO_SPEC
from twinflow.kernel import LoopbackServer
from twinflow.kernel._loopback import LoopbackRequest, LoopbackResponse
from twinflow.kernel._process import ProcessResult, StartedProcess, run_process, start_process

STEPS = 3

TOOLS = '''
import os
import signal
from pathlib import Path

HERE = Path(__file__).parent


def step(n: int) -> str:
    """Do step n of the task."""
    with open(HERE / "executions", "a") as f:
        f.write(f"{n}\\n")
    kill_at = HERE / "kill_at"
    if kill_at.exists() and kill_at.read_text() == str(n):
        os.kill(os.getpid(), signal.SIGKILL)
    hold = HERE / f"hold{n}"
    if hold.exists():
        os.write(int(os.environ["READY_FD"]), f"in step {n}\\n".encode())
        with open(hold) as barrier:  # blocks until the test opens it, or kills this process
            barrier.read()
    return f"step {n} done"
'''

SPEC = """\
prompt: do the three steps
model:
  url: {url}
  dialect: llama.cpp
  mode: native
tools: [steps:step]
policy:
  allow: [{allow}]
  ask: [{ask}]
  repeat_safe: [{repeat}]
max_steps: 6
"""


class Script:
    """The scripted server: call `step` with n = the tool results so far, then answer."""

    def __init__(self) -> None:
        self.requests: Counter[int] = Counter()
        self.served_below = 0
        """Answer a request for a step below this (by n) with an error: a fork serves those."""
        self.hold_at: int | None = None
        """Hold the request of this step (by n), once: `wait_held` returns when it is held,
        and it is answered after `release` (two pipes, barriers rather than delays)."""
        self._held, self._holding = os.pipe()
        self._released, self._release = os.pipe()

    def __call__(self, request: LoopbackRequest) -> LoopbackResponse:
        body = request.json_value()
        assert isinstance(body, dict)
        messages = body["messages"]
        assert isinstance(messages, list)
        n = sum(1 for m in messages if isinstance(m, dict) and m.get("role") == "tool")
        self.requests[n] += 1
        if n < self.served_below:
            # A step a fork serves from its parent: asking for it again is the failure tested.
            return LoopbackResponse(status=500, body=b"{}")
        if n == self.hold_at:
            self.hold_at = None
            os.write(self._holding, b"held")
            os.read(self._released, 1)
        if n < STEPS:
            arguments = json.dumps({"n": n})
            call = {
                "id": f"call_{n}",
                "type": "function",
                "function": {"name": "step", "arguments": arguments},
            }
            message: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [call]}
            finish = "tool_calls"
        else:
            message, finish = {"role": "assistant", "content": "all done"}, "stop"
        return chat_answer(body, completion(message, finish))

    def wait_held(self) -> None:
        """Block until a request is held."""
        assert b"held" == os.read(self._held, 4)

    def release(self) -> None:
        """Let the held request be answered."""
        os.write(self._release, b"x")

    def close(self) -> None:
        """Close the pipes."""
        for fd in (self._held, self._holding, self._released, self._release):
            os.close(fd)


class Project:
    """A user's project directory, with the server that scripts its model."""

    def __init__(self, root: Path, script: Script, url: str) -> None:
        self.root = root
        self.script = script
        self.url = url
        self.trace = root / "out" / "trace.jsonl"
        (root / "steps.py").write_text(TOOLS)
        self.spec(allow="step")

    def spec(
        self, *, allow: str = "", ask: str = "", repeat: str = "", name: str = "spec.yaml"
    ) -> Path:
        path = self.root / name
        path.write_text(SPEC.format(url=self.url, allow=allow, ask=ask, repeat=repeat))
        return path

    def executions(self) -> Counter[int]:
        path = self.root / "executions"
        return Counter(int(n) for n in path.read_text().split()) if path.exists() else Counter()

    def twinflow(self, *args: str) -> ProcessResult:
        return run_process(
            [sys.executable, "-m", "twinflow.cli", *args],
            cwd=self.root,
            env={"PYTHONDONTWRITEBYTECODE": "1"},
            timeout=300,
        )

    def start(self, *args: str, env: dict[str, str] | None = None) -> StartedProcess:
        """Start a command whose held tool says so on a pipe (`wait_ready` reads it)."""
        self._ready, write_end = os.pipe()
        try:
            return start_process(
                [sys.executable, "-m", "twinflow.cli", *args],
                cwd=self.root,
                env={"PYTHONDONTWRITEBYTECODE": "1", "READY_FD": str(write_end), **(env or {})},
                pass_fds=(write_end,),
            )
        finally:
            os.close(write_end)  # the command holds the only write end now

    def hold_at(self, n: int) -> None:
        """Make the tool block at step ``n`` until the process is killed (a FIFO barrier)."""
        os.mkfifo(self.root / f"hold{n}")

    def wait_ready(self) -> str:
        """Block until the started command's tool says it is held, or the command ends.

        The command holds the pipe's only write end, so a command that ends before its tool
        is held gives end of file here: the test fails with what it printed, never hangs.
        """
        with os.fdopen(self._ready, "rb") as ready:
            line = ready.readline()
        assert line, "the command ended before its tool was held"
        return line.decode().strip()


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Project]:
    """A project whose model is a scripted, counting server."""
    script = Script()
    with LoopbackServer(script) as server:
        yield Project(tmp_path, script, server.url)
    script.close()


def one_line(stderr: str) -> str:
    """The single line of a failure's stderr (and check it is a single line)."""
    lines = stderr.strip().splitlines()
    assert 1 == len(lines), stderr
    return lines[0]


@contextmanager
def interruptible() -> Iterator[None]:
    """Commands started here get Ctrl-C's default action, even if this process ignores SIGINT
    (a shell's background job does; an ignored signal stays ignored across exec)."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


def pasted(stderr: str) -> list[str]:
    """The words of the resume command an interrupt message gives, from ``resume`` on."""
    line = one_line(stderr)
    assert "the run is paused, not failed" in line, line
    words = shlex.split(line.split("continue it with: ", 1)[1])
    return words[words.index("resume") :]


def killed_run(project: Project, at: int) -> Trace:
    """Run until the tool kills its process at step ``at``; the trace it left on disk."""
    (project.root / "kill_at").write_text(str(at))
    result = project.twinflow("run", "spec.yaml", "--out", "out", "--quiet")
    assert -9 == result.returncode, result.stderr
    (project.root / "kill_at").unlink()
    return Trace.load(project.trace)


def recorded_steps(trace: Trace) -> tuple[set[int], set[int]]:
    """The steps whose model reply, and whose tool result, the trace holds (by n)."""
    replied, returned = set(), set()
    for event in trace.events:
        body = event.body
        if body.kind == "model_responded":
            replied.add(body.step - 1)
        if body.kind == "tool_returned":
            returned.add(int(body.result.content.split()[1]))
    return replied, returned


def test_a_killed_run_resumes_without_repeating_anything_recorded(project: Project) -> None:
    """SIGKILL mid-tool, resume: recorded steps are neither asked nor run again; the trace extends.

    The call the process died in is on record (its line reached the operating system before the
    tool ran), so a resume refuses to run it again until the spec declares the tool safe to
    repeat; then it runs once more and ``run_resumed`` names it.
    """
    before = killed_run(project, at=1)
    replied, returned = recorded_steps(before)
    assert (True, False) == (0 in returned, 1 in returned)
    dying = before.events[-1].body
    assert ("tool_called", {"n": 1}) == (dying.kind, getattr(dying, "arguments", None))
    call_id = getattr(dying, "call_id", None)
    size = project.trace.stat().st_size
    refused = project.twinflow("resume", str(project.trace), "--spec", "spec.yaml")
    assert 0 != refused.returncode
    assert f"inside tool call {call_id} (step" in one_line(refused.stderr)
    assert size == project.trace.stat().st_size
    project.spec(allow="step", repeat="step")
    made = project.twinflow(
        "checkpoint", str(project.trace), "--origin", "example.org/lab", "--out", "before.note"
    )
    assert 0 == made.returncode, made.stderr
    asked, ran = Counter(project.script.requests), project.executions()

    result = project.twinflow("resume", str(project.trace), "--spec", "spec.yaml", "--json")
    assert 0 == result.returncode, result.stderr
    assert "all done" == json.loads(result.stdout)["output"]
    new_requests = project.script.requests - asked
    new_runs = project.executions() - ran
    assert Counter(dict.fromkeys({0, 1, 2, 3} - replied, 1)) == new_requests
    assert Counter(dict.fromkeys({0, 1, 2} - returned, 1)) == new_runs
    assert 0 == project.twinflow("verify", str(project.trace)).returncode
    proof = project.twinflow(
        "prove",
        str(project.trace),
        "--from-size",
        str(before.size),
        "--origin",
        "example.org/lab",
        "--out",
        "p.tlog-consistency",
    )
    assert 0 == proof.returncode, proof.stderr
    checked = project.twinflow(
        "prove", "--check", "p.tlog-consistency", "--old-checkpoint", "before.note"
    )
    assert 0 == checked.returncode, checked.stderr
    events = Trace.load(project.trace).events
    assert ("run_resumed", call_id) == (
        events[before.size].body.kind,
        getattr(events[before.size].body, "repeated_call", None),
    )
    replayed = project.twinflow("replay", str(project.trace), "--spec", "spec.yaml")
    assert 0 == replayed.returncode, replayed.stderr


def test_ctrl_c_inside_a_tool_pauses_and_resume_names_the_call(project: Project) -> None:
    """SIGINT while a tool runs: exit 130 with the resume command; the call is named, not re-run.

    Declared safe to repeat, the pasted command finishes the run, running that call once more.
    """
    project.hold_at(1)
    with interruptible():
        # As under `uv run`, whose hints are to be pasted as `uv run --frozen twinflow ...`.
        started = project.start(
            "run", "spec.yaml", "--out", "out", "--quiet", env={"UV_RUN_RECURSION_DEPTH": "1"}
        )
    assert "in step 1" == project.wait_ready()
    os.kill(started.pid, signal.SIGINT)
    stopped = started.wait()
    assert 130 == stopped.returncode, stopped.stderr
    # Under `uv run` from outside the workspace, the command names the workspace to paste.
    root = Path(__file__).resolve().parents[3]
    expected = f"uv run --project {root} --frozen twinflow resume out/trace.jsonl --spec spec.yaml"
    assert one_line(stopped.stderr).endswith(f"continue it with: {expected}")
    (project.root / "hold1").unlink()
    events = list(Trace.load(project.trace).events)
    assert ["tool_called", "run_failed"] == [e.body.kind for e in events[-2:]]
    call_id = getattr(events[-2].body, "call_id", None)
    # The printed command, pasted as printed in the user's directory (outside the workspace).
    env = {"PYTHONDONTWRITEBYTECODE": "1"}
    refused = run_process(["bash", "-c", expected], cwd=project.root, env=env, timeout=600)
    assert 2 == refused.returncode
    assert f"inside tool call {call_id} (step" in one_line(refused.stderr)
    assert "would only repeat" not in refused.stderr
    project.spec(allow="step", repeat="step")
    done = run_process(["bash", "-c", expected], cwd=project.root, env=env, timeout=600)
    assert 0 == done.returncode, done.stderr
    assert Counter({0: 1, 1: 2, 2: 1}) == project.executions()
    resumed = Trace.load(project.trace).events[len(events)].body
    assert ("run_resumed", call_id) == (resumed.kind, getattr(resumed, "repeated_call", None))


def test_ctrl_c_while_the_model_answers_is_a_pause_resumed_as_is(project: Project) -> None:
    """SIGINT during a model request: the pasted resume asks again and runs no tool twice."""
    project.script.hold_at = 1
    with interruptible():
        started = project.start("run", "spec.yaml", "--out", "out", "--quiet")
    project.script.wait_held()
    os.kill(started.pid, signal.SIGINT)
    stopped = started.wait()
    project.script.release()
    assert 130 == stopped.returncode, stopped.stderr
    last = Trace.load(project.trace).events[-1].body
    assert ("run_failed", "KeyboardInterrupt") == (last.kind, getattr(last, "error_type", None))
    done = project.twinflow(*pasted(stopped.stderr))
    assert 0 == done.returncode, done.stderr
    assert Counter({0: 1, 1: 1, 2: 1}) == project.executions()
    assert Counter({0: 1, 1: 2, 2: 1, 3: 1}) == project.script.requests


def test_a_fork_stopped_with_ctrl_c_resumes_with_the_pasted_command(project: Project) -> None:
    """SIGINT inside a fork's first live tool call: the pasted resume finishes the fork, its
    served step still neither asked nor run, the interrupted call run once more and named."""
    assert 0 == project.twinflow("run", "spec.yaml", "--out", "out", "--quiet").returncode
    project.spec(allow="step", repeat="step", name="new.yaml")
    ran = project.executions()
    project.script.served_below = 1
    project.hold_at(1)
    with interruptible():
        started = project.start(
            "fork", str(project.trace), "--at-step", "2", "--spec", "new.yaml", "--out", "fork"
        )
    assert "in step 1" == project.wait_ready()
    os.kill(started.pid, signal.SIGINT)
    stopped = started.wait()
    assert 130 == stopped.returncode, stopped.stderr
    (project.root / "hold1").unlink()
    command = pasted(stopped.stderr)
    assert ["resume", "fork/trace.jsonl", "--spec", "new.yaml"] == command
    done = project.twinflow(*command, "--json")
    assert 0 == done.returncode, done.stderr
    assert (ran + Counter({1: 2, 2: 1}), "all done") == (
        project.executions(),
        json.loads(done.stdout)["output"],
    )
    kinds = [e.body.kind for e in Trace.load(project.root / command[1]).events]
    assert ["run_failed", "run_resumed"] == kinds[kinds.index("run_resumed") - 1 :][:2]


def test_a_second_writer_is_refused_while_one_holds_the_trace(project: Project) -> None:
    """While a run, then a resume, is held inside a tool, another resume exits 2 and writes nothing."""
    killed_run(project, at=1)
    project.spec(allow="step", repeat="step")
    project.hold_at(2)
    first = project.start("resume", str(project.trace), "--spec", "spec.yaml")
    assert "in step 2" == project.wait_ready()
    data = project.trace.read_bytes()
    second = project.twinflow("resume", str(project.trace), "--spec", "spec.yaml")
    assert 2 == second.returncode
    assert "being written by another process" in one_line(second.stderr)
    assert data == project.trace.read_bytes()
    first.kill()
    assert -9 == first.wait().returncode
    (project.root / "hold2").unlink()
    result = project.twinflow("resume", str(project.trace), "--spec", "spec.yaml")
    assert 0 == result.returncode, result.stderr
    assert 0 == project.twinflow("verify", str(project.trace)).returncode


def test_bad_inputs_exit_with_one_line_and_change_nothing(project: Project) -> None:
    """Finished, tampered, unnamed spec, changed spec: each refused with its exit code."""
    killed_run(project, at=2)
    project.spec(allow="step", repeat="step")
    trace = str(project.trace)
    data = project.trace.read_bytes()
    no_spec = project.twinflow("resume", trace)
    assert 2 == no_spec.returncode
    assert "--trust-spec" in one_line(no_spec.stderr)
    changed = project.spec(allow="", ask="step", repeat="step", name="changed.yaml")
    diverged = project.twinflow("resume", trace, "--spec", str(changed))
    assert 1 == diverged.returncode
    assert "diverged" in one_line(diverged.stderr)
    tampered = project.root / "tampered.jsonl"
    tampered.write_bytes(data.replace(b'"n":0', b'"n":9'))
    bad = project.twinflow("resume", str(tampered), "--spec", "spec.yaml")
    assert 1 == bad.returncode
    assert "seq" in one_line(bad.stderr)
    assert data == project.trace.read_bytes()
    assert 0 == project.twinflow("resume", trace, "--spec", "spec.yaml").returncode
    finished = project.trace.read_bytes()
    again = project.twinflow("resume", trace, "--spec", "spec.yaml")
    assert 2 == again.returncode
    assert "already finished" in one_line(again.stderr)
    assert finished == project.trace.read_bytes()


def test_approve_then_deny_until_the_run_finishes(project: Project) -> None:
    """A tool in ask stops the run (exit 3); approve runs it, deny reaches the model as a denial."""
    project.spec(ask="step")
    run = project.twinflow("run", "spec.yaml", "--out", "out", "--json")
    assert 3 == run.returncode, run.stderr
    [waiting] = json.loads(run.stdout)["paused"]
    call = waiting["call_id"]
    assert f"approve out/trace.jsonl --call {call} --spec spec.yaml" in one_line(run.stderr)
    assert ({"n": 0}, "step") == (waiting["arguments"], waiting["tool"])
    assert Counter() == project.executions()
    trace = str(project.trace)
    unknown = project.twinflow("approve", trace, "--call", "nope", "--spec", "spec.yaml")
    assert 2 == unknown.returncode
    assert f"waiting: {call} (step)" in one_line(unknown.stderr)
    first = project.twinflow("approve", trace, "--call", call, "--by", "ann", "--spec", "spec.yaml")
    assert 3 == first.returncode, first.stderr
    assert Counter({0: 1}) == project.executions()
    recorded = project.twinflow(
        "approve", trace, "--all", "--deny", "--reason", "not now", "--no-resume"
    )
    assert 0 == recorded.returncode, recorded.stderr
    last = project.twinflow("resume", trace, "--spec", "spec.yaml")
    assert 3 == last.returncode, last.stderr
    done = project.twinflow("approve", trace, "--all", "--spec", "spec.yaml", "--json")
    assert 0 == done.returncode, done.stderr
    events = list(Trace.load(project.trace, require_complete=True).events)
    denial = [e.body.result.content for e in events if e.body.kind == "tool_returned"][1]
    assert "ToolDenied: denied by unnamed: not now" == denial
    assert Counter({0: 1, 2: 1}) == project.executions()
    assert Counter({0: 1, 1: 1, 2: 1, 3: 1}) == project.script.requests


def test_signed_decisions_are_checked_by_verify_key(project: Project) -> None:
    """approve --sign signs each decision over its call; verify --key checks it, another key fails."""
    project.spec(ask="step")
    assert 0 == project.twinflow("keygen", "lab.example/ann", "--out", "ann").returncode
    assert 0 == project.twinflow("keygen", "lab.example/bob", "--out", "bob").returncode
    assert 3 == project.twinflow("run", "spec.yaml", "--out", "out", "--quiet").returncode
    trace = str(project.trace)
    for _ in range(STEPS):
        project.twinflow("approve", trace, "--all", "--sign", "ann.key", "--spec", "spec.yaml")
    assert Counter({0: 1, 1: 1, 2: 1}) == project.executions()
    checked = project.twinflow("verify", trace, "--key", "ann.pub", "--json")
    assert (0, 3) == (checked.returncode, json.loads(checked.stdout)["signed_decisions"])
    other = project.twinflow("verify", trace, "--key", "bob.pub")
    assert 1 == other.returncode
    assert "does not verify" in one_line(other.stderr)


def test_an_unsigned_decision_fails_verify_key(project: Project) -> None:
    """A decision recorded without --sign fails verify --key, naming its seq."""
    project.spec(ask="step")
    assert 0 == project.twinflow("keygen", "lab.example/ann", "--out", "ann").returncode
    assert 3 == project.twinflow("run", "spec.yaml", "--out", "out", "--quiet").returncode
    trace = str(project.trace)
    assert 0 == project.twinflow("approve", trace, "--all", "--no-resume").returncode
    unsigned = project.twinflow("verify", trace, "--key", "ann.pub", "--allow-incomplete")
    assert 1 == unsigned.returncode
    assert "seq 4 (call" in one_line(unsigned.stderr) and "is not signed" in unsigned.stderr


def test_fork_takes_the_first_steps_from_the_parent_and_links_it(project: Project) -> None:
    """fork --at-step 2: step 1 is neither asked nor run again; diff finds no divergence; show links."""
    assert 0 == project.twinflow("run", "spec.yaml", "--out", "out", "--quiet").returncode
    parent = project.trace.read_bytes()
    asked, ran = Counter(project.script.requests), project.executions()
    forked = project.twinflow(
        "fork",
        str(project.trace),
        "--at-step",
        "2",
        "--spec",
        "spec.yaml",
        "--out",
        "fork",
        "--json",
    )
    assert 0 == forked.returncode, forked.stderr
    child = json.loads(forked.stdout)["trace"]
    assert Counter({1: 1, 2: 1, 3: 1}) == project.script.requests - asked
    assert Counter({1: 1, 2: 1}) == project.executions() - ran
    assert parent == project.trace.read_bytes()
    same = project.twinflow("diff", str(project.trace), child)
    assert 0 == same.returncode, same.stdout + same.stderr
    shown = project.twinflow("show", child)
    head = Trace.load(project.trace).checkpoint()
    link = (
        f"forked at step 2 from the run whose trace had {head.size} events, root (hex) {head.root}"
    )
    assert link in shown.stdout
    past = project.twinflow("fork", str(project.trace), "--at-step", "9", "--spec", "spec.yaml")
    assert 2 == past.returncode
    assert "no step 9 to fork at; its steps are 1 to 4" in one_line(past.stderr)


def served_fork(project: Project, spec: Path, code: int) -> tuple[list[Any], list[Any], Any]:
    """Fork the recorded run at step 3 with ``spec`` (expecting exit ``code``), the model
    refusing steps 1 and 2 (a fork serves them): the served steps' decisions and calls as the
    parent and as the child recorded them, and the fork's JSON outcome. The child replays."""
    parent = Trace.load(project.trace)
    project.script.served_below = 2
    asked = Counter(project.script.requests)
    forked = project.twinflow(
        "fork", str(project.trace), "--at-step", "3", "--spec", str(spec), "--out", "fork", "--json"
    )
    assert code == forked.returncode, forked.stderr
    outcome = json.loads(forked.stdout)
    assert 0 == sum(n for step, n in (project.script.requests - asked).items() if step < 2)
    kinds = {"approval_requested", "approval_decided", "policy_decided", "tool_called"}
    kinds.add("tool_returned")
    cut = next(
        e.seq for e in parent.events if e.body.kind == "model_requested" and e.body.step == 3
    )
    mine = [e.body for e in parent.events if e.seq < cut and e.body.kind in kinds]
    child = Trace.load(project.root / outcome["trace"])
    theirs = [e.body for e in child.events if e.body.kind in kinds][: len(mine)]
    replayed = project.twinflow("replay", outcome["trace"], "--spec", str(spec))
    assert 0 == replayed.returncode, replayed.stderr
    return mine, theirs, outcome


def test_fork_keeps_a_denial_the_new_spec_would_allow(project: Project) -> None:
    """Parent denied every call; a fork at step 3 allowing the tool runs only step 3's call."""
    project.spec(allow="")
    assert 0 == project.twinflow("run", "spec.yaml", "--out", "out", "--quiet").returncode
    assert Counter() == project.executions()
    mine, theirs, outcome = served_fork(project, project.spec(allow="step", name="new.yaml"), 0)
    assert mine == theirs
    assert ["deny", "deny"] == [b.decision for b in theirs if b.kind == "policy_decided"]
    assert (Counter({2: 1}), "all done") == (project.executions(), outcome["output"])


def test_fork_serves_a_call_the_new_spec_would_deny(project: Project) -> None:
    """Parent ran every call; a fork denying the tool serves steps 1-2 and runs nothing again."""
    assert 0 == project.twinflow("run", "spec.yaml", "--out", "out", "--quiet").returncode
    ran = project.executions()
    mine, theirs, outcome = served_fork(project, project.spec(allow="", name="new.yaml"), 0)
    assert mine == theirs
    assert ["allow", "allow"] == [b.decision for b in theirs if b.kind == "policy_decided"]
    assert (ran, "all done") == (project.executions(), outcome["output"])


def test_fork_serves_a_call_the_new_spec_would_ask_about(project: Project) -> None:
    """A fork whose spec asks a person about the tool waits only at its first live step."""
    assert 0 == project.twinflow("run", "spec.yaml", "--out", "out", "--quiet").returncode
    ran = project.executions()
    mine, theirs, outcome = served_fork(project, project.spec(ask="step", name="new.yaml"), 3)
    assert mine == theirs
    waiting = [(p["tool"], p["arguments"]) for p in outcome["paused"]]
    assert (ran, [("step", {"n": 2})]) == (project.executions(), waiting)


@pytest.mark.real_model
def test_a_run_paused_on_the_embedded_model_is_approved_and_finished(tmp_path: Path) -> None:
    """SmolLM2-135M calls a tool that needs approval; approve resumes it without asking again."""
    spec = DEMO_SPEC.format(
        prompt=json.dumps(PROMPT),
        system=json.dumps(SYSTEM),
        kind="openai-compatible",
        url="embedded",
        dialect="llama-cpp-python",
        name="local",
    ).replace("  allow: [convert_currency]", "  ask: [convert_currency]")
    (tmp_path / "spec.yaml").write_text(spec)

    def twinflow(*args: str) -> ProcessResult:
        return run_process(
            [sys.executable, "-m", "twinflow.cli", *args],
            cwd=tmp_path,
            env={"PYTHONDONTWRITEBYTECODE": "1"},
            timeout=900,
        )

    run = twinflow("run", "spec.yaml", "--out", "out", "--json")
    assert 3 == run.returncode, run.stderr
    [waiting] = json.loads(run.stdout)["paused"]
    assert "convert_currency" == waiting["tool"]
    paused = Trace.load(tmp_path / "out" / "trace.jsonl")
    approved = twinflow(
        "approve", "out/trace.jsonl", "--all", "--by", "ann", "--spec", "spec.yaml", "--json"
    )
    assert 0 == approved.returncode, approved.stderr
    outcome = json.loads(approved.stdout)
    assert (["convert_currency"], {"amount", "currency"}) == (
        outcome["tool_calls"],
        set(outcome["output"]),
    )
    events = list(Trace.load(tmp_path / "out" / "trace.jsonl", require_complete=True).events)
    assert "run_resumed" == events[paused.size].body.kind
    # The recorded step was served from the trace: one reply before the pause, the rest after.
    replies = [e.seq for e in events if e.body.kind == "model_responded"]
    assert 1 == sum(1 for seq in replies if seq < paused.size)
    replayed = twinflow("replay", "out/trace.jsonl", "--spec", "spec.yaml")
    assert 0 == replayed.returncode, replayed.stderr


def _decide_hints(result: ProcessResult) -> tuple[list[str], str]:
    """The decide command a paused run prints on stdout, and the one it says on stderr."""
    printed = [
        line.split("decide", 1)[1].strip()
        for line in result.stdout.splitlines()
        if line.strip().startswith("decide ")
    ]
    said = one_line(result.stderr).split("approve and go on with: ", 1)[1]
    return printed, said.split(" (add --deny")[0]


def test_the_printed_decide_hint_runs_as_pasted_from_outside_the_workspace(
    project: Project,
) -> None:
    """`uv run --project ROOT` from a directory of the user's: each pause prints one decide
    command (the same on stdout and stderr); pasted as printed, it approves and goes on, until
    the run finishes."""
    uv = shutil.which("uv") or os.environ["UV"]
    project.spec(ask="step")
    root = Path(__file__).resolve().parents[3]
    env = {"PYTHONDONTWRITEBYTECODE": "1"}
    result = run_process(
        [uv, "run", "--project", str(root), "--frozen", "twinflow", "run", "spec.yaml"],
        cwd=project.root,
        env=env,
        timeout=600,
    )
    pauses = 0
    while result.returncode == 3 and pauses < 5:
        pauses += 1
        printed, said = _decide_hints(result)
        assert ([said], True) == (printed, said.startswith(f"uv run --project {root} --frozen "))
        result = run_process(["bash", "-c", said], cwd=project.root, env=env, timeout=600)
    assert (0, True) == (result.returncode, pauses >= 1), result.stderr
    assert pauses == sum(project.executions().values())  # each approved call ran once


def test_live_replay_names_a_received_decision_before_running_anything(
    project: Project, tmp_path: Path
) -> None:
    """A live replay runs every approved call again: on another machine (no record of the
    decision, no key) it names the decision and runs nothing; --accept-received-decisions goes on."""
    project.spec(ask="step")
    assert 3 == project.twinflow("run", "spec.yaml", "--out", "out").returncode
    trace = str(project.trace)
    while project.twinflow("approve", trace, "--all", "--spec", "spec.yaml").returncode == 3:
        pass
    ran = sum(project.executions().values())
    live = ["replay", trace, "--spec", "spec.yaml", "--mode", "live"]
    here = project.twinflow(*live)
    elsewhere = {"PYTHONDONTWRITEBYTECODE": "1", "TWINFLOW_STATE_DIR": str(tmp_path / "other")}
    refused = run_process(
        [sys.executable, "-m", "twinflow.cli", *live], cwd=project.root, env=elsewhere
    )
    after_refusal = sum(project.executions().values())
    accepted = run_process(
        [sys.executable, "-m", "twinflow.cli", *live, "--accept-received-decisions"],
        cwd=project.root,
        env=elsewhere,
    )
    expected = (0, 2, True, 2 * ran, 0)
    actual = (
        here.returncode,
        refused.returncode,
        "not recorded on this machine" in one_line(refused.stderr),
        after_refusal,
        accepted.returncode,
    )
    assert expected == actual, (here.stderr, refused.stderr, accepted.stderr)
