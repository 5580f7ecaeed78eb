"""A scripted OpenAI-compatible server for tests that run real commands without a real model.

It speaks structured-action mode (the default): on the first step it calls the first tool it
is offered with that tool's arguments from `CALLS`; once the transcript holds its earlier turn it
gives the final answer from `FINALS` (an ``output`` object when a schema is asked for).

Beside it, the project those tests run: the `calc` tool module (`CALC`), a spec calling its
``add`` on the scripted server (`calc_spec`, both written by `calc_project`), a two-case dataset
(`SUMS`), and the CLI run in this process with ``--json`` (`cli_json`).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from twinflow.agent import Agent, FunctionModel
from twinflow.cli._main import main
from twinflow.kernel import CountingIds, SteppingClock
from twinflow.kernel._loopback import LoopbackRequest, LoopbackResponse
from twinflow.kernel._process import ProcessResult, run_process
from twinflow.trace import MemoryTraceSink
from twinflow.vocab import Message

CALLS: dict[str, dict[str, Any]] = {
    # First, so the coding example's conversation (which also says "add") is about it.
    "run_python": {
        "code": "open('solution.py', 'w').write('def add(a, b):\\n    return a + b\\n')"
    },
    "add": {"a": 2, "b": 3},
    "convert_currency": {"amount": 120, "source": "EUR", "target": "USD"},
    "convert_to_eur": {"amount": 120.0, "currency": "USD"},
    "calc.add": {"a": 2, "b": 3},
}
FINALS: dict[str, Any] = {
    "run_python": "done",
    "add": "5",
    "calc.add": "5",
    "convert_currency": {"amount": 129.6, "currency": "USD"},
    "convert_to_eur": {
        "vendor": "Acme Tools",
        "currency": "USD",
        "total": 120.0,
        "total_eur": 108.0,
    },
}

CALC = '''
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b
'''
"""The ``calc`` tool module (``calc.py``) the specs of `calc_spec` import."""

SUMS = """\
name: sums
cases:
- {id: s1, input: "2 and 3", expected: "5"}
- {id: s2, input: "3 and 2", expected: "5"}
"""
"""A dataset of two cases whose answer is 5, for a spec prompted with its ``{input}``."""

EVAL_PROMPT = "add the numbers in {input}"
"""The prompt of a spec an eval runs: each case's ``input`` in it."""


def calc_spec(url: str, prompt: str = "add 2 and 3") -> str:
    """A spec on the server at ``url`` (llama.cpp dialect) allowed ``calc:add``, three steps."""
    return f"""\
prompt: {prompt}
model:
  url: {url}
  dialect: llama.cpp
tools: [calc:add]
policy:
  allow: [add]
max_steps: 3
"""


def calc_project(
    root: Path, url: str, *, prompt: str = "add 2 and 3", dataset: str | None = None
) -> Path:
    """``root`` holding ``calc.py`` and ``spec.yaml`` (`calc_spec`), and ``dataset.yaml`` if given."""
    (root / "calc.py").write_text(CALC)
    (root / "spec.yaml").write_text(calc_spec(url, prompt))
    if dataset is not None:
        (root / "dataset.yaml").write_text(dataset)
    return root


def cli_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any], str]:
    """Run the CLI in this process with --json: exit code, the JSON document, stderr."""
    code = main([*argv, "--json"])
    captured = capsys.readouterr()
    return code, json.loads(captured.out) if captured.out.strip() else {}, captured.err


def _tool(body_text: str) -> str:
    """The tool this conversation is about: offered in the schema, or called earlier."""
    return next(
        (n for n in CALLS if f'"{n}"' in body_text or f'\\"{n}\\"' in body_text),
        "add",
    )


