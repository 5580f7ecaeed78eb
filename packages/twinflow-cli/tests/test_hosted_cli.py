"""`twinflow run` against a hosted API: `kind: anthropic` end to end, through the command.

A loopback server plays Anthropic's published streamed exchange (the tool-use stream, then the
basic text stream once the tool result comes back: message_start, content_block_start / delta /
stop, message_delta, message_stop) and refuses any request without `x-api-key: KEY` and
`anthropic-version`. The key comes from the variable `api_key_env` names; the command's output
and every file of the run directory are searched for it.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from twinflow._base._untrusted import REDACTED
from twinflow.kernel import LoopbackServer
from twinflow.kernel._loopback import LoopbackRequest, LoopbackResponse
from twinflow.kernel._process import ProcessResult, run_process
from twinflow.models._anthropic import ANTHROPIC_VERSION

STREAMS = Path(__file__).resolve().parents[2] / "twinflow-models" / "tests" / "fixtures" / "streams"
KEY = "sk-ant-cli-test-0123456789"
KEY_ENV = "TWINFLOW_TEST_ANTHROPIC_KEY"

WEATHER = '''
def get_weather(location: str, unit: str) -> str:
    """Get the current weather in a given location."""
    return f"15 degrees {unit} in {location}"
'''

SPEC = f"""\
prompt: What is the weather like in San Francisco?
system: You are a weather bot.
model:
  kind: anthropic
  url: {{url}}
  name: claude-opus-4-20250514
  max_tokens: 1024
  api_key_env: {KEY_ENV}
  headers:
    anthropic-beta: twinflow-test
tools: [weather:get_weather]
policy:
  allow: [get_weather]
