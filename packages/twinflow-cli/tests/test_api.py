"""The Python front door: one call wires the real adapters from the spec's own object."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_testkit import scripted_chat
from pydantic import BaseModel

from twinflow._base._errors import FileWriteError
from twinflow.agent import (
    Decision,
    ModelSpec,
    PolicySpec,
    RunPaused,
    RunSpec,
    connect,
    replay_run,
    verify_agent_trace,
)
from twinflow.kernel import LoopbackServer, ReplayDivergenceError
from twinflow.trace import UserError


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def test_connect_runs_and_replay_runs_from_the_same_spec(tmp_path: Path) -> None:
    """connect() wires clock, ids, transport and model; replay_run rebuilds from the same spec."""
    with LoopbackServer(scripted_chat) as server:
        spec = RunSpec(
            prompt="Add 2 and 3.",
            model=ModelSpec(url=server.url, dialect="llama.cpp"),
            policy=PolicySpec(allow=("add",), max_tool_calls=1),
            max_steps=3,
        )
        trace = tmp_path / "run" / "trace.jsonl"
        with connect(spec, trace, tools=[add]) as agent:
            result = agent.run(spec.prompt)
    assert "5" == result.output
    assert None is verify_agent_trace(trace).problem
    assert verify_agent_trace(trace).events == replay_run(trace, spec, tools=[add]).events


def test_connect_sends_the_key_api_key_env_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The spec's api_key_env and headers reach the server from Python as from `twinflow run`."""
    monkeypatch.setenv("TWINFLOW_TEST_API_KEY", "sk-api-test-key")
    with LoopbackServer(scripted_chat) as server:
        spec = RunSpec(
            prompt="Add 2 and 3.",
            model=ModelSpec(
                url=server.url,
                dialect="llama.cpp",
                api_key_env="TWINFLOW_TEST_API_KEY",
                headers={"X-Title": "team-a"},
            ),
            policy=PolicySpec(allow=("add",), max_tool_calls=1),
            max_steps=3,
        )
        with connect(spec, tmp_path / "trace.jsonl", tools=[add]) as agent:
            agent.run(spec.prompt)
        sent = [{k.lower(): v for k, v in r.headers} for r in server.requests]
    assert {("Bearer sk-api-test-key", "team-a")} == {
        (h.get("authorization"), h.get("x-title")) for h in sent
    }
    assert b"sk-api-test-key" not in (tmp_path / "trace.jsonl").read_bytes()


def test_replay_run_with_changed_code_diverges(tmp_path: Path) -> None:
    """A tool whose code changed makes a live replay from the same spec diverge."""

    def changed() -> object:
        def add(a: int, b: int) -> int:
            """Add two integers."""
            return a + b + 1

        return add

    with LoopbackServer(scripted_chat) as server:
        spec = RunSpec(
            prompt="Add 2 and 3.",
            model=ModelSpec(url=server.url, dialect="llama.cpp"),
            policy=PolicySpec(allow=("add",)),
        )
        trace = tmp_path / "trace.jsonl"
        with connect(spec, trace, tools=[add]) as agent:
            agent.run(spec.prompt)
    with pytest.raises(ReplayDivergenceError):
        replay_run(trace, spec, tools=[changed()], mode="live")  # type: ignore[list-item]  # changed() returns the tool typed as object


def test_the_python_names_are_the_spec_names() -> None:
    """`Policy` takes the spec's policy keys and `Agent` its `system` and `max_steps`."""
    import inspect

    from twinflow.agent import Agent, Policy

    agent_parameters = set(inspect.signature(Agent.__init__).parameters)
    expected = (set(PolicySpec.model_fields), {"system", "max_steps"})
    actual = (
        set(PolicySpec.model_fields) & set(Policy.model_fields),
        {"system", "max_steps"} & agent_parameters,
    )
    assert expected == actual


def test_two_runs_of_one_spec_send_the_model_the_same_bytes(tmp_path: Path) -> None:
    """Nothing random (call or run ids, times) reaches the model: two runs send equal bodies."""
    with LoopbackServer(scripted_chat) as server:
        spec = RunSpec(
            prompt="Add 2 and 3.",
            model=ModelSpec(url=server.url, dialect="llama.cpp", temperature=0),
            policy=PolicySpec(allow=("add",), max_tool_calls=1),
            max_steps=3,
        )
        for name in ("a", "b"):
            with connect(spec, tmp_path / name / "trace.jsonl", tools=[add]) as agent:
                agent.run(spec.prompt)
        bodies = [request.body for request in server.requests]
    assert 4 == len(bodies)
    assert bodies[:2] == bodies[2:]


