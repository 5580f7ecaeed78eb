"""Model strings in a spec (`model: openai:gpt-4o-mini`) and `twinflow models`, through the command.

A scripted loopback server plays each provider; the key comes from the provider row's variable
and every file the run writes is searched for it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from cli_testkit import CALC, chat_answer, completion, scripted_chat

from twinflow.kernel import LoopbackServer
from twinflow.kernel._loopback import LoopbackRequest, LoopbackResponse
from twinflow.kernel._process import ProcessResult, run_process

KEY = "sk-model-string-test-0123456789"

SPEC = """\
prompt: add 2 and 3
model: {model}
tools: [calc:add]
policy:
  allow: [add]
max_steps: 3
"""


def twinflow(*args: str, cwd: Path, env: dict[str, str] | None = None) -> ProcessResult:
    """Run `python -m twinflow.cli ARGS` with only `env` added to a clean environment."""
    return run_process(
        [sys.executable, "-m", "twinflow.cli", *args],
        cwd=cwd,
        env={"PYTHONDONTWRITEBYTECODE": "1", **(env or {})},
        timeout=300,
    )


def project(root: Path, model: str) -> Path:
    """`root` holding calc.py and a spec naming `model` by its string."""
    (root / "calc.py").write_text(CALC)
    (root / "spec.yaml").write_text(SPEC.format(model=model))
    return root


class Recorder:
    """Answers as `answer` does and keeps each request's headers and body."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.seen: list[tuple[dict[str, str], Any]] = []

    def __call__(self, request: LoopbackRequest) -> LoopbackResponse:
        self.seen.append(({k.lower(): v for k, v in request.headers}, request.json_value()))
        return self.answer(request)


def native_five(request: LoopbackRequest) -> LoopbackResponse:
    """A native-mode OpenAI server answering "5" at once."""
    body = request.json_value()
    assert isinstance(body, dict)
    return chat_answer(body, completion({"role": "assistant", "content": "5"}))


def files_holding(directory: Path, secret: str) -> list[str]:
    """Every file under `directory` whose bytes contain `secret`."""
    return [
        str(p) for p in directory.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()
    ]


def test_an_openai_string_sends_the_row_key_and_writes_it_nowhere(tmp_path: Path) -> None:
    """openai:gpt-4o-mini@URL: native mode, Bearer key from OPENAI_API_KEY, no file holds it."""
    server = Recorder(native_five)
    with LoopbackServer(server) as loop:
        project(tmp_path, f"openai:gpt-4o-mini@{loop.url}")
        result = twinflow(
            "run", "spec.yaml", "--out", "out", cwd=tmp_path, env={"OPENAI_API_KEY": KEY}
        )
    assert 0 == result.returncode, result.stderr
    headers, body = server.seen[0]
    assert (f"Bearer {KEY}", "gpt-4o-mini", "tools" in body) == (
        headers["authorization"],
        body["model"],
        True,
    )
    assert ([], False) == (files_holding(tmp_path, KEY), KEY in result.stdout + result.stderr)
    replayed = twinflow("replay", "out/trace.jsonl", "--spec", "spec.yaml", cwd=tmp_path)
    assert 0 == replayed.returncode, replayed.stderr


def test_a_vllm_string_runs_structured_action_mode_on_its_url(tmp_path: Path) -> None:
    """vllm:NAME@URL: the tool runs in structured-action mode, the vllm dialect's schema sent."""
    server = Recorder(scripted_chat)
    with LoopbackServer(server) as loop:
        project(tmp_path, f"vllm:qwen@{loop.url}")
        result = twinflow("run", "spec.yaml", "--out", "out", "--json", cwd=tmp_path)
    assert 0 == result.returncode, result.stderr
    outcome = json.loads(result.stdout)
    _, body = server.seen[0]
    assert ("5", ["add"], "qwen", "json_schema") == (
        outcome["output"],
        outcome["tool_calls"],
        body["model"],
        body["response_format"]["type"],
    )


@pytest.mark.parametrize(
    ("model", "words"),
    [
        ("openai:gpt-4o-mini", "OPENAI_API_KEY"),
        ("anthropic:claude-sonnet-4-5", "ANTHROPIC_API_KEY"),
        ("gemini:gemini-2.5-flash", "GEMINI_API_KEY"),
        ("opnai:gpt-4o-mini", "did you mean 'openai'"),
        ("nosuch:model", "unknown provider 'nosuch'"),
        ("'openai:'", "expected 'embedded'"),
        ("vllm:qwen", "vllm has no default URL"),
        ("'vllm:qwen@ftp://host'", "after @ comes the server's http(s) URL"),
        ("gpt-4o-mini", "expected 'embedded'"),
    ],
)
def test_a_bad_model_string_is_one_line_before_any_file(
    tmp_path: Path, model: str, words: str
) -> None:
    """Unset key variable, unknown provider (did-you-mean), malformed string: exit 2, one line."""
    project(tmp_path, model)
    result = twinflow("run", "spec.yaml", "--out", "out", cwd=tmp_path)
    assert (2, True, 1, False) == (
        result.returncode,
        words in result.stderr,
        len(result.stderr.strip().splitlines()),
        (tmp_path / "out").exists(),
    ), result.stderr


