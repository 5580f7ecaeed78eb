"""The command against hostile input: received bundles, planted links, concurrent runs, secrets."""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_testkit import chat_answer

from twinflow.kernel import LoopbackServer, ThreadExecutor
from twinflow.kernel._loopback import LoopbackRequest, LoopbackResponse
from twinflow.kernel._process import ProcessResult, run_process

CALC = '''
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b
'''

# A tool module a received bundle brings: importing it leaves a mark.
PLANTED = """
import pathlib
pathlib.Path(__file__).with_name("PWNED").write_text("imported")

def add(a: int, b: int) -> int:
    \"\"\"Add two integers.\"\"\"
    return a + b
"""

# A barrier on files: each run's tool waits until every run has reached its tool call.
MEET = '''
import os, time

def add(a: int, b: int) -> int:
    """Add two integers, once every concurrent run has got this far."""
    directory, n = os.environ["MEET_DIR"], int(os.environ["MEET_N"])
    open(os.path.join(directory, str(os.getpid())), "w").close()
    give_up = time.monotonic() + 240
    while len(os.listdir(directory)) < n:
        if time.monotonic() > give_up:
            raise RuntimeError("the other runs never arrived")
        time.sleep(0.01)
    return a + b
'''

SPEC = """\
prompt: {prompt}
model:
  url: {url}
  dialect: llama.cpp
  mode: native
{extra}tools: [calc:add]
policy:
  allow: [add]
max_steps: 3
"""

KEY = "sk-hostile-test-0123456789"


def twinflow(*args: str, cwd: Path, env: dict[str, str] | None = None) -> ProcessResult:
    """Run `python -m twinflow.cli ARGS` (the current directory is then on sys.path)."""
    return run_process(
        [sys.executable, "-m", "twinflow.cli", *args],
        cwd=cwd,
        env={"PYTHONDONTWRITEBYTECODE": "1", **(env or {})},
        timeout=300,
    )


def scripted(request: LoopbackRequest) -> LoopbackResponse:
    """An OpenAI-compatible server: call `add`, then answer with the tool's result."""
    body = request.json_value()
    assert isinstance(body, dict)
    messages = body["messages"]
    assert isinstance(messages, list)
    results = [m for m in messages if isinstance(m, dict) and m.get("role") == "tool"]
    message: dict[str, Any]
    if results:
        message = {"role": "assistant", "content": f"the sum is {results[-1]['content']}"}
    else:
        call = {"name": "add", "arguments": '{"a": 2, "b": 3}'}
        message = {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "call_1", "type": "function", "function": call}],
        }
    reply = {
        "model": "scripted",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1},
    }
    return chat_answer(body, reply)


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    """A scripted model server on loopback."""
    with LoopbackServer(scripted) as running:
        yield running


@pytest.fixture
def bundle(tmp_path: Path, server: LoopbackServer) -> Path:
    """A received bundle: a real trace, and a spec and tool module that mark any import."""
    user = tmp_path / "user"
    user.mkdir()
    (user / "calc.py").write_text(CALC)
    (user / "spec.yaml").write_text(SPEC.format(prompt="add", url=server.url, extra=""))
    made = twinflow("run", "spec.yaml", "--out", "out", cwd=user)
    assert 0 == made.returncode, made.stderr
    received = tmp_path / "bundle"
    received.mkdir()
    shutil.copy(user / "out" / "trace.jsonl", received / "trace.jsonl")
    shutil.copy(user / "spec.yaml", received / "spec.yaml")
    (received / "calc.py").write_text(PLANTED)
    return received


def test_trace_commands_import_nothing_from_a_bundle(bundle: Path) -> None:
    """verify, checkpoint, prove and diff run inside a bundle and import none of its modules."""
    for args in (
        ("verify", "trace.jsonl"),
        ("checkpoint", "trace.jsonl"),
        ("prove", "trace.jsonl", "--seq", "0", "--origin", "example.org/lab"),
        ("diff", "trace.jsonl", "trace.jsonl"),
    ):
        result = twinflow(*args, cwd=bundle)
        assert (0, False) == (result.returncode, (bundle / "PWNED").exists()), (args, result)