def scripted_chat(request: LoopbackRequest) -> LoopbackResponse:
    """Answer one chat-completions request in structured-action mode."""
    body = request.json_value()
    assert isinstance(body, dict)
    messages = body["messages"]
    assert isinstance(messages, list)
    schema_text = json.dumps(body.get("response_format"))
    tool = _tool(json.dumps(body))
    # Structured-action mode sends tool results back in its own words; an earlier assistant
    # turn is the sign that the tool already ran.
    called = any(isinstance(m, dict) and m.get("role") == "assistant" for m in messages)
    if not called and '"call_tool"' in schema_text:
        action: dict[str, Any] = {"action": "call_tool", "tool": tool, "arguments": CALLS[tool]}
    elif isinstance(FINALS[tool], dict):
        action = {"action": "final", "output": FINALS[tool]}
    elif '"output"' in schema_text:
        # The README's hello world asks for a `Sum` model where the other runs take text.
        action = {"action": "final", "output": {"total": int(FINALS[tool])}}
    else:
        action = {"action": "final", "answer": FINALS[tool]}
    return chat_answer(body, completion({"role": "assistant", "content": json.dumps(action)}))


def completion(
    message: dict[str, Any],
    finish: str = "stop",
    *,
    model: str = "scripted",
    completion_id: str = "chatcmpl-1",
    completion_tokens: int = 5,
) -> dict[str, Any]:
    """A non-streamed chat completion of one choice: ``message``, ended for ``finish``.

    `chat_answer` sends it as the request asks (streamed or not).
    """
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {
            "prompt_tokens": 10,
            "completion_tokens": completion_tokens,
            "total_tokens": 10 + completion_tokens,
        },
    }


def chat_answer(body: dict[str, Any], reply: dict[str, Any]) -> LoopbackResponse:
    """`reply` as the request `body` asks for it: server-sent events if it streams, else JSON.

    `twinflow run` and `demo` stream unless told `--quiet` or `--json`, so every scripted
    OpenAI-compatible server answers both ways, as real ones do.
    """
    if body.get("stream"):
        return LoopbackResponse(
            headers=(("Content-Type", "text/event-stream"),),
            stream=lambda: sse_events(reply),
        )
    return LoopbackResponse.json_body(reply)


