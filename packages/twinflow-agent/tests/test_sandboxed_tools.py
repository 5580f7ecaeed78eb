"""Sandboxed tools: spec keys, run_python in a run, limits as error results, replay and resume."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from twinflow._base._untrusted import REDACTED, register_secret
from twinflow.agent import (
    Agent,
    AgentConfigError,
    FunctionModel,
    Policy,
    SpecError,
    ToolReturned,
    Trace,
    replay,
)
from twinflow.agent._replay import ReplayPorts
from twinflow.agent._sandboxed import SandboxSession, SandboxSpec, builtin_tools
from twinflow.agent._spec import parse_spec
from twinflow.agent._tools import Tool
from twinflow.kernel import CountingIds, ReplayDivergenceError, SteppingClock
from twinflow.kernel._sandbox import BubblewrapSandbox
from twinflow.trace import FileTraceSink
from twinflow.vocab import CallId, Message, ModelRequest, TextPart, ToolCallPart

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="bubblewrap is Linux's"
)

START = datetime(2026, 1, 1, tzinfo=UTC)
SMALL = SandboxSpec(cpu_seconds=2, wall_seconds=120, processes=32, output_bytes=65536)
SPEC = """
prompt: go
model: {{url: embedded}}
tools:
  - {{name: "sandbox_tools:double", sandbox: true}}
  - sandbox_tools:plain
{extra}
"""


def script(codes: Sequence[str]) -> Callable[[ModelRequest], Message]:
    """A model that calls run_python with each code in turn (by step), then answers "done"."""

    def reply(request: ModelRequest) -> Message:
        messages = request.transcript.messages
        step = sum(m.role == "assistant" for m in messages)
        if step >= len(codes):
            return Message(role="assistant", parts=(TextPart(text="done"),))
        call_id = CallId(f"c{step}")
        call = ToolCallPart(id=call_id, name="run_python", arguments={"code": codes[step]})
        return Message(role="assistant", parts=(call,))

    return reply


def make(
    codes: Sequence[str], trace: Any, session: SandboxSession, ports: ReplayPorts | None = None
) -> Agent[str]:
    """An agent whose model runs ``codes`` through run_python on ``session``."""
    tools = builtin_tools(("run_python",), session)
    return Agent(
        ports.model if ports else FunctionModel(script(codes)),
        clock=ports.clock if ports else SteppingClock(START, timedelta(milliseconds=1)),
        ids=ports.ids if ports else CountingIds(),
        tools=tools,
        policy=Policy(allow=frozenset({"run_python"})),
        trace=ports.trace if ports else trace,
        model_label=ports.model_label if ports else None,
        tool_results=ports.tool_results if ports else None,
    )


def results(path: Path) -> list[tuple[bool, str]]:
    """Each tool_returned of the trace: (is_error, content)."""
    return [
        (e.body.result.is_error, e.body.result.content)
        for e in Trace.load(path).events
        if isinstance(e.body, ToolReturned)
    ]


def run(codes: Sequence[str], path: Path, session: SandboxSession | None = None) -> str:
    """Run the scripted agent to its answer, its trace at ``path``."""
    with make(codes, FileTraceSink(path), session or SandboxSession(SMALL)) as agent:
        return str(agent.run("go").output)


def test_the_spec_takes_sandboxed_tools_settings_and_builtins(tmp_path: Path) -> None:
    """A tool mapping, the sandbox settings and a built-in tool resolve to sandboxed tools."""
    (tmp_path / "sandbox_tools.py").write_text(
        "def double(x: int) -> int:\n    return 2 * x\n\ndef plain(x: int) -> int:\n    return x\n"
    )
    extra = "sandbox: {cpu_seconds: 3}\nbuiltin_tools: [run_python]\npolicy: {allow: [run_python]}"
    spec = parse_spec(SPEC.format(extra=extra), "spec.yaml", code_dir=tmp_path)
    tools = [Tool.from_function(t) for t in spec.sandboxed_tools(spec.load_tools())]
    double, plain, run_python = tools
    assert (6, 3, ("sandbox_tools",)) == (
        json.loads(double.call(double.validate({"x": 3}))),
        json.loads(plain.call(plain.validate({"x": 3}))),
        spec.modules(),
    )
    assert ("run_python", 3) == (run_python.name, spec.sandbox.cpu_seconds if spec.sandbox else 0)


def test_loopback_ports_are_refused_with_the_reason(tmp_path: Path) -> None:
    """The sandbox has no network, so a spec asking for ports is refused, saying so."""
    with pytest.raises(SpecError, match="loopback ports cannot be offered inside it yet"):
        parse_spec(SPEC.format(extra="sandbox: {loopback_ports: [8080]}"), "spec.yaml")


def test_run_python_keeps_its_files_between_calls(tmp_path: Path) -> None:
    """The second call reads the file the first wrote; each result names what changed."""
    path = tmp_path / "trace.jsonl"
    run(["open('a.txt', 'w').write('hello')", "print(open('a.txt').read())"], path)
    first, second = (json.loads(content) for _, content in results(path))
    assert (["a.txt"], "hello\n", 0) == (
        [f["name"] for f in first["files_changed"]],
        second["stdout"],
        second["exit_status"],
    )


def test_a_limit_is_the_calls_error_result_and_the_run_goes_on(tmp_path: Path) -> None:
    """An infinite loop ends as an error result naming cpu_seconds; the next call still runs."""
    path = tmp_path / "trace.jsonl"
    answer = run(["while True: pass", "print('after')"], path)
    (looped, text), (after_error, after) = results(path)
    assert ("done", True, False) == (answer, looped, after_error)
    assert "hit its limit: cpu_seconds (2)" in text and "after\n" == json.loads(after)["stdout"]


def test_a_fork_bomb_is_an_error_result_naming_the_process_limit(tmp_path: Path) -> None:
    """Forking for ever ends the call with the process limit named."""
    path = tmp_path / "trace.jsonl"
    run(["import os\nwhile True: os.fork()"], path)
    [(is_error, text)] = results(path)
    assert (True, True) == (is_error, "processes (32)" in text)


def test_a_registered_secret_and_terminal_escapes_do_not_reach_the_result(tmp_path: Path) -> None:
    """What the code prints is scrubbed of registered secrets; escapes stay JSON-escaped text."""
    secret = "sk-sandbox-test-0123456789abcdef"
    register_secret(secret)
    path = tmp_path / "trace.jsonl"
    run([f"print({secret!r}); print('\\x1b]0;owned\\x07\\x1b[2J')"], path)
    [(_, text)] = results(path)
    assert (False, True, False) == (secret in text, REDACTED in text, "\x1b" in text)


def test_recorded_replay_needs_no_sandbox(tmp_path: Path) -> None:
    """Replay in recorded mode serves every call from the trace, even with no bwrap at all."""
    path = tmp_path / "trace.jsonl"
    codes = ["open('a', 'w').write('1')", "print(open('a').read())"]
    run(codes, path)
    missing = SandboxSession(SMALL, sandbox=BubblewrapSandbox(bwrap=str(tmp_path / "none")))
    trace = Trace.load(path)
    result = replay(trace, lambda ports: make(codes, None, missing, ports))
    assert trace.size == result.events


def test_live_replay_runs_again_and_names_the_first_difference(tmp_path: Path) -> None:
    """Live replay re-runs the code in a fresh sandbox; different output is a named divergence."""
    path = tmp_path / "trace.jsonl"
    run(["import os; print(len(os.listdir()))"], path)
    trace = Trace.load(path)
    assert (
        trace.size
        == replay(trace, lambda p: make([], None, SandboxSession(SMALL), p), mode="live").events
    )
    planted = SandboxSession(SMALL)
    (planted.work_dir / "extra").write_text("x")
    with pytest.raises(ReplayDivergenceError, match="tool_returned"):
        replay(Trace.load(path), lambda p: make([], None, planted, p), mode="live")


def test_resume_rebuilds_the_work_directory_from_recorded_calls(tmp_path: Path) -> None:
    """A run resumed after its first call finds the file that call wrote."""
    path = tmp_path / "trace.jsonl"
    codes = ["open('a.txt', 'w').write('kept')", "print(open('a.txt').read())"]
    run(codes, path)
    full = path.read_bytes().splitlines(keepends=True)
    second_call = next(
        i for i, line in enumerate(full) if b'"c1"' in line and b"tool_called" in line
    )
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(b"".join(full[:second_call]))
    with make(codes, None, SandboxSession(SMALL)) as agent:
        agent.resume(cut)
    assert "kept\n" == json.loads(results(cut)[-1][1])["stdout"]


def test_resume_refuses_a_work_directory_it_cannot_rebuild(tmp_path: Path) -> None:
    """Code whose files differ when run again refuses the later calls, naming the file."""
    path = tmp_path / "trace.jsonl"
    codes = ["import os; open('r', 'wb').write(os.urandom(8))", "print(open('r', 'rb').read())"]
    run(codes, path)
    full = path.read_bytes().splitlines(keepends=True)
    second_call = next(
        i for i, line in enumerate(full) if b'"c1"' in line and b"tool_called" in line
    )
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(b"".join(full[:second_call]))
    with make(codes, None, SandboxSession(SMALL)) as agent:
        agent.resume(cut)
    is_error, text = results(cut)[-1]
    assert (True, True) == (is_error, "cannot be restored from the trace" in text)


def test_a_sandboxed_tool_returns_values_and_raises_as_it_would_in_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Values come back as the same canonical JSON, a builtin exception as itself."""
    (tmp_path / "boxed_tools.py").write_text(
        "def stats(words: list[str]) -> dict[str, int]:\n"
        "    return {'n': len(words), 'longest': max(map(len, words))}\n\n"
        "def fail(x: int) -> int:\n"
        "    raise ValueError(f'no {x}')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    import boxed_tools

    boxed = Tool.from_function(boxed_tools.stats, sandbox=SMALL)
    plain = Tool.from_function(boxed_tools.stats)
    arguments = {"words": ["to", "be", "free"]}
    assert plain.call(plain.validate(arguments)) == boxed.call(boxed.validate(arguments))
    failing = Tool.from_function(boxed_tools.fail, sandbox=True)
    with pytest.raises(ValueError, match="no 3"):
        failing.call(failing.validate({"x": 3}))


def test_without_bwrap_each_call_is_refused_naming_what_to_install(tmp_path: Path) -> None:
    """No bubblewrap: the call is an error result naming the package; nothing runs unsandboxed."""
    path = tmp_path / "trace.jsonl"
    missing = SandboxSession(SMALL, sandbox=BubblewrapSandbox(bwrap=str(tmp_path / "none")))
    answer = run(["open('ran', 'w')"], path, missing)
    [(is_error, text)] = results(path)
    assert ("done", True, True) == (answer, is_error, "apt-get install bubblewrap" in text)
    assert [] == list(missing.work_dir.iterdir())


def test_a_fork_rebuilds_the_work_directory_of_the_steps_it_serves(tmp_path: Path) -> None:
    """A fork after the first call runs that call again, so the second finds its file."""
    parent = tmp_path / "parent.jsonl"
    codes = ["open('a.txt', 'w').write('forked')", "print(open('a.txt').read())"]
    run(codes, parent)
    child = tmp_path / "child.jsonl"
    with make(codes, FileTraceSink(child), SandboxSession(SMALL)) as agent:
        agent.fork(parent, at_step=2)
    assert "forked\n" == json.loads(results(child)[-1][1])["stdout"]


def test_a_tool_that_cannot_be_imported_inside_is_refused_when_built() -> None:
    """A nested function cannot cross into the sandbox: a usage error naming what to do."""

    def nested(x: int) -> int:
        return x

    with pytest.raises(AgentConfigError, match="define it at the top level of a module"):
        Tool.from_function(nested, sandbox=True)


def test_run_shell_runs_a_script_in_the_same_kind_of_sandbox() -> None:
    """run_shell (named only when asked for) runs /bin/sh with the code and reports its files."""
    (run_shell,) = builtin_tools(("run_shell",), SandboxSession(SMALL))
    tool = Tool.from_function(run_shell)
    done = json.loads(tool.call(tool.validate({"code": "echo hi > f && cat f && env | wc -l"})))
    assert ("run_shell", "hi\n5\n", ["f"]) == (
        tool.name,
        done["stdout"],
        [f["name"] for f in done["files_changed"]],
    )
