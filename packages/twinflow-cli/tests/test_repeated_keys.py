"""A received JSON document whose object repeats a key is refused, never read last-wins.

Real ``twinflow`` processes against scripted loopback servers and a stdio MCP server: a model's
reply body (whole or streamed), the JSON text inside it (an emission, tool-call arguments), an
MCP server's message, a spec, a dataset, a run directory's files and a run's code record.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_testkit import CALC, EVAL_PROMPT, SUMS, calc_spec, completion

from twinflow.kernel import LoopbackServer
from twinflow.kernel._loopback import LoopbackRequest, LoopbackResponse
from twinflow.kernel._process import ProcessResult, run_process

REPEATED = "appears twice"


def twinflow(*args: str, cwd: Path) -> ProcessResult:
    """Run ``python -m twinflow.cli ARGS`` in ``cwd``."""
    return run_process(
        [sys.executable, "-m", "twinflow.cli", *args],
        cwd=cwd,
        env={"PYTHONDONTWRITEBYTECODE": "1"},
        timeout=300,
    )


def final(answer: str) -> dict[str, Any]:
    """A structured-action message giving the final ``answer``."""
    return {"role": "assistant", "content": json.dumps({"action": "final", "answer": answer})}


def twice(document: dict[str, Any], key: str, second: Any) -> str:
    """``document`` as JSON text with ``key`` written again at its end, holding ``second``."""
    return json.dumps(document)[:-1] + f", {json.dumps(key)}: {json.dumps(second)}}}"


def body_twice(request: LoopbackRequest) -> LoopbackResponse:
    """A reply whose ``choices`` appear twice: answer A, then B (streamed: in one chunk)."""
    body = request.json_value()
    assert isinstance(body, dict)
    reply = completion(final("A"))
    later = completion(final("B"))["choices"]
    if not body.get("stream"):
        data = twice(reply, "choices", later).encode()
        return LoopbackResponse(headers=(("Content-Type", "application/json"),), body=data)
    chunk = {
        "model": "scripted",
        "choices": [{"index": 0, "delta": final("A"), "finish_reason": "stop"}],
    }
    delta = [{"index": 0, "delta": final("B"), "finish_reason": "stop"}]
    events = [f"data: {twice(chunk, 'choices', delta)}\n\n".encode(), b"data: [DONE]\n\n"]
    return LoopbackResponse(headers=(("Content-Type", "text/event-stream"),), stream=lambda: events)


def emission_twice(request: LoopbackRequest) -> LoopbackResponse:
    """A reply whose emission (the JSON text in its content) says ``answer`` twice."""
    text = twice({"action": "final", "answer": "A"}, "answer", "B")
    message = {"role": "assistant", "content": text}
    return LoopbackResponse.json_body(completion(message))


def arguments_twice(request: LoopbackRequest) -> LoopbackResponse:
    """A native tool call whose arguments say ``a`` twice (2, then 40); then an answer."""
    body = request.json_value()
    assert isinstance(body, dict)
    if any(m.get("role") == "tool" for m in body["messages"]):
        return LoopbackResponse.json_body(completion({"role": "assistant", "content": "done"}))
    call = {"name": "add", "arguments": twice({"a": 2, "b": 3}, "a", 40)}
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "call_1", "type": "function", "function": call}],
    }
    return LoopbackResponse.json_body(completion(message, "tool_calls"))


@pytest.fixture
def served() -> Iterator[Callable[[Callable[[LoopbackRequest], LoopbackResponse]], str]]:
    """Starts scripted model servers; yields a function giving one's URL."""
    servers: list[LoopbackServer] = []

    def start(handler: Callable[[LoopbackRequest], LoopbackResponse]) -> str:
        server = LoopbackServer(handler)
        server.__enter__()
        servers.append(server)
        return server.url

    yield start
    for server in servers:
        server.__exit__(None, None, None)