class Money(BaseModel):
    """An amount of money (the scripted server's answer to a conversion)."""

    amount: float
    currency: str


def convert_currency(amount: float, source: str, target: str) -> float:
    """Convert an amount between currencies at a fixed rate."""
    return round(amount * 1.08, 2)


def test_output_takes_the_model_class_itself(tmp_path: Path) -> None:
    """RunSpec(output=Money) validates the answer as Money, digests as its name, and replays."""
    with LoopbackServer(scripted_chat) as server:
        spec = RunSpec(
            prompt="Convert 120 EUR to USD.",
            model=ModelSpec(url=server.url, dialect="llama.cpp"),
            policy=PolicySpec(allow=("convert_currency",)),
            output=Money,
        )
        with connect(spec, tmp_path / "trace.jsonl", tools=[convert_currency]) as agent:
            result = agent.run(spec.prompt)
    assert Money(amount=129.6, currency="USD") == result.output
    assert f"{__name__}:Money" == spec.model_dump(mode="json")["output"]
    replayed = replay_run(tmp_path / "trace.jsonl", spec, tools=[convert_currency])
    assert verify_agent_trace(tmp_path / "trace.jsonl").events == replayed.events


def test_a_second_run_to_the_same_trace_takes_the_next_free_name(tmp_path: Path) -> None:
    """An existing trace is neither an error nor overwritten: the run takes trace.1.jsonl."""
    trace = tmp_path / "run" / "trace.jsonl"
    with LoopbackServer(scripted_chat) as server:
        spec = RunSpec(
            prompt="Add 2 and 3.",
            model=ModelSpec(url=server.url, dialect="llama.cpp"),
            policy=PolicySpec(allow=("add",), max_tool_calls=1),
        )
        taken = []
        for _ in range(2):
            with connect(spec, trace, tools=[add]) as agent:
                agent.run(spec.prompt)
                taken.append(agent.writer.sink.path)  # type: ignore[attr-defined]  # a FileTraceSink
    assert [trace, tmp_path / "run" / "trace.1.jsonl"] == taken
    assert [None, None] == [verify_agent_trace(path).problem for path in taken]


def test_the_trace_is_claimed_before_the_embedded_server_starts(tmp_path: Path) -> None:
    """A trace that cannot be written is refused before SmolLM2 is started, with a typed error."""
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "linked").symlink_to(real)
    spec = RunSpec(prompt="Add 2 and 3.", model=ModelSpec(url="embedded"))
    claim = connect(spec, tmp_path / "linked" / "trace.jsonl", tools=[add])
    with pytest.raises(FileWriteError, match="linked is a symbolic link"), claim:
        pass
    assert [] == list(real.iterdir())


def test_a_spec_error_is_raised_before_any_file_or_server(tmp_path: Path) -> None:
    """A policy naming a tool not given is refused before the trace is claimed or SmolLM2 starts."""
    spec = RunSpec(
        prompt="Add 2 and 3.",
        model=ModelSpec(url="embedded"),
        policy=PolicySpec(allow=("add", "nope")),
    )
    claim = connect(spec, tmp_path / "run" / "trace.jsonl", tools=[add])
    with pytest.raises(UserError, match="nope"), claim:
        pass
    assert [] == list(tmp_path.iterdir())


def test_connect_resume_continues_a_run_waiting_for_approval(tmp_path: Path) -> None:
    """A run paused on an ask tool goes on through connect(resume=True) and Agent.resume."""
    with LoopbackServer(scripted_chat) as server:
        spec = RunSpec(
            prompt="Add 2 and 3.",
            model=ModelSpec(url=server.url, dialect="llama.cpp"),
            policy=PolicySpec(ask=("add",)),
            max_steps=3,
        )
        trace = tmp_path / "run" / "trace.jsonl"
        with connect(spec, trace, tools=[add]) as agent, pytest.raises(RunPaused) as paused:
            agent.run(spec.prompt)
        [waiting] = paused.value.paused.pending
        decision = Decision(call_id=waiting.call_id, approve=True, by="ann")
        with connect(spec, trace, tools=[add], resume=True) as agent:
            result = agent.resume(trace, decisions=[decision])
    assert "5" == result.output
    assert None is verify_agent_trace(trace).problem
