"""The environment on record: run_started carries it, replay carries the recorded one forward,
a resume elsewhere records its own in run_resumed."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from agent_testkit import Counts, Total, crashed_at, replaying_agent

from twinflow.agent import (
    Agent,
    AgentConfigError,
    FunctionModel,
    Policy,
    RunResumed,
    RunStarted,
    Trace,
    replay,
)
from twinflow.agent._events import Environment
from twinflow.agent._replay import ReplayPorts
from twinflow.kernel import CountingIds, SteppingClock
from twinflow.trace import FileTraceSink

START = datetime(2026, 1, 1, tzinfo=UTC)
STEPS = 2


HERE = Environment(
    python="3.11.7",
    implementation="CPython",
    platform="Linux-6-x86_64",
    distributions={"pydantic": "2.14.4", "twinflow-agent": "0.1.0"},
    model="openai-compatible llama.cpp http://127.0.0.1:1 name=local",
    spec_digest="ab" * 32,
    modules={"calc": "cd" * 32},
)
ELSEWHERE = HERE.model_copy(
    update={
        "python": "3.12.1",
        "platform": "Darwin-23-arm64",
        "distributions": {"pydantic": "2.15.0", "numpy": "2.1.0", "twinflow-agent": "0.1.0"},
    }
)


def _agent(counts: Counts, trace: FileTraceSink, environment: Environment | None) -> Agent[Total]:
    return Agent(
        FunctionModel(counts.script),
        clock=SteppingClock(START, timedelta(milliseconds=5)),
        ids=CountingIds(),
        tools=[counts.add],
        policy=Policy(allow=frozenset({"add"})),
        output_type=Total,
        trace=trace,
        environment=environment,
    )


def _replaying(environment: Any) -> Any:
    def build(ports: ReplayPorts) -> Agent[Total]:
        return replaying_agent(
            ports,
            tools=[Counts(STEPS).add],
            policy=Policy(allow=frozenset({"add"})),
            output_type=Total,
            environment=ports.environment if environment == "ports" else environment,
        )

    return build


def _started(path: Path) -> RunStarted:
    body = next(iter(Trace.load(path).events)).body
    assert isinstance(body, RunStarted)
    return body


def test_run_started_records_the_environment_and_omits_it_when_none(tmp_path: Path) -> None:
    """An agent given an environment records it whole; one given none writes no key at all."""
    with _agent(Counts(STEPS), FileTraceSink(tmp_path / "a.jsonl"), HERE) as agent:
        agent.run("add")
    assert HERE == _started(tmp_path / "a.jsonl").environment
    with _agent(Counts(STEPS), FileTraceSink(tmp_path / "b.jsonl"), None) as agent:
        agent.run("add")
    assert b'"environment"' not in (tmp_path / "b.jsonl").read_bytes()


def test_a_trace_from_another_machine_replays_with_its_recorded_environment(
    tmp_path: Path,
) -> None:
    """Replay hands the recorded environment to the factory: a run recorded elsewhere replays in
    recorded mode here, event for event."""
    path = tmp_path / "t.jsonl"
    with _agent(Counts(STEPS), FileTraceSink(path), ELSEWHERE) as agent:
        agent.run("add")
    result = replay(Trace.load(path), _replaying("ports"))
    assert Trace.load(path).size == result.events


def test_a_replay_factory_that_sets_its_own_environment_is_refused_by_name(
    tmp_path: Path,
) -> None:
    """A factory that passes this machine's environment instead of the recorded one is told to
    pass ports.environment (it would diverge at event 0 on every other machine)."""
    path = tmp_path / "t.jsonl"
    with _agent(Counts(STEPS), FileTraceSink(path), ELSEWHERE) as agent:
        agent.run("add")
    with pytest.raises(AgentConfigError, match=r"ports\.environment"):
        replay(Trace.load(path), _replaying(HERE))


def test_a_resume_elsewhere_keeps_the_recorded_start_and_records_where_it_went_on(
    tmp_path: Path,
) -> None:
    """Resumed on another machine: run_started is the recorded one, run_resumed names the new
    environment; resumed where it started, run_resumed names none."""
    full = tmp_path / "full.jsonl"
    with _agent(Counts(STEPS), FileTraceSink(full), ELSEWHERE) as agent:
        agent.run("add")
    for environment, expected in ((HERE, HERE), (ELSEWHERE, None)):
        cut = crashed_at(full, 4, tmp_path / f"cut-{environment.python}.jsonl")
        with _agent(
            Counts(STEPS),
            FileTraceSink(tmp_path / f"unused-{environment.python}.jsonl"),
            environment,
        ) as agent:
            agent.resume(cut)
        events = list(Trace.load(cut).events)
        assert ELSEWHERE == _started(cut).environment
        resumed = [e.body for e in events if isinstance(e.body, RunResumed)]
        assert [expected] == [r.environment for r in resumed]


def test_differences_name_each_changed_field_distribution_and_module() -> None:
    """One line per difference, distributions and modules by name, absent ones said so (or,
    without imports, only versions of distributions both sides imported)."""
    assert (
        "python: 3.11.7 -> 3.12.1",
        "platform: Linux-6-x86_64 -> Darwin-23-arm64",
        "distribution numpy: absent -> 2.1.0",
        "distribution pydantic: 2.14.4 -> 2.15.0",
    ) == HERE.differences(ELSEWHERE)
    assert () == HERE.differences(HERE)
    assert (
        "python: 3.11.7 -> 3.12.1",
        "platform: Linux-6-x86_64 -> Darwin-23-arm64",
        "distribution pydantic: 2.14.4 -> 2.15.0",
    ) == HERE.differences(ELSEWHERE, imports=False)
