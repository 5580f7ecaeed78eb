"""The real `twinflow` command in a subprocess: exit codes, one-line errors, `--json`, replay."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_testkit import CALLS, chat_answer, completion, scripted_chat, sse_events

from twinflow.cli import _output
from twinflow.cli._main import COMMAND_TABLE
from twinflow.kernel import LoopbackServer
from twinflow.kernel._loopback import LoopbackRequest, LoopbackResponse
from twinflow.kernel._process import ProcessResult, run_process

SUBCOMMANDS = tuple(COMMAND_TABLE)  # every command `twinflow --help` lists

CALC = '''
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b
'''

OUTPUT = """
from pydantic import BaseModel


class Total(BaseModel):
    total: int
"""

SPEC = """\
prompt: add 2 and 3
model:
  url: {url}
  dialect: llama.cpp
  mode: native
tools: [calc:add]
policy:
  allow: [add]
output: answer:Total
max_steps: 3
"""


def twinflow(*args: str, cwd: Path, timeout: float = 300.0) -> ProcessResult:
    """Run `twinflow ARGS` as a user would, in a fresh interpreter."""
    return run_process(
        [sys.executable, "-m", "twinflow.cli", *args],
        cwd=cwd,
        env={"PYTHONDONTWRITEBYTECODE": "1"},
        timeout=timeout,
    )


def chat_completion(request: LoopbackRequest) -> LoopbackResponse:
    """A scripted OpenAI-compatible server: call `add`, then answer with its result."""
    body = request.json_value()
    assert isinstance(body, dict)
    messages = body["messages"]
    assert isinstance(messages, list)
    results = [m for m in messages if isinstance(m, dict) and m.get("role") == "tool"]
    if not results:
        message: dict[str, Any] = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'},
                }
            ],
        }
        finish = "tool_calls"
    else:
        last = results[-1]
        assert isinstance(last, dict)
        message = {"role": "assistant", "content": json.dumps({"total": int(str(last["content"]))})}
        finish = "stop"
    reply = completion(message, finish)
    if body.get("stream"):
        return LoopbackResponse(
            headers=(("Content-Type", "text/event-stream"),),
            stream=lambda: sse_events(reply),
        )
    return LoopbackResponse(
        body=json.dumps(reply).encode(), headers=(("Content-Type", "application/json"),)
    )


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Path]:
    """A user's project: a tools module, an output model and a spec naming a scripted server."""
    with LoopbackServer(chat_completion) as server:
        (tmp_path / "calc.py").write_text(CALC)
        (tmp_path / "answer.py").write_text(OUTPUT)
        (tmp_path / "spec.yaml").write_text(SPEC.format(url=server.url))
        yield tmp_path


def one_line(stderr: str) -> str:
    """The single line of a failure's stderr (and check it is a single line)."""
    lines = stderr.strip().splitlines()
    assert 1 == len(lines), stderr
    return lines[0]


def test_every_subcommand_has_help(tmp_path: Path) -> None:
    """`twinflow CMD --help` exits 0 and describes CMD, for every subcommand."""
    for command in SUBCOMMANDS:
        result = twinflow(command, "--help", cwd=tmp_path)
        assert (0, "") == (result.returncode, result.stderr)
        assert f"usage: twinflow {command}" in result.stdout


def test_help_lists_every_exit_code_the_command_returns(tmp_path: Path) -> None:
    """`twinflow --help` names each exit code `_output` defines, 3 (paused) included."""
    codes = sorted(v for k, v in vars(_output).items() if k.startswith("EXIT_"))
    result = twinflow("--help", cwd=tmp_path)
    epilog = " ".join(result.stdout.split("Exit codes:", 1)[1].split())
    assert [0, 1, 2, 3, 130] == codes
    assert [] == [code for code in codes if f" {code} " not in f" {epilog}"]


def test_unreadable_traces_exit_2_with_one_line(tmp_path: Path) -> None:
    """A missing file, an empty file and binary garbage are usage errors, not failed checks."""
    (tmp_path / "empty.jsonl").write_bytes(b"")
    (tmp_path / "garbage.jsonl").write_bytes(bytes(range(256)) * 4)
    cases = {
        "missing.jsonl": "no such file",
        "empty.jsonl": "empty",
        "garbage.jsonl": "not a twinflow trace",
    }
    for name, reason in cases.items():
        for command in ("verify", "checkpoint", "replay"):
            result = twinflow(command, name, cwd=tmp_path)
            assert 2 == result.returncode, (command, name, result.stderr)
            assert reason in one_line(result.stderr)


def test_a_spec_with_a_typo_points_at_the_key_and_its_line(tmp_path: Path) -> None:
    """A misspelt key is named with its line and the key it probably meant."""
    (tmp_path / "bad.yaml").write_text(
        "prompt: hi\nmodel:\n  url: http://127.0.0.1:9\n  dialct: vllm\n"
    )
    result = twinflow("run", "bad.yaml", cwd=tmp_path)
    assert 2 == result.returncode
    line = one_line(result.stderr)
    assert "bad.yaml:4: model.dialct: unknown key (did you mean 'dialect'?)" in line