def events(trace: Path) -> list[dict[str, Any]]:
    """The bodies of a trace's events."""
    return [json.loads(line)["event"]["body"] for line in trace.read_text().splitlines()]


@pytest.mark.parametrize("stream", [False, True])
def test_a_reply_body_repeating_a_key_is_refused(
    tmp_path: Path, served: Callable[..., str], stream: bool
) -> None:
    """A reply body (or a streamed chunk) with ``choices`` twice: the run fails naming the
    repeated key; neither answer becomes the run's output."""
    (tmp_path / "calc.py").write_text(CALC)
    (tmp_path / "spec.yaml").write_text(calc_spec(served(body_twice)))
    quiet = () if stream else ("--quiet",)
    result = twinflow("run", "spec.yaml", "--out", "run", *quiet, cwd=tmp_path)
    assert 0 != result.returncode, result.stdout
    assert f"object key 'choices' {REPEATED}" in result.stdout + result.stderr
    finished = [b for b in events(tmp_path / "run" / "trace.jsonl") if b["kind"] == "run_finished"]
    assert [] == finished


def test_an_emission_repeating_a_key_is_refused_not_read_last_wins(
    tmp_path: Path, served: Callable[..., str]
) -> None:
    """An emission saying ``answer`` twice is refused as invalid (re-asked), never answer B."""
    (tmp_path / "calc.py").write_text(CALC)
    (tmp_path / "spec.yaml").write_text(calc_spec(served(emission_twice)))
    result = twinflow("run", "spec.yaml", "--out", "run", "--quiet", cwd=tmp_path)
    trace = (tmp_path / "run" / "trace.jsonl").read_text()
    assert 0 != result.returncode, result.stdout
    assert REPEATED in trace
    outputs = [b for b in events(tmp_path / "run" / "trace.jsonl") if b["kind"] == "run_finished"]
    assert [] == outputs


def test_tool_call_arguments_repeating_a_key_never_reach_the_tool(
    tmp_path: Path, served: Callable[..., str]
) -> None:
    """Native tool-call arguments with ``a`` twice: no tool call is made with either value."""
    (tmp_path / "calc.py").write_text(CALC)
    spec = calc_spec(served(arguments_twice)).replace(
        "dialect: llama.cpp", "dialect: llama.cpp\n  mode: native"
    )
    (tmp_path / "spec.yaml").write_text(spec)
    result = twinflow("run", "spec.yaml", "--out", "run", "--quiet", cwd=tmp_path)
    bodies = events(tmp_path / "run" / "trace.jsonl")
    assert [] == [b for b in bodies if b["kind"] == "tool_called"], result.stdout
    assert (
        REPEATED in (tmp_path / "run" / "trace.jsonl").read_text() + result.stdout + result.stderr
    )


def calls_calc_add(request: LoopbackRequest) -> LoopbackResponse:
    """A structured-action model that calls ``calc.add`` once, then answers ``done``."""
    body = request.json_value()
    assert isinstance(body, dict)
    if any(m.get("role") == "assistant" for m in body["messages"]):
        return LoopbackResponse.json_body(completion(final("done")))
    action = {"action": "call_tool", "tool": "calc.add", "arguments": {"a": 2, "b": 3}}
    message = {"role": "assistant", "content": json.dumps(action)}
    return LoopbackResponse.json_body(completion(message))


MCP_SERVER = r"""
import json, sys

for line in sys.stdin:
    request = json.loads(line)
    if "id" not in request:
        continue
    method, rid = request["method"], json.dumps(request["id"])
    if method == "initialize":
        result = {"protocolVersion": request["params"]["protocolVersion"], "capabilities":
                  {"tools": {}}, "serverInfo": {"name": "twice", "version": "0"}}
        text = json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result})
    elif method == "tools/list":
        add = {"name": "add", "inputSchema": {"type": "object", "properties":
               {"a": {"type": "integer"}, "b": {"type": "integer"}}}}
        text = json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": {"tools": [add]}})
    else:
        one = {"content": [{"type": "text", "text": "5"}], "isError": False}
        other = {"content": [{"type": "text", "text": "500"}], "isError": False}
        text = ('{"jsonrpc": "2.0", "id": %s, "result": %s, "result": %s}'
                % (rid, json.dumps(one), json.dumps(other)))
    sys.stdout.write(text + "\n")
    sys.stdout.flush()
"""