def sse_events(reply: dict[str, Any]) -> Iterator[bytes]:
    """A non-streamed chat completion as the server-sent events that stream it."""

    def event(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> bytes:
        chunk = {
            "model": reply["model"],
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            **extra,
        }
        return f"data: {json.dumps(chunk)}\n\n".encode()

    choice = reply["choices"][0]
    content = choice["message"].get("content") or ""
    for start in range(0, len(content), 3):
        yield event({"content": content[start : start + 3]})
    for index, call in enumerate(choice["message"].get("tool_calls") or []):
        yield event(
            {
                "tool_calls": [
                    {
                        "index": index,
                        "id": call["id"],
                        "function": {"name": call["function"]["name"], "arguments": ""},
                    }
                ]
            }
        )
        yield event(
            {
                "tool_calls": [
                    {"index": index, "function": {"arguments": call["function"]["arguments"]}}
                ]
            }
        )
    yield event({}, choice["finish_reason"])
    yield f"data: {json.dumps({'choices': [], 'usage': reply['usage']})}\n\n".encode()
    yield b"data: [DONE]\n\n"


def run_trace(replies: int = 1) -> bytes:
    """A real, complete trace written by the agent (one run per reply; a longer one for more)."""
    sink = MemoryTraceSink()
    agent = Agent(
        FunctionModel(lambda request: Message.assistant("hi")),
        clock=SteppingClock(datetime(2026, 1, 1, tzinfo=UTC)),
        ids=CountingIds(),
        trace=sink,
    )
    for _ in range(replies):
        agent.run("hello")
    return bytes(sink.data)


GOPATH = "/usr/share/gocode"
GO_INSTALL = "apt-get install -y golang-go golang-golang-x-mod-dev"


def build_go_tool(name: str, out: Path) -> Path:
    """Build ``tests/go/NAME`` (a reference driver over golang.org/x/mod) offline, GOPATH mode.

    Without Go the interoperability tests fail and say how to install it: interoperability is a
    promise, not an optional extra (.ci/run installs both Debian packages where they are missing).
    """
    go = shutil.which("go")
    if go is None:
        pytest.fail(f"the Go interoperability test needs Go and golang.org/x/mod: {GO_INSTALL}")
    if not (Path(GOPATH) / "src/golang.org/x/mod/sumdb/note").is_dir():
        pytest.fail(f"golang.org/x/mod is not under {GOPATH}: {GO_INSTALL}")
    binary = out / name
    result = run_process(
        [go, "build", "-o", str(binary), "."],
        cwd=Path(__file__).parent / "go" / name,
        env={
            "GO111MODULE": "off",
            "GOPATH": GOPATH,
            "GOCACHE": str(out / "cache"),
            "GOFLAGS": "",
            "CGO_ENABLED": "0",
        },
        timeout=600,
    )
    assert 0 == result.returncode, result.stderr
    return binary


def trace_only_venv(tmp: Path) -> Path:
    """A fresh venv holding the twinflow-trace wheel and nothing else (the auditor's install).

    Returns:
        The venv's ``bin`` directory (its ``python`` and the ``twinflow-trace`` script).
    """
    uv = os.environ.get("UV") or shutil.which("uv")  # .ci/run exports $UV when it installed uv
    assert uv, "uv is needed to build the wheel (it is on PATH wherever scripts/check runs)"
    root = Path(__file__).resolve().parents[3]
    dist = tmp / "dist"
    build = run_process(
        [uv, "build", "--wheel", "--package", "twinflow-trace", "--out-dir", str(dist)],
        cwd=root,
        timeout=300,
    )
    assert 0 == build.returncode, build.stderr
    wheel = next(dist.glob("twinflow_trace-*.whl"))
    venv = tmp / "venv"
    made = run_process([sys.executable, "-m", "venv", "--without-pip", str(venv)], timeout=300)
    assert 0 == made.returncode, made.stderr
    python = venv / "bin" / "python"
    install = run_process(
        [uv, "pip", "install", "--offline", "--no-index", "--python", str(python), str(wheel)],
        cwd=tmp,
        timeout=300,
    )
    assert 0 == install.returncode, install.stderr
    freeze = run_process([uv, "pip", "freeze", "--python", str(python)], cwd=tmp, timeout=300)
    installed = [line.split("==")[0].split(" @ ")[0] for line in freeze.stdout.splitlines()]
    assert ["twinflow-trace"] == installed
    return venv / "bin"


def page_dom(page: Path, profile: Path) -> str:
    """The DOM of ``page`` after its scripts ran in headless Chromium (which `.ci/run`
    installs; its absence fails the test)."""
    import shutil

    from twinflow.kernel._process import run_process

    browser = next(
        (p for n in ("chromium", "chromium-browser", "google-chrome") if (p := shutil.which(n))),
        None,
    )
    if browser is None:
        pytest.fail("chromium is not installed: `apt-get install -y chromium` (.ci/run does this)")
    flags = (
        "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run",
        "--virtual-time-budget=20000",
    )  # fmt: skip
    done = run_process(
        [browser, *flags, f"--user-data-dir={profile}", "--dump-dom", page.as_uri()],
        timeout=120,
    )
    assert 0 == done.returncode, done.stderr
    return done.stdout


def leaf_prove_check(chain: str, key: str, cwd: Path) -> ProcessResult:
    """``python -P -m twinflow.trace prove-check CHAIN --key KEY`` in a fresh interpreter (the
    stdlib leaf an auditor runs), in ``cwd``: its exit code, stdout and stderr."""
    return run_process(
        [sys.executable, "-P", "-m", "twinflow.trace", "prove-check", chain, "--key", key],
        cwd=cwd,
        env={"PYTHONDONTWRITEBYTECODE": "1"},
        timeout=300,
    )
