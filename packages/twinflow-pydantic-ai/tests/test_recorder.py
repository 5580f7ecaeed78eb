"""A pydantic-ai run with a tool, recorded against a scripted server, verified and replayed."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent, ModelSettings
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from twinflow.kernel import LoopbackResponse, LoopbackServer, ReplayDivergenceError
from twinflow.kernel._loopback import LoopbackRequest
from twinflow.kernel._process import ProcessResult, run_process
from twinflow.pydantic_ai import RecordingModel, ReplayModel
from twinflow.trace import TraceCorruptError, verify_trace
from twinflow.vocab import PartNotCarriedError


def _completion(message: dict[str, Any], finish: str) -> LoopbackResponse:
    return LoopbackResponse.json_body(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1_700_000_000,
            "model": "scripted",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
        }
    )


def scripted(request: LoopbackRequest) -> LoopbackResponse:
    """Asks for add(2, 3) first; once the result is in the conversation, says it."""
    body = request.json_value()
    assert isinstance(body, dict)
    results = [m for m in body["messages"] if isinstance(m, dict) and m.get("role") == "tool"]
    if not results:
        call = {
            "id": "call_1",
            "type": "function",
            "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'},
        }
        return _completion(
            {"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls"
        )
    return _completion(
        {"role": "assistant", "content": f"The sum is {results[0]['content']}."}, "stop"
    )


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def subtract(a: int, b: int) -> int:
    """Subtract b from a (a tool the recording did not have)."""
    return a - b


def _model(server: LoopbackServer) -> OpenAIChatModel:
    return OpenAIChatModel(
        "scripted", provider=OpenAIProvider(base_url=server.url_for("/v1"), api_key="k")
    )


def _run(agent: Agent[None, str], prompt: str) -> str:
    """Run ``agent`` in a block that closes its model's HTTP client when the run ends."""

    async def run() -> str:
        async with agent:
            return (await agent.run(prompt)).output

    return asyncio.run(run())


def _record(path: Path) -> str:
    with LoopbackServer(scripted) as server, RecordingModel(_model(server), path) as model:
        return _run(Agent(model, tools=[add]), "What is 2 + 3?")


def twinflow(*args: str) -> ProcessResult:
    """A real command of the workspace, by module."""
    return run_process([sys.executable, "-m", *args], timeout=300)


def _kinds(path: Path) -> list[str]:
    return [json.loads(line)["event"]["body"]["kind"] for line in path.read_bytes().splitlines()]


def test_a_recorded_run_holds_the_agent_events_of_its_requests_and_tool(tmp_path: Path) -> None:
    """The trace names the run's request, tool call and result, response and end, in order."""
    path = tmp_path / "run.jsonl"
    assert "The sum is 5." == _record(path)
    expected = [
        "run_started",
        "model_requested",
        "model_responded",
        "tool_called",
        "tool_returned",
        "model_requested",
        "model_responded",
        "run_finished",
    ]
    assert expected == _kinds(path)


def test_a_recording_verifies_with_the_stdlib_leaf_and_the_command(tmp_path: Path) -> None:
    """twinflow-trace verify, twinflow verify and twinflow show all accept the recording."""
    path = tmp_path / "run.jsonl"
    _record(path)
    assert verify_trace(path).ok
    for command in (
        ("twinflow.trace", "verify", str(path)),
        ("twinflow.cli", "verify", str(path)),
        ("twinflow.cli", "show", str(path)),
    ):
        result = twinflow(*command)
        assert (0, "") == (result.returncode, result.stderr if result.returncode else ""), command
    shown = twinflow("twinflow.cli", "show", str(path)).stdout
    assert "tool add" in shown and "The sum is 5." in shown