def test_an_mcp_message_repeating_a_key_is_a_refused_call(
    tmp_path: Path, served: Callable[..., str]
) -> None:
    """An MCP server answering with ``result`` twice: the call's result is an McpError naming
    the repeated key, neither 5 nor 500."""
    (tmp_path / "twice.py").write_text(MCP_SERVER)
    argv = json.dumps([sys.executable, "twice.py"])
    (tmp_path / "spec.yaml").write_text(
        f"prompt: add\nmodel:\n  url: {served(calls_calc_add)}\n  dialect: llama.cpp\n"
        f"mcp_servers:\n  - name: calc\n    command: {argv}\n"
        "policy:\n  allow: [calc.add]\nmax_steps: 3\n"
    )
    result = twinflow("run", "spec.yaml", "--out", "run", "--quiet", cwd=tmp_path)
    returned = [b for b in events(tmp_path / "run" / "trace.jsonl") if b["kind"] == "tool_returned"]
    assert ["McpError"] == [b["error_type"] for b in returned], result.stderr
    assert REPEATED in returned[0]["result"]["content"]


def test_files_repeating_a_key_are_refused_with_one_line(
    tmp_path: Path, served: Callable[..., str]
) -> None:
    """A spec (YAML or JSON syntax), a JSONL dataset, a run directory's results.json and a
    run's code record, each with a key twice: exit 2, one line naming the repeated key."""
    url = served(lambda request: LoopbackResponse.json_body(completion(final("5"))))
    (tmp_path / "calc.py").write_text(CALC)
    spec = calc_spec(url, EVAL_PROMPT)
    (tmp_path / "spec.yaml").write_text(spec)
    (tmp_path / "twice.yaml").write_text(spec + "max_steps: 5\n")
    (tmp_path / "twice.json").write_text(
        twice({"prompt": "p", "model": {"url": url}}, "prompt", "q")
    )
    (tmp_path / "dataset.yaml").write_text(SUMS)
    (tmp_path / "dataset.jsonl").write_text('{"id": "s1", "input": "2 and 3", "id": "s2"}\n')
    checks: list[tuple[str, ...]] = [
        ("run", "twice.yaml", "--out", "r1"),
        ("run", "twice.json", "--out", "r2"),
        ("eval", "run", "dataset.jsonl", "--spec", "spec.yaml", "--out", "e1"),
    ]
    made = twinflow(
        "eval", "run", "dataset.yaml", "--spec", "spec.yaml", "--out", "e2", cwd=tmp_path
    )
    assert 0 == made.returncode, made.stderr
    results = tmp_path / "e2" / "results.json"
    results.write_text(twice(json.loads(results.read_text()), "dataset", "other"))
    checks.append(("eval", "rescore", "e2"))
    ran = twinflow("run", "spec.yaml", "--out", "r3", "--quiet", cwd=tmp_path)
    assert 0 == ran.returncode, ran.stderr
    record = next((tmp_path / "r3").glob("code*.json"))
    record.write_text(twice(json.loads(record.read_text()), "modules", []))
    checks.append(("replay", str(tmp_path / "r3" / "trace.jsonl"), "--trust-spec"))
    for command in checks:
        refused = twinflow(*command, cwd=tmp_path)
        assert (command, 2) == (command, refused.returncode), refused.stdout + refused.stderr
        assert (command, 1) == (command, len(refused.stderr.strip().splitlines())), refused.stderr
        assert REPEATED in refused.stderr, (command, refused.stderr)