max_steps: 3
"""

# The published streams' answers, non-streamed (what `stream: false` returns for them); the
# Anthropic client's tests hold that each stream assembles to exactly its plain answer.
PLAIN: dict[str, Any] = json.loads((STREAMS / "anthropic_docs_plain.json").read_text())


class Messages:
    """Anthropic's Messages API on loopback, playing the published exchange.

    A request without the tool's result gets the tool-use example; one carrying it gets the
    basic text example. Streamed requests get the event stream cut into 5-byte pieces.
    """

    def __init__(self, *, echo_key: bool = False) -> None:
        self.echo_key = echo_key
        self.requests: list[tuple[dict[str, str], Any]] = []
        self.server = LoopbackServer(self.answer)

    def answer(self, request: LoopbackRequest) -> LoopbackResponse:
        headers = {name.lower(): value for name, value in request.headers}
        body = request.json_value()
        self.requests.append((headers, body))
        if self.echo_key:
            # A hostile or careless server quoting the credential back in its error.
            message = f"invalid x-api-key: {headers.get('x-api-key')}"
            error = {"type": "error", "error": {"type": "authentication_error", "message": message}}
            return LoopbackResponse.json_body(error, status=401)
        if headers.get("x-api-key") != KEY or headers.get("anthropic-version") != ANTHROPIC_VERSION:
            error = {"type": "error", "error": {"type": "authentication_error", "message": "no"}}
            return LoopbackResponse.json_body(error, status=401)
        assert "/v1/messages" == request.path
        assert isinstance(body, dict)
        answered = any(
            isinstance(block, dict) and block.get("type") == "tool_result"
            for message in body["messages"]
            if isinstance(message["content"], list)
            for block in message["content"]
        )
        name = "anthropic_docs_messages.sse" if answered else "anthropic_docs_tool_use.sse"
        if not body.get("stream"):
            return LoopbackResponse.json_body(PLAIN[name])
        data = (STREAMS / name).read_bytes()
        return LoopbackResponse(
            headers=(("Content-Type", "text/event-stream"),),
            stream=lambda: (data[i : i + 5] for i in range(0, len(data), 5)),
        )


def twinflow(*args: str, cwd: Path, key: bool = True) -> ProcessResult:
    """Run `python -m twinflow.cli ARGS`, the key in the environment unless `key` is False."""
    return run_process(
        [sys.executable, "-m", "twinflow.cli", *args],
        cwd=cwd,
        env={"PYTHONDONTWRITEBYTECODE": "1", **({KEY_ENV: KEY} if key else {})},
        timeout=300,
    )


def files_holding_the_key(directory: Path) -> list[str]:
    """Every file under `directory` whose bytes contain the key."""
    return [str(p) for p in directory.rglob("*") if p.is_file() and KEY.encode() in p.read_bytes()]


@pytest.fixture
def project(tmp_path: Path) -> Iterator[tuple[Path, Messages]]:
    """A directory with the weather tool and a spec pointing at a running Messages server."""
    api = Messages()
    with api.server:
        (tmp_path / "weather.py").write_text(WEATHER)
        (tmp_path / "spec.yaml").write_text(SPEC.format(url=api.server.url))
        yield tmp_path, api


def test_a_streamed_anthropic_run_calls_the_tool_answers_and_never_writes_the_key(
    project: tuple[Path, Messages],
) -> None:
    """Streamed by default: the tool runs, the text prints as it streams, the key goes nowhere."""
    tmp_path, api = project
    result = twinflow("run", "spec.yaml", "--out", "out", cwd=tmp_path)
    assert 0 == result.returncode, result.stderr
    assert "Okay, let's check the weather for San Francisco, CA:" in result.stdout
    assert "  answer    Hello!" in result.stdout
    assert "1 call(s): get_weather" in result.stdout
    assert 2 == len(api.requests)
    for headers, body in api.requests:
        sent = (headers.get("x-api-key"), headers.get("authorization"), body["stream"])
        assert (KEY, None, True) == sent
        assert (ANTHROPIC_VERSION, "twinflow-test") == (
            headers["anthropic-version"],
            headers["anthropic-beta"],
        )
        assert KEY not in json.dumps(body)
    tool_result = api.requests[1][1]["messages"][-1]["content"][0]
    assert ("toolu_01T1x1fJ34qAmk2tNTrN7Up6", "tool_result") == (
        tool_result["tool_use_id"],
        tool_result["type"],
    )
    assert ([], False) == (files_holding_the_key(tmp_path), KEY in result.stdout + result.stderr)
    verified = twinflow("verify", "out/trace.jsonl", cwd=tmp_path, key=False)
    assert 0 == verified.returncode, verified.stderr
    # Replay needs no key: it rebuilds the agent and serves the recorded replies.
    replayed = twinflow("replay", "out/trace.jsonl", "--spec", "spec.yaml", cwd=tmp_path, key=False)
    assert 0 == replayed.returncode, replayed.stderr


def test_a_plain_anthropic_run_writes_no_key_either(project: tuple[Path, Messages]) -> None:
    """--json asks without streaming: the same answer, and the key in no output or file."""
    tmp_path, api = project
    result = twinflow("run", "spec.yaml", "--out", "out", "--json", cwd=tmp_path)
    assert 0 == result.returncode, result.stderr
    outcome = json.loads(result.stdout)
    assert ("Hello!", ["get_weather"]) == (outcome["output"], outcome["tool_calls"])
    assert [False, False] == [body.get("stream", False) for _, body in api.requests]
    assert ([], False) == (files_holding_the_key(tmp_path), KEY in result.stdout + result.stderr)


def test_a_server_echoing_the_key_in_its_error_gets_it_scrubbed(tmp_path: Path) -> None:
    """A 401 quoting x-api-key: the run fails, its message, output and trace show the redaction marker instead."""
    api = Messages(echo_key=True)
    with api.server:
        (tmp_path / "weather.py").write_text(WEATHER)
        (tmp_path / "spec.yaml").write_text(SPEC.format(url=api.server.url))
        result = twinflow("run", "spec.yaml", "--out", "out", cwd=tmp_path)
    assert 0 != result.returncode
    assert KEY == api.requests[0][0]["x-api-key"]
    assert REDACTED in result.stdout + result.stderr
    assert ([], False) == (files_holding_the_key(tmp_path), KEY in result.stdout + result.stderr)


def test_an_unset_key_variable_is_refused_before_any_request_or_file(
    project: tuple[Path, Messages],
) -> None:
    """api_key_env naming an unset variable: exit 2 naming it, no request, no run directory."""
    tmp_path, api = project
    result = twinflow("run", "spec.yaml", "--out", "out", cwd=tmp_path, key=False)
    assert (2, True) == (result.returncode, KEY_ENV in result.stderr)
    assert ([], False) == (api.requests, (tmp_path / "out").exists())


@pytest.mark.parametrize(
    ("model", "words"),
    [
        ("  mode: structured-action\n", "mode native only"),
        ("  headers:\n    x-api-key: sk-in-the-spec\n", "api_key_env"),
        ("  headers:\n    Authorization: Bearer sk-in-the-spec\n", "api_key_env"),
        ("  headers:\n    X-Auth-Token: sk-in-the-spec\n", "api_key_env"),
        ("  headers:\n    Ocp-Apim-Subscription-Key: sk-in-the-spec\n", "api_key_env"),
        ("  headers:\n    X-Gateway-Secret: sk-in-the-spec\n", "api_key_env"),
        ("  headers:\n    anthropic-beta: ok\n    x-custom: sk-in-the-spec\n", "api_key_env"),
    ],
)
def test_an_anthropic_spec_that_cannot_work_is_refused(
    tmp_path: Path, model: str, words: str
) -> None:
    """Structured-action mode, or a header not known to be harmless: exit 2, the reason, no file."""
    spec = SPEC.format(url="http://127.0.0.1:9").replace(
        f"  api_key_env: {KEY_ENV}\n  headers:\n    anthropic-beta: twinflow-test\n", model
    )
    (tmp_path / "spec.yaml").write_text(spec)
    result = twinflow("run", "spec.yaml", "--out", "out", cwd=tmp_path)
    assert (2, True) == (result.returncode, words in result.stderr), result.stderr
    assert ("sk-in-the-spec" in result.stderr, (tmp_path / "out").exists()) == (False, False)