def test_twinflow_models_lists_every_provider_and_what_it_supports(tmp_path: Path) -> None:
    """--json: one row per provider with its wire, key variable and capabilities."""
    result = twinflow("models", "--json", cwd=tmp_path)
    assert 0 == result.returncode, result.stderr
    rows = {row["provider"]: row for row in json.loads(result.stdout)["providers"]}
    assert {"openai", "anthropic", "gemini", "ollama", "vllm", "llama.cpp", "lmstudio"} == set(rows)
    assert ("ANTHROPIC_API_KEY", "anthropic", True, True) == (
        rows["anthropic"]["key_env"],
        rows["anthropic"]["wire"],
        rows["anthropic"]["native_tools"],
        rows["anthropic"]["streaming"],
    )


def test_twinflow_models_prints_a_line_per_provider(tmp_path: Path) -> None:
    """Without --json: each provider's example string is on its own line."""
    result = twinflow("models", cwd=tmp_path)
    assert 0 == result.returncode, result.stderr
    assert "model: ollama:MODEL" in result.stdout
    assert "model: vllm:MODEL@http://127.0.0.1:8000" in result.stdout


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("ollama:qwen2.5:0.5b", ("ollama", "http://127.0.0.1:11434", "qwen2.5:0.5b", "structured-action", None)),
        ("openai:gpt-4o-mini", ("openai-compatible", "https://api.openai.com", "gpt-4o-mini", "native", "OPENAI_API_KEY")),
        ("anthropic:claude-x", ("anthropic", "https://api.anthropic.com", "claude-x", "native", "ANTHROPIC_API_KEY")),
        ("vllm:m@http://h:8000", ("openai-compatible", "http://h:8000", "m", "structured-action", None)),
        ("gemini:g", ("gemini", "https://generativelanguage.googleapis.com", "g", "native", "GEMINI_API_KEY")),
        ("embedded", ("openai-compatible", "embedded", "local", "structured-action", None)),
    ],
)  # fmt: skip
def test_a_model_string_in_python_is_the_long_form(model: str, expected: tuple[Any, ...]) -> None:
    """RunSpec(model="PROVIDER:MODEL") reads the provider row into the long form's keys."""
    from twinflow.agent import RunSpec

    spec = RunSpec(prompt="p", model=model).model  # type: ignore[arg-type]  # a string, as YAML gives
    assert expected == (spec.kind, spec.url, spec.name, spec.mode, spec.api_key_env)


STREAMS = Path(__file__).resolve().parents[2] / "twinflow-models" / "tests" / "fixtures" / "streams"
GEMINI_PLAIN: dict[str, Any] = json.loads((STREAMS / "gemini_plain.json").read_text())


def gemini(request: LoopbackRequest) -> LoopbackResponse:
    """generateContent on loopback: a call to `add`, then the answer once its result is back."""
    body = request.json_value()
    assert isinstance(body, dict)
    answered = any("functionResponse" in p for c in body["contents"] for p in c["parts"])
    name = "gemini_text.sse" if answered else "gemini_function_call.sse"
    if "streamGenerateContent" not in request.path:
        return LoopbackResponse.json_body(GEMINI_PLAIN[name])
    data = (STREAMS / name).read_bytes()
    return LoopbackResponse(
        headers=(("Content-Type", "text/event-stream"),), stream=lambda: iter([data])
    )


@pytest.mark.parametrize("quiet", [[], ["--json"]])
def test_a_gemini_string_runs_the_tool_and_replays(tmp_path: Path, quiet: list[str]) -> None:
    """gemini:MODEL@URL, streamed or not: the call runs, the key goes in x-goog-api-key only, replay matches."""
    server = Recorder(gemini)
    with LoopbackServer(server) as loop:
        project(tmp_path, f"gemini:gemini-2.5-flash@{loop.url}")
        result = twinflow(
            "run", "spec.yaml", "--out", "out", *quiet, cwd=tmp_path, env={"GEMINI_API_KEY": KEY}
        )
    assert 0 == result.returncode, result.stderr
    assert "The sum of 2 and 3 is 5." in result.stdout
    assert [KEY, KEY] == [headers["x-goog-api-key"] for headers, _ in server.seen]
    assert ([], False) == (files_holding(tmp_path, KEY), KEY in result.stdout + result.stderr)
    replayed = twinflow("replay", "out/trace.jsonl", "--spec", "spec.yaml", cwd=tmp_path)
    assert 0 == replayed.returncode, replayed.stderr


@pytest.mark.parametrize(
    ("kind", "mode"),
    [("gemini", "native"), ("anthropic", "native"), ("ollama", "structured-action"), ("openai-compatible", "structured-action")],
)  # fmt: skip
def test_the_long_form_takes_its_wire_s_default_mode(kind: str, mode: str) -> None:
    """`kind` without `mode`: the wire's client's default (native for Gemini and Anthropic)."""
    from twinflow.agent import ModelSpec

    assert mode == ModelSpec(kind=kind, url="http://127.0.0.1:9").mode  # type: ignore[arg-type]  # each kind, looped