def test_a_tool_module_that_fails_to_import_is_a_one_line_usage_error(tmp_path: Path) -> None:
    """A tools module with a syntax error or raising at import exits 2 with one line, no traceback."""
    modules = {"syntax": "def f(:\n", "raising": "raise RuntimeError('boom at import')\n"}
    for name, source in modules.items():
        (tmp_path / f"{name}.py").write_text(source)
        (tmp_path / f"{name}.yaml").write_text(
            f"prompt: hi\nmodel:\n  url: http://127.0.0.1:9\ntools: [{name}:f]\n"
        )
        result = twinflow("run", f"{name}.yaml", "--out", name, cwd=tmp_path)
        assert 2 == result.returncode, result.stderr
        assert f"cannot import {name!r}" in one_line(result.stderr)


def test_run_verify_tamper_and_replay_in_both_modes(project: Path) -> None:
    """The whole life of a trace: run, verify, tamper, replay recorded and live, changed code."""
    run = twinflow("run", "spec.yaml", "--out", "out", "--json", cwd=project)
    assert 0 == run.returncode, run.stderr
    outcome = json.loads(run.stdout)
    assert ({"total": 5}, ["add"]) == (outcome["output"], outcome["tool_calls"])
    trace = project / "out" / "trace.jsonl"

    verify = twinflow("verify", str(trace), "--json", cwd=project)
    assert (0, True) == (verify.returncode, json.loads(verify.stdout)["ok"])
    for mode in ("recorded", "live"):
        replayed = twinflow(
            "replay", str(trace), "--spec", "spec.yaml", "--mode", mode, cwd=project
        )
        assert 0 == replayed.returncode, replayed.stderr

    # Change the tool's code: live replay runs it again and diverges; recorded does not.
    (project / "calc.py").write_text(CALC.replace("a + b", "a + b + 1"))
    live = twinflow(
        "replay", str(trace), "--spec", "spec.yaml", "--mode", "live", "--json", cwd=project
    )
    assert 1 == live.returncode
    payload = json.loads(live.stdout)
    assert ("/body/result/content", "tool_returned") == (
        payload["pointer"],
        payload["expected"]["body"]["kind"],
    )
    # Live replay first announces the calls it will run on the trace's arguments (one line),
    # then fails in one line.
    notice, failure = live.stderr.strip().splitlines()
    assert notice.startswith("twinflow replay: --mode live runs the spec's tools")
    assert f"event {payload['seq']} differs" in failure
    recorded = twinflow("replay", str(trace), "--spec", "spec.yaml", cwd=project)
    assert 0 == recorded.returncode

    # Edit one event in place: verify names its sequence number and exits 1.
    lines = trace.read_bytes().splitlines(keepends=True)
    seq = next(i for i, line in enumerate(lines) if b'"tool_returned"' in line)
    lines[seq] = lines[seq].replace(b'"content":"5"', b'"content":"6"')
    trace.write_bytes(b"".join(lines))
    tampered = twinflow("verify", str(trace), "--json", cwd=project)
    assert 1 == tampered.returncode
    assert seq == json.loads(tampered.stdout)["problem"]["seq"]
    assert f"at seq {seq}" in one_line(tampered.stderr)


def test_checkpoint_prove_and_diff(project: Path) -> None:
    """Checkpoints and proofs agree with verify; two runs differ first at run_started."""
    for out in ("a", "b"):
        assert 0 == twinflow("run", "spec.yaml", "--out", out, cwd=project).returncode
    a, b = "a/trace.jsonl", "b/trace.jsonl"
    made = twinflow(
        "checkpoint", a, "--origin", "example.org/lab", "--out", "cp.note", "--json", cwd=project
    )
    checkpoint = json.loads(made.stdout)
    verify = json.loads(twinflow("verify", a, "--json", cwd=project).stdout)
    assert verify["checkpoint"]["root"] == checkpoint["root"]
    assert 0 == twinflow("verify", a, "--checkpoint", "cp.note", cwd=project).returncode
    assert 1 == twinflow("verify", b, "--checkpoint", "cp.note", cwd=project).returncode

    prove = ["prove", a, "--seq", "2", "--checkpoint", "cp.note", "--json"]
    proof = json.loads(twinflow(*prove, cwd=project).stdout)
    assert (2, checkpoint["note"]) == (proof["index"], proof["proof"].split("\n\n", 1)[1])
    out_of_range = twinflow("prove", a, "--seq", "999", "--checkpoint", "cp.note", cwd=project)
    assert 2 == out_of_range.returncode
    assert "--seq 999" in one_line(out_of_range.stderr)

    assert 0 == twinflow("diff", a, a, cwd=project).returncode
    # The same agent twice behaves the same; byte for byte the runs differ from the first event.
    assert 0 == twinflow("diff", a, b, cwd=project).returncode
    different = twinflow("diff", a, b, "--exact", "--json", cwd=project)
    assert 1 == different.returncode
    # Two real runs differ from the first event on: its clock reading comes first in key order.
    assert (0, "/at") == (
        json.loads(different.stdout)["seq"],
        json.loads(different.stdout)["pointer"],
    )


