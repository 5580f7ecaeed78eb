"""Conversations on the command line: ``twinflow run SPEC --continue TRACE --prompt TEXT``.

Real `twinflow` processes against a scripted OpenAI-compatible server on loopback that answers
the last user message (calling the ``step`` tool first when the message starts with "step").
The trace of the conversation is then verified, replayed, shown, proved, redacted, resumed
after a SIGKILL mid-turn and forked at a turn, each by its own command.
"""

from __future__ import annotations

import base64
import json
import sys
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from cli_testkit import chat_answer, completion

from twinflow.agent import Agent, FunctionModel, Trace
from twinflow.agent._events import Environment
from twinflow.cli._demo import PROMPT, SYSTEM
from twinflow.cli._demo_cli import DEMO_SPEC
from twinflow.cli._main import main
from twinflow.kernel import CountingIds, LoopbackServer, SteppingClock
from twinflow.kernel._loopback import LoopbackRequest, LoopbackResponse
from twinflow.kernel._process import ProcessResult, run_process, start_on_terminal
from twinflow.vocab import Message

TOOLS = '''
import os
import signal
from pathlib import Path

HERE = Path(__file__).parent


def step(n: int) -> str:
    """Do step n."""
    with open(HERE / "executions", "a") as f:
        f.write(f"{n}\\n")
    kill_at = HERE / "kill_at"
    if kill_at.exists() and kill_at.read_text() == str(n):
        os.kill(os.getpid(), signal.SIGKILL)
    return f"step {n} done"
'''

SPEC = """\
prompt: hello
model:
  url: {url}
  dialect: llama.cpp
  mode: native
tools: [steps:step]
policy:
  allow: [step]
  repeat_safe: [step]
max_steps: {max_steps}
"""


def _text(content: Any) -> str:
    """A message's text, whether the dialect sent a string or a list of parts."""
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return str(content or "")


class Chat:
    """The scripted server: answers the last user message, after one ``step`` call for a
    message starting with "step" (n = the user turns so far). Counts requests by turn."""

    def __init__(self) -> None:
        self.requests: Counter[int] = Counter()

    def __call__(self, request: LoopbackRequest) -> LoopbackResponse:
        body = request.json_value()
        assert isinstance(body, dict)
        messages = [m for m in body["messages"] if isinstance(m, dict)]
        users = [i for i, m in enumerate(messages) if m.get("role") == "user"]
        turn = len(users)
        self.requests[turn] += 1
        text = _text(messages[users[-1]].get("content"))
        called = any(m.get("role") == "tool" for m in messages[users[-1] :])
        if text.startswith("step") and not called:
            call = {
                "id": f"call_{turn}",
                "type": "function",
                "function": {"name": "step", "arguments": json.dumps({"n": turn})},
            }
            message: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [call]}
            return chat_answer(body, completion(message, "tool_calls"))
        answer = {"role": "assistant", "content": f"turn {turn}: {text}"}
        return chat_answer(body, completion(answer))


class Project:
    """A user's project directory, with the server that scripts its model."""

    def __init__(self, root: Path, chat: Chat, url: str) -> None:
        self.root = root
        self.chat = chat
        self.url = url
        self.trace = root / "out" / "trace.jsonl"
        (root / "steps.py").write_text(TOOLS)
        self.spec()

    def spec(self, *, max_steps: int = 4, name: str = "spec.yaml") -> Path:
        path = self.root / name
        path.write_text(SPEC.format(url=self.url, max_steps=max_steps))
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

    def turn(self, prompt: str, *extra: str) -> ProcessResult:
        """Send the recorded run its next turn."""
        return self.twinflow(
            "run", "spec.yaml", "--continue", str(self.trace), "--prompt", prompt, *extra
        )

    def answer(self, result: ProcessResult) -> str:
        assert 0 == result.returncode, result.stderr
        return str(json.loads(result.stdout)["output"])


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Project]:
    """A project whose model is the scripted, counting server."""
    chat = Chat()
    with LoopbackServer(chat) as server:
        yield Project(tmp_path, chat, server.url)


