"""Fallback models through `twinflow run`: two scripted loopback servers, the first failing.

The switch is a `model_fell_back` event, `model_responded` names the model that answered, and
`twinflow replay` reproduces both from the trace without asking either server.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from cli_testkit import CALC, scripted_chat

from twinflow.kernel import LoopbackServer
from twinflow.kernel._loopback import LoopbackRequest, LoopbackResponse
from twinflow.kernel._process import ProcessResult, run_process

SPEC = """\
prompt: add 2 and 3
model: {model}
tools: [calc:add]
policy:
  allow: [add]
max_steps: 3
"""


def twinflow(*args: str, cwd: Path) -> ProcessResult:
    """Run `python -m twinflow.cli ARGS` in `cwd`."""
    return run_process(
        [sys.executable, "-m", "twinflow.cli", *args],
        cwd=cwd,
        env={"PYTHONDONTWRITEBYTECODE": "1"},
        timeout=300,
    )


class Failing:
    """A server answering every request with `status` and `body`, counting them."""

    def __init__(self, status: int, body: Any) -> None:
        self.status, self.body, self.count = status, body, 0

    def __call__(self, request: LoopbackRequest) -> LoopbackResponse:
        self.count += 1
        return LoopbackResponse.json_body(self.body, status=self.status)


class Counting:
    """`scripted_chat`, counting the requests."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, request: LoopbackRequest) -> LoopbackResponse:
        self.count += 1
        return scripted_chat(request)


def bodies(trace: Path) -> list[dict[str, Any]]:
    """Each event's body, in order."""
    return [json.loads(line)["event"]["body"] for line in trace.read_text().splitlines()]


def run_pair(tmp_path: Path, first: Failing, model: str) -> tuple[ProcessResult, Counting]:
    """Run a spec whose `model` names `{first}` and `{second}` servers; the second answers."""
    second = Counting()
    with LoopbackServer(first) as one, LoopbackServer(second) as two:
        (tmp_path / "calc.py").write_text(CALC)
        spec = SPEC.format(model=model.format(first=one.url, second=two.url))
        (tmp_path / "spec.yaml").write_text(spec)
        result = twinflow("run", "spec.yaml", "--out", "out", "--json", cwd=tmp_path)
    return result, second


def test_a_busy_first_model_falls_back_and_replay_reproduces_it(tmp_path: Path) -> None:
    """503 from the first: each step is answered by the second, each switch an event; replay matches."""
    first = Failing(503, {"error": {"message": "overloaded"}})
    result, second = run_pair(tmp_path, first, "[vllm:a@{first}, vllm:b@{second}]")
    assert 0 == result.returncode, result.stderr
    assert ("5", 2) == (json.loads(result.stdout)["output"], second.count)
    events = bodies(tmp_path / "out" / "trace.jsonl")
    switches = [e for e in events if e["kind"] == "model_fell_back"]
    answered = {e["answered_by"] for e in events if e["kind"] == "model_responded"}
    assert (2, {"overloaded"}, {1, 2}) == (
        len(switches),
        {e["failure"] for e in switches},
        {e["step"] for e in switches},
    )
    assert (
        switches[0]["model"].startswith("openai-compatible:a@"),
        "503" in switches[0]["error"],
    ) == (True, True)
    assert {switches[0]["next"]} == answered
    assert first.count >= 2
    replayed = twinflow("replay", "out/trace.jsonl", "--spec", "spec.yaml", cwd=tmp_path)
    assert 0 == replayed.returncode, replayed.stderr
    shown = twinflow("show", "out/trace.jsonl", cwd=tmp_path)
    assert (2, 2) == (
        shown.stdout.count(" overloaded, asking openai-compatible:b@"),
        shown.stdout.count("<- model reply from openai-compatible:b@"),
    ), shown.stdout


def test_a_listed_class_only_moves_on(tmp_path: Path) -> None:
    """fallback_on: [malformed]: a 2xx body that is no completion moves on to the second model."""
    first = Failing(200, {"not": "a completion"})
    model = "\n  url: {first}\n  dialect: llama.cpp\n  fallbacks: [vllm:b@{second}]\n  fallback_on: [malformed]"
    result, second = run_pair(tmp_path, first, model)
    assert 0 == result.returncode, result.stderr
    kinds = [
        e["failure"]
        for e in bodies(tmp_path / "out" / "trace.jsonl")
        if e["kind"] == "model_fell_back"
    ]
    assert (["malformed", "malformed"], 2) == (kinds, second.count)


@pytest.mark.parametrize(
    ("status", "model"),
    [
        (401, "[vllm:a@{first}, vllm:b@{second}]"),
        (200, "[vllm:a@{first}, vllm:b@{second}]"),
    ],
)
def test_a_failure_not_listed_ends_the_run_without_asking_the_next(
    tmp_path: Path, status: int, model: str
) -> None:
    """A 401, or a malformed body under the default classes: no fallback, the run fails, one line."""
    first = Failing(status, {"error": {"message": "no"}} if status != 200 else {"not": "it"})
    result, second = run_pair(tmp_path, first, model)
    assert (True, 0) == (result.returncode != 0, second.count)
    assert [] == [
        e for e in bodies(tmp_path / "out" / "trace.jsonl") if e["kind"] == "model_fell_back"
    ]


@pytest.mark.parametrize(
    ("model", "words"),
    [
        ("[]", "at least one model"),
        ("[vllm:a@http://127.0.0.1:9, embedded]", "not `embedded`"),
        (
            "\n  url: http://127.0.0.1:9\n  fallbacks: [vllm:b@http://127.0.0.1:9]\n  fallback_on: [busy]",
            "fallback_on",
        ),
        ("[vllm:a@http://127.0.0.1:9, nosuch:b]", "unknown provider"),
    ],
)
def test_a_bad_fallback_list_is_refused_before_any_file(
    tmp_path: Path, model: str, words: str
) -> None:
    """Empty list, embedded fallback, unknown failure class or provider: exit 2, one line, no file."""
    (tmp_path / "calc.py").write_text(CALC)
    (tmp_path / "spec.yaml").write_text(SPEC.format(model=model))
    result = twinflow("run", "spec.yaml", "--out", "out", cwd=tmp_path)
    assert (2, True, 1, False) == (
        result.returncode,
        words in result.stderr,
        len(result.stderr.strip().splitlines()),
        (tmp_path / "out").exists(),
    ), result.stderr


def test_an_agent_given_a_list_falls_back_and_its_replay_matches(tmp_path: Path) -> None:
    """Agent([...]) in Python: the switch is in the trace, and agent.replay reproduces it."""
    from twinflow.agent import Agent, Policy

    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    first, second = Failing(429, {"error": "slow down"}), Counting()
    with LoopbackServer(first) as one, LoopbackServer(second) as two:
        names = [f"vllm:a@{one.url}", f"vllm:b@{two.url}"]
        with Agent(
            names, tools=[add], policy=Policy(allow=["add"]), trace=tmp_path / "t.jsonl"
        ) as agent:
            result = agent.run("add 2 and 3")
            replayed = agent.replay(result.trace_path)
    events = bodies(Path(result.trace_path))
    assert ("5", ["rate_limited", "rate_limited"]) == (
        result.output,
        [e["failure"] for e in events if e["kind"] == "model_fell_back"],
    )
    assert {f"vllm:b@{two.url}"} == {
        e["answered_by"] for e in events if e["kind"] == "model_responded"
    }
    assert replayed.root == agent.writer.checkpoint().root