def test_replay_refuses_the_spec_beside_a_trace_unless_told(bundle: Path) -> None:
    """Without --spec or --trust-spec, replay exits 2, names the modules, and imports nothing."""
    result = twinflow("replay", "trace.jsonl", "--mode", "live", cwd=bundle)
    assert 2 == result.returncode
    assert "--spec" in result.stderr
    assert "would import: calc" in result.stderr
    assert not (bundle / "PWNED").exists()


def test_replay_imports_from_the_named_specs_directory_not_the_cwd(
    bundle: Path, tmp_path: Path
) -> None:
    """--spec names the user's spec: its calc.py runs, the bundle's calc.py in the cwd never does."""
    user_spec = tmp_path / "user" / "spec.yaml"
    for mode in ("recorded", "live"):
        result = twinflow(
            "replay", "trace.jsonl", "--spec", str(user_spec), "--mode", mode, cwd=bundle
        )
        assert 0 == result.returncode, result.stderr
    assert not (bundle / "PWNED").exists()


def test_trust_spec_prints_the_modules_before_importing_them(bundle: Path) -> None:
    """--trust-spec is the explicit way to run the bundle's code; it says which modules first."""
    result = twinflow("replay", "trace.jsonl", "--trust-spec", cwd=bundle)
    assert 0 == result.returncode, result.stderr
    first = result.stdout.splitlines()[0]
    assert first.startswith("--trust-spec: rebuilding from") and "importing calc" in first
    assert (bundle / "PWNED").exists()


def test_run_does_not_import_tools_from_the_current_directory(
    tmp_path: Path, server: LoopbackServer
) -> None:
    """A spec in another directory imports its tools from there, not from a planted cwd module."""
    project, cwd = tmp_path / "project", tmp_path / "cwd"
    project.mkdir()
    cwd.mkdir()
    (project / "calc.py").write_text(CALC)
    (project / "spec.yaml").write_text(SPEC.format(prompt="add", url=server.url, extra=""))
    (cwd / "calc.py").write_text(PLANTED)
    result = twinflow("run", str(project / "spec.yaml"), "--out", "out", cwd=cwd)
    assert (0, False) == (result.returncode, (cwd / "PWNED").exists()), result.stderr


def test_a_refused_run_changes_no_file(tmp_path: Path, server: LoopbackServer) -> None:
    """A planted spec link is refused with a clear error; its target and the directory are unchanged."""
    (tmp_path / "calc.py").write_text(CALC)
    (tmp_path / "spec.yaml").write_text(SPEC.format(prompt="add", url=server.url, extra=""))
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    out = tmp_path / "out"
    out.mkdir()
    (out / "spec.yaml").symlink_to(victim)
    result = twinflow("run", "spec.yaml", "--out", "out", cwd=tmp_path)
    assert 2 == result.returncode
    assert "is a symbolic link" in result.stderr
    assert ("precious", ["spec.yaml"]) == (
        victim.read_text(),
        sorted(p.name for p in out.iterdir()),
    )