def three_turns(project: Project) -> None:
    """Record a three-turn conversation, the second turn calling the tool."""
    first = project.twinflow("run", "spec.yaml", "--out", "out", "--json")
    assert "turn 1: hello" == project.answer(first)
    assert "turn 2: step two" == project.answer(project.turn("step two", "--json"))
    assert "turn 3: bye" == project.answer(project.turn("bye", "--json"))


def test_three_turns_make_one_trace_that_verifies_and_replays(project: Project) -> None:
    """Each turn asks the model only for itself; the trace verifies complete (with the stdlib
    leaf too) and replays recorded and live."""
    three_turns(project)
    trace = Trace.load(project.trace, require_complete=True)
    assert (Counter({1: 1, 2: 2, 3: 1}), Counter({2: 1})) == (
        project.chat.requests,
        project.executions(),
    )
    assert ["hello", "step two", "bye"] == [
        getattr(e.body, "prompt", None) or getattr(e.body, "text", None)
        for e in trace.events
        if e.body.kind in ("run_started", "user_turn")
    ]
    leaf = run_process(
        [sys.executable, "-P", "-m", "twinflow.trace", "verify", str(project.trace)],
        cwd=project.root,
    )
    assert 0 == leaf.returncode, leaf.stderr
    for mode in ("recorded", "live"):
        replayed = project.twinflow(
            "replay", str(project.trace), "--spec", "spec.yaml", "--mode", mode
        )
        assert 0 == replayed.returncode, replayed.stderr
    assert Counter({2: 2}) == project.executions()


def test_show_the_page_proofs_and_redaction_read_a_conversation(project: Project) -> None:
    """``show`` prints each turn, the page holds the whole conversation's bytes, a proof ties
    turn 1's checkpoint to the conversation, and a trace with the user's second turn redacted
    still verifies."""
    first = project.twinflow("run", "spec.yaml", "--out", "out", "--json")
    assert 0 == first.returncode, first.stderr
    size = json.loads(first.stdout)["events"]
    noted = project.twinflow(
        "checkpoint", str(project.trace), "--origin", "example.org/lab", "--out", "one.note"
    )
    assert 0 == noted.returncode, noted.stderr
    assert 0 == project.turn("step two").returncode
    shown = project.twinflow("show", str(project.trace))
    assert 0 == shown.returncode, shown.stderr
    assert "turn 2, the user: step two" in shown.stdout
    paged = project.twinflow("show", str(project.trace), "--html", "page.html")
    assert 0 == paged.returncode, paged.stderr
    page = (project.root / "page.html").read_text()
    assert base64.b64encode(project.trace.read_bytes()).decode() in page
    assert "', the user: '" in page  # the page describes each user turn
    proof = project.twinflow(
        "prove", str(project.trace), "--from-size", str(size), "--origin", "example.org/lab",
        "--out", "p.tlog-consistency",
    )  # fmt: skip
    assert 0 == proof.returncode, proof.stderr
    checked = project.twinflow(
        "prove", "--check", "p.tlog-consistency", "--old-checkpoint", "one.note"
    )
    assert 0 == checked.returncode, checked.stderr
    turn = Trace.load(project.trace).kinds.index("user_turn")
    redacted = project.twinflow(
        "redact", str(project.trace), "--seq", str(turn), "--out", "public.jsonl"
    )
    assert 0 == redacted.returncode, redacted.stderr
    verified = project.twinflow("verify", "public.jsonl")
    assert 0 == verified.returncode, verified.stderr


def test_a_turn_killed_mid_tool_resumes_and_the_conversation_goes_on(project: Project) -> None:
    """SIGKILL inside turn 2's tool: resume finishes turn 2 (turn 1 is served, not asked),
    turn 3 follows, and the whole trace replays."""
    assert 0 == project.twinflow("run", "spec.yaml", "--out", "out", "--quiet").returncode
    (project.root / "kill_at").write_text("2")
    killed = project.turn("step two", "--quiet")
    assert -9 == killed.returncode, killed.stderr
    (project.root / "kill_at").unlink()
    asked = Counter(project.chat.requests)
    resumed = project.twinflow("resume", str(project.trace), "--spec", "spec.yaml", "--json")
    assert "turn 2: step two" == project.answer(resumed)
    assert Counter({2: 1}) == project.chat.requests - asked
    assert "turn 3: bye" == project.answer(project.turn("bye", "--json"))
    replayed = project.twinflow("replay", str(project.trace), "--spec", "spec.yaml")
    assert 0 == replayed.returncode, replayed.stderr