@pytest.mark.real_model
def test_demo_runs_verifies_and_replays_on_the_embedded_model(tmp_path: Path) -> None:
    """`twinflow demo` on SmolLM2-135M: a tool call, a structured answer, verify and replay."""
    demo = twinflow("demo", "--out", "demo", "--json", cwd=tmp_path, timeout=600)
    assert 0 == demo.returncode, demo.stderr
    outcome = json.loads(demo.stdout)
    assert ["convert_currency"] == outcome["tool_calls"]
    assert {"amount", "currency"} == set(outcome["output"])
    trace = tmp_path / "demo" / "trace.jsonl"
    assert 0 == twinflow("verify", str(trace), cwd=tmp_path).returncode
    for mode in ("recorded", "live"):
        replayed = twinflow("replay", str(trace), "--trust-spec", "--mode", mode, cwd=tmp_path)
        assert 0 == replayed.returncode, replayed.stderr


def test_two_demo_runs_on_the_embedded_model_behave_alike(tmp_path: Path) -> None:
    """Temperature 0 on the embedded model is a zero-noise baseline: two runs diff as equal."""
    for _ in range(2):
        demo = twinflow("demo", "--out", "demo", "--quiet", cwd=tmp_path, timeout=600)
        assert 0 == demo.returncode, demo.stderr
    diff = twinflow("diff", "demo/trace.jsonl", "demo/trace.1.jsonl", cwd=tmp_path)
    assert (0, "") == (diff.returncode, diff.stderr), diff.stdout


def wrong_way_round(request: LoopbackRequest) -> LoopbackResponse:
    """A model that converts USD to EUR when asked for EUR to USD, then answers in EUR."""
    body = request.json_value()
    assert isinstance(body, dict)
    called = any(m.get("role") == "assistant" for m in body["messages"])
    action = (
        {"action": "final", "output": {"amount": 120.0, "currency": "EUR"}}
        if called
        else {
            "action": "call_tool",
            "tool": "convert_currency",
            "arguments": {"amount": 120, "source": "USD", "target": "EUR"},
        }
    )
    message = {"role": "assistant", "content": json.dumps(action)}
    return chat_answer(body, {"choices": [{"index": 0, "message": message}], "model": "m"})


@pytest.mark.parametrize(
    ("server", "verdict"),
    [
        (wrong_way_round, "wrong: expected 129.60 USD (120 EUR at 1.08 USD/EUR)"),
        (scripted_chat, "right: 129.60 USD (120 EUR at 1.08 USD/EUR)"),
    ],
)
def test_the_demo_shows_prompt_calls_and_whether_the_answer_is_right(
    tmp_path: Path, server: Any, verdict: str
) -> None:
    """The demo prints the prompt, each call with its arguments and result, and judges the answer."""
    with LoopbackServer(server) as model:
        args = ("demo", "--model-url", model.url, "--dialect", "llama.cpp", "--quiet")
        shown = twinflow(*args, cwd=tmp_path)
        as_json = twinflow(*args, "--json", cwd=tmp_path)
    assert 0 == shown.returncode, shown.stderr
    lines = [line.strip() for line in shown.stdout.splitlines()]
    prompt = "prompt    Convert 120 EUR to USD. Call the convert_currency tool with amount 120,"
    assert [True] == [line.startswith(prompt) for line in lines if line.startswith("prompt")]
    arguments = json.dumps(
        CALLS["convert_currency"]
        if server is scripted_chat
        else {"amount": 120, "source": "USD", "target": "EUR"},
        sort_keys=True,
    )
    result = "129.6" if server is scripted_chat else "111.12"
    assert f"call    convert_currency {arguments} -> {result}" in lines
    assert f"correct?  {verdict}" in lines
    document = json.loads(as_json.stdout)
    assert (verdict.startswith("right"), verdict) == (document["correct"], document["verdict"])


def test_a_spec_usage_error_changes_no_file_in_the_run_directory(project: Path) -> None:
    """A policy naming an unknown tool is refused before any trace is created or renamed."""
    assert 0 == twinflow("run", "spec.yaml", "--out", "out", cwd=project).returncode
    before = {p.name: p.read_bytes() for p in (project / "out").iterdir()}
    spec = (project / "spec.yaml").read_text().replace("allow: [add]", "allow: [add, nope]")
    (project / "bad.yaml").write_text(spec)
    result = twinflow("run", "bad.yaml", "--out", "out", cwd=project)
    assert 2 == result.returncode
    assert "nope" in one_line(result.stderr)
    assert before == {p.name: p.read_bytes() for p in (project / "out").iterdir()}