def test_concurrent_runs_into_one_directory_are_independent(
    tmp_path: Path, server: LoopbackServer
) -> None:
    """Runs in flight together each print their own trace, root and spec (a file barrier holds them)."""
    runs = 3
    meet = tmp_path / "meet"
    meet.mkdir()
    (tmp_path / "calc.py").write_text(MEET)
    for k in range(runs):
        (tmp_path / f"spec{k}.yaml").write_text(
            SPEC.format(prompt=f"run number {k}", url=server.url, extra="")
        )

    def one(k: int) -> ProcessResult:
        env = {"MEET_DIR": str(meet), "MEET_N": str(runs)}
        return twinflow("run", f"spec{k}.yaml", "--out", "out", "--json", cwd=tmp_path, env=env)

    results = dict(ThreadExecutor().map_bounded(one, range(runs), runs))
    traces = set()
    for k, result in results.items():
        assert 0 == result.returncode, result.stderr
        outcome = json.loads(result.stdout)
        trace = tmp_path / outcome["trace"]
        traces.add(trace)
        assert f"run number {k}" in trace.read_text()
        spec = trace.with_name(trace.name.replace("trace", "spec").replace(".jsonl", ".yaml"))
        assert f"run number {k}" in spec.read_text()
        verified = twinflow("verify", str(trace), "--json", cwd=tmp_path)
        assert outcome["root"] == json.loads(verified.stdout)["checkpoint"]["root"]
    assert runs == len(traces)


def test_an_api_key_is_sent_and_never_written(tmp_path: Path) -> None:
    """api_key_env's key reaches the server as a bearer header and appears in no file or output."""
    seen: list[str] = []

    def keyed(request: LoopbackRequest) -> LoopbackResponse:
        seen.extend(v for k, v in request.headers if k.lower() == "authorization")
        return scripted(request)

    with LoopbackServer(keyed) as keyed_server:
        (tmp_path / "calc.py").write_text(CALC)
        extra = "  api_key_env: TWINFLOW_HOSTILE_KEY\n"
        (tmp_path / "spec.yaml").write_text(
            SPEC.format(prompt="add", url=keyed_server.url, extra="").replace(
                "  mode: native\n", "  mode: native\n" + extra
            )
        )
        result = twinflow(
            "run", "spec.yaml", "--out", "out", cwd=tmp_path, env={"TWINFLOW_HOSTILE_KEY": KEY}
        )
    assert 0 == result.returncode, result.stderr
    assert {f"Bearer {KEY}"} == set(seen)
    leaked = [p.name for p in (tmp_path / "out").iterdir() if KEY.encode() in p.read_bytes()]
    assert ([], False) == (leaked, KEY in result.stdout + result.stderr)


@pytest.mark.parametrize(
    "url", ["http://user:{key}@127.0.0.1:{port}", "http://127.0.0.1:{port}/?api_key={key}"]
)
def test_a_key_in_the_url_is_refused_pointing_at_api_key_env(
    tmp_path: Path, server: LoopbackServer, url: str
) -> None:
    """Credentials in model.url exit 2 naming api_key_env, without echoing the key, writing nothing."""
    (tmp_path / "calc.py").write_text(CALC)
    port = server.url.rsplit(":", 1)[1]
    (tmp_path / "spec.yaml").write_text(
        SPEC.format(prompt="add", url=url.format(key=KEY, port=port), extra="")
    )
    result = twinflow("run", "spec.yaml", "--out", "out", cwd=tmp_path)
    assert 2 == result.returncode
    assert "api_key_env" in result.stderr
    assert (False, False) == (KEY in result.stderr, (tmp_path / "out").exists())


DEEP = "[" * 5000 + "]" * 5000


def deep_content(request: LoopbackRequest) -> LoopbackResponse:
    """A server whose every reply's content is 5000 nested arrays."""
    body = request.json_value()
    assert isinstance(body, dict)
    message = {"role": "assistant", "content": DEEP}
    reply = {
        "model": "hostile",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {},
    }
    return chat_answer(body, reply)


def deep_body(request: LoopbackRequest) -> LoopbackResponse:
    """A server whose whole answer (or, streamed, whose one event) is 5000 nested arrays."""
    body = request.json_value()
    if isinstance(body, dict) and body.get("stream"):
        event = f"data: {DEEP}\n\n".encode()
        return LoopbackResponse(
            headers=(("Content-Type", "text/event-stream"),), stream=lambda: iter([event])
        )
    return LoopbackResponse(body=DEEP.encode(), headers=(("Content-Type", "application/json"),))