def test_a_recording_proves_an_event_included(tmp_path: Path) -> None:
    """twinflow prove makes an inclusion proof of the tool result; twinflow-trace checks it."""
    path = tmp_path / "run.jsonl"
    _record(path)
    proof, event, key = tmp_path / "p.tlog-proof", tmp_path / "event.json", tmp_path / "lab"
    made = twinflow("twinflow.cli", "keygen", "example.org/lab", "--out", str(key))
    assert 0 == made.returncode, made.stderr
    made = twinflow(
        "twinflow.cli", "prove", str(path), "--seq", "4", "--sign", f"{key}.key",
        "--out", str(proof), "--event-out", str(event),
    )  # fmt: skip
    assert 0 == made.returncode, made.stderr
    checked = twinflow(
        "twinflow.trace", "prove-check", str(proof), "--event", str(event), "--key", f"{key}.pub"
    )
    assert 0 == checked.returncode, checked.stderr
    assert b'"kind":"tool_returned"' in event.read_bytes()


def test_the_same_agent_replays_the_recording_with_no_server(tmp_path: Path) -> None:
    """The replay model serves the recorded responses: same output, every event matched."""
    path = tmp_path / "run.jsonl"
    _record(path)
    replay = ReplayModel(path)
    assert "The sum is 5." == _run(Agent(replay, tools=[add]), "What is 2 + 3?")
    assert len(_kinds(path)) - 1 == replay.served


@pytest.mark.parametrize(
    ("prompt", "tools", "settings", "seq"),
    [
        ("What is 2 + 4?", [add], None, 0),
        ("What is 2 + 3?", [add, subtract], None, 0),
        ("What is 2 + 3?", [add], ModelSettings(temperature=0.5), 0),
    ],
)
def test_a_replay_that_asks_otherwise_fails_at_the_first_event_that_differs(
    tmp_path: Path, prompt: str, tools: list[Any], settings: ModelSettings | None, seq: int
) -> None:
    """Another prompt, another tool list or other settings: diverged at run_started, named."""
    path = tmp_path / "run.jsonl"
    _record(path)
    with pytest.raises(ReplayDivergenceError) as raised:
        _run(Agent(ReplayModel(path), tools=tools, model_settings=settings), prompt)
    assert seq == raised.value.seq


def test_a_tool_that_returns_otherwise_diverges_at_its_result(tmp_path: Path) -> None:
    """A tool whose code changed fails the replay at the recorded tool_returned (seq 4)."""
    path = tmp_path / "run.jsonl"
    _record(path)

    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b + 1  # the code changed; its description did not

    with pytest.raises(ReplayDivergenceError) as raised:
        _run(Agent(ReplayModel(path), tools=[add]), "What is 2 + 3?")
    assert 4 == raised.value.seq
    assert "/result/content" in str(raised.value)


def test_a_feature_the_trace_cannot_carry_is_refused_by_name(tmp_path: Path) -> None:
    """A model setting without a twinflow counterpart: refused, named, nothing sent."""
    path = tmp_path / "run.jsonl"
    with LoopbackServer(scripted) as server:
        with (
            pytest.raises(PartNotCarriedError) as raised,
            RecordingModel(_model(server), path) as model,
        ):
            _run(Agent(model, tools=[add], model_settings=ModelSettings(top_p=0.5)), "2 + 3?")
        assert [] == server.requests
    assert "model setting 'top_p'" == raised.value.kind
    assert ["run_failed"] == _kinds(path)[-1:]


def test_a_streamed_run_is_refused_by_name(tmp_path: Path) -> None:
    """run_stream through the recorder: refused as a streamed request, nothing sent."""
    path = tmp_path / "run.jsonl"

    async def stream(agent: Agent[None, str]) -> None:
        async with agent, agent.run_stream("2 + 3?") as result:
            await result.get_output()

    with LoopbackServer(scripted) as server:
        with (
            pytest.raises(PartNotCarriedError) as raised,
            RecordingModel(_model(server), path) as model,
        ):
            asyncio.run(stream(Agent(model, tools=[add])))
        assert [] == server.requests
    assert "streamed request" == raised.value.kind


def test_a_trace_that_does_not_verify_is_not_replayed(tmp_path: Path) -> None:
    """A changed prompt: the replay model refuses the trace (seq 0) before the run starts."""
    path = tmp_path / "run.jsonl"
    _record(path)
    path.write_bytes(path.read_bytes().replace(b"What is 2 + 3?", b"What is 2 + 4?", 1))
    with pytest.raises(TraceCorruptError) as raised:
        ReplayModel(path)
    assert 0 == raised.value.report.problem.seq