def test_fork_at_turn_takes_the_turns_before_it_from_the_trace(project: Project) -> None:
    """``fork --at-turn 3`` serves turns 1 and 2 and asks the model only for turn 3."""
    three_turns(project)
    asked = Counter(project.chat.requests)
    forked = project.twinflow(
        "fork", str(project.trace), "--at-turn", "3", "--spec", "spec.yaml", "--out", "fork",
        "--json",
    )  # fmt: skip
    assert "turn 3: bye" == project.answer(forked)
    assert Counter({3: 1}) == project.chat.requests - asked
    child = Trace.load(project.root / json.loads(forked.stdout)["trace"], require_complete=True)
    assert 4 == getattr(child.events[0].body, "parent", None).step


def test_a_turn_sent_to_a_failed_run_is_refused_in_one_line(project: Project) -> None:
    """A run whose turn failed gets a one-line error naming the failure and the fork to make;
    nothing is written. ``--continue`` without ``--prompt`` is a usage error."""
    project.spec(max_steps=1)
    failed = project.twinflow("run", "spec.yaml", "--out", "out", "--prompt", "step", "--quiet")
    assert 1 == failed.returncode, failed.stderr
    size = project.trace.stat().st_size
    refused = project.turn("again")
    lines = refused.stderr.strip().splitlines()
    assert (2, 1) == (refused.returncode, len(lines)), refused.stderr
    assert "the run failed with MaxStepsExceeded" in lines[0]
    assert f"twinflow fork {project.trace} --at-step 1" in lines[0]
    assert size == project.trace.stat().st_size
    missing = project.twinflow("run", "spec.yaml", "--continue", str(project.trace))
    assert 2 == missing.returncode
    assert "twinflow run --continue needs --prompt TEXT" in missing.stderr


def test_chat_on_a_terminal_streams_shows_decisions_and_ends_with_ctrl_d(
    project: Project,
) -> None:
    """``twinflow chat``: each line typed is a turn, the reply streams, the tool call's policy
    decision and result are shown; Ctrl-D ends it with the trace and its root printed."""
    terminal = start_on_terminal(
        [sys.executable, "-m", "twinflow.cli", "chat", "spec.yaml", "--out", "out"],
        cwd=project.root,
        env={"PYTHONDONTWRITEBYTECODE": "1"},
    )
    try:
        terminal.until("you> ")
        terminal.type("hello\n")
        assert "model> turn 1: hello" in terminal.until("you> ")
        terminal.type("step two\n")
        shown = terminal.until("you> ")
        assert "policy> allow step (by policy)" in shown
        assert "tool>   result: step 2 done" in shown
        assert "model> turn 2: step two" in shown
        terminal.type("\x04")
        ending = terminal.until("root      (hex) ")
    finally:
        code = terminal.close()
    trace = Trace.load(project.trace, require_complete=True)
    assert (0, 1) == (code, trace.kinds.count("user_turn"))
    assert f"trace     out/trace.jsonl ({trace.size} events)" in ending


def test_chat_reads_turns_from_a_pipe_and_keeps_stdout_one_document(project: Project) -> None:
    """Piped lines are the turns; with ``--json`` the replies go to stderr and stdout is the
    one JSON document of the conversation's last turn."""
    result = run_process(
        [sys.executable, "-m", "twinflow.cli", "chat", "spec.yaml", "--out", "out", "--json"],
        cwd=project.root,
        env={"PYTHONDONTWRITEBYTECODE": "1"},
        stdin=b"hello\n\nstep two\n",
    )
    assert "turn 2: step two" == project.answer(result)
    assert "model> turn 1: hello" in result.stderr
    assert 1 == Trace.load(project.trace, require_complete=True).kinds.count("user_turn")