def test_a_model_that_never_gives_a_valid_action_fails_like_any_run(tmp_path: Path) -> None:
    """Structured-action mode, deep replies: exit 1, the usual summary, every reply in the trace."""
    (tmp_path / "calc.py").write_text(CALC)
    with LoopbackServer(deep_content) as hostile:
        spec = SPEC.format(prompt="add", url=hostile.url, extra="")
        (tmp_path / "spec.yaml").write_text(spec.replace("mode: native", "mode: structured-action"))
        result = twinflow("run", "spec.yaml", "--out", "out", cwd=tmp_path)
    assert 1 == result.returncode, result.stderr
    assert "Traceback" not in result.stderr
    assert "InvalidModelReply" in result.stderr and ".attempts" not in result.stderr
    assert "refused   3 reply(ies)" in result.stdout
    assert 3 == (tmp_path / "out" / "trace.jsonl").read_text().count(DEEP)


def test_a_server_answering_deep_json_is_a_one_line_error(tmp_path: Path) -> None:
    """A whole answer of 5000 nested arrays: exit 2, one line, no traceback, in both modes,
    streamed (the default) and not (`--quiet`)."""
    (tmp_path / "calc.py").write_text(CALC)
    with LoopbackServer(deep_body) as hostile:
        for mode in ("native", "structured-action"):
            spec = SPEC.format(prompt="add", url=hostile.url, extra="")
            (tmp_path / f"{mode}.yaml").write_text(spec.replace("mode: native", f"mode: {mode}"))
            for flags in ((), ("--quiet",)):
                out = f"{mode}{''.join(flags)}"
                result = twinflow("run", f"{mode}.yaml", "--out", out, *flags, cwd=tmp_path)
                assert (2, 1) == (result.returncode, len(result.stderr.strip().splitlines()))
                assert "is not JSON" in result.stderr


BROKEN = '''
def add(a: int, b: int) -> int:
    """Add two integers."""
    raise ValueError("the adder is broken")
'''


def test_a_tool_that_raised_shows_in_the_run_summary(
    tmp_path: Path, server: LoopbackServer
) -> None:
    """The summary names the tool and its error type."""
    (tmp_path / "calc.py").write_text(BROKEN)
    (tmp_path / "spec.yaml").write_text(SPEC.format(prompt="add", url=server.url, extra=""))
    result = twinflow("run", "spec.yaml", "--out", "out", cwd=tmp_path)
    assert 0 == result.returncode, result.stderr
    assert "raised    1: add: ValueError" in result.stdout


def test_module_names_from_a_bundle_are_shown_escaped(bundle: Path) -> None:
    """A module name carrying a terminal escape is printed escaped, never raw."""
    spec = (bundle / "spec.yaml").read_text().replace("[calc:add]", '["evil\\e[2J:add"]')
    (bundle / "spec.yaml").write_text(spec)
    result = twinflow("replay", "trace.jsonl", cwd=bundle)
    assert 2 == result.returncode
    assert ("\x1b" in result.stderr, "would import: 'evil\\x1b[2J'" in result.stderr) == (
        False,
        True,
    )


def test_an_unset_api_key_variable_is_refused_before_any_file(
    tmp_path: Path, server: LoopbackServer
) -> None:
    """api_key_env naming an unset variable: exit 2 naming it, and no run directory is made."""
    (tmp_path / "calc.py").write_text(CALC)
    extra = "  api_key_env: TWINFLOW_SURELY_UNSET_KEY\n"
    spec = SPEC.format(prompt="add", url=server.url, extra="")
    (tmp_path / "spec.yaml").write_text(
        spec.replace("  mode: native\n", "  mode: native\n" + extra)
    )
    result = twinflow("run", "spec.yaml", "--out", "out", cwd=tmp_path)
    assert 2 == result.returncode
    assert "TWINFLOW_SURELY_UNSET_KEY" in result.stderr
    assert not (tmp_path / "out").exists()