def test_diff_config_shows_where_runs_ran_and_turns_label_divergences(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two conversations on other servers, their second turns differing: the behaviour diff
    names turn 2 only, and ``--config`` shows the server and distribution differences."""
    paths = []
    for name, url, second in (
        ("a", "http://127.0.0.1:8080/v1", "again"),
        ("b", "http://10.0.0.2/v1", "other"),
    ):
        environment = Environment(
            python="3.11", implementation="CPython", platform="linux",
            distributions={"httpx": name}, model=f"openai {url} m",
        )  # fmt: skip
        path = tmp_path / f"{name}.jsonl"
        agent = Agent(
            FunctionModel(lambda request: Message.assistant("ok")),
            clock=SteppingClock(datetime(2026, 1, 1, tzinfo=UTC)),
            ids=CountingIds(),
            trace=path,
            environment=environment,
        )
        with agent:
            agent.run(second, continue_from=agent.run("hello"))
        paths.append(str(path))
    assert 1 == main(["diff", *paths, "--config"])
    printed = capsys.readouterr().out.splitlines()
    assert [
        "setup  environment: model: openai http://127.0.0.1:8080/v1 m -> openai http://10.0.0.2/v1 m",
        "setup  environment: distribution httpx: a -> b",
    ] == [line for line in printed if line.startswith("setup")]
    turns = [line for line in printed if not line.startswith("setup")]
    assert turns and all(line.startswith("turn 2 step ") for line in turns), printed


@pytest.mark.real_model
def test_a_conversation_on_the_embedded_model_continues_verifies_and_replays(
    tmp_path: Path,
) -> None:
    """SmolLM2-135M answers the demo's task, then a second turn continues the same trace (the
    tool budget spent, it answers without the tool); the two turns verify and replay."""
    spec = DEMO_SPEC.format(
        prompt=json.dumps(PROMPT),
        system=json.dumps(SYSTEM),
        kind="openai-compatible",
        url="embedded",
        dialect="llama-cpp-python",
        name="local",
    )
    (tmp_path / "spec.yaml").write_text(spec)

    def twinflow(*args: str) -> ProcessResult:
        return run_process(
            [sys.executable, "-m", "twinflow.cli", *args],
            cwd=tmp_path,
            env={"PYTHONDONTWRITEBYTECODE": "1"},
            timeout=900,
        )

    first = twinflow("run", "spec.yaml", "--out", "out", "--json")
    assert 0 == first.returncode, first.stderr
    second = twinflow(
        "run", "spec.yaml", "--continue", "out/trace.jsonl", "--prompt",
        "Give the same conversion again.", "--json",
    )  # fmt: skip
    assert 0 == second.returncode, second.stderr
    assert {"amount", "currency"} == set(json.loads(second.stdout)["output"])
    trace = Trace.load(tmp_path / "out" / "trace.jsonl", require_complete=True)
    assert (1, 2) == (trace.kinds.count("user_turn"), trace.kinds.count("run_finished"))
    replayed = twinflow("replay", "out/trace.jsonl", "--spec", "spec.yaml")
    assert 0 == replayed.returncode, replayed.stderr


def test_export_marks_each_further_turn_on_the_one_run_span(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A three-turn conversation exports as one run span carrying a user-turn event per turn."""
    path = tmp_path / "chat.jsonl"
    with Agent(FunctionModel(lambda request: Message.assistant("ok")), trace=path) as agent:
        agent.run("bye", continue_from=agent.run("again", continue_from=agent.run("hello")))
    assert 0 == main(["export", "otel", str(path), "--out", str(tmp_path / "spans.json")])
    capsys.readouterr()
    spans = [
        span
        for resource in json.loads((tmp_path / "spans.json").read_text())["resourceSpans"]
        for scope in resource["scopeSpans"]
        for span in scope["spans"]
    ]
    [run] = [span for span in spans if span["name"] == "invoke_agent twinflow"]
    marks = [event["name"] for event in run.get("events", [])]
    assert 2 == marks.count("twinflow.user_turn")
