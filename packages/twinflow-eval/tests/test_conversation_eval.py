"""Multi-turn eval cases: a case's further user turns run as one conversation in one trace."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from eval_testkit import START

from twinflow.agent import Agent, FunctionModel, Trace
from twinflow.eval import Case, Dataset, run_eval
from twinflow.eval._observe import Observation
from twinflow.kernel import CountingIds, SteppingClock
from twinflow.trace import TraceSink
from twinflow.vocab import JsonValue, Message, ModelRequest

CLOCK = SteppingClock(START)


def echo(request: ModelRequest) -> Message:
    """Answer the last user message with its turn number."""
    users = [m for m in request.transcript.messages if m.role == "user"]
    return Message.assistant(f"turn {len(users)}: {users[-1].text}")


def build(case: Case, sink: TraceSink, seed: int, model: Any = echo) -> Agent[Any]:
    """A text agent on the scripted model."""
    return Agent(FunctionModel(model), clock=SteppingClock(START), ids=CountingIds(), trace=sink)


def every_turn_answered(observation: Observation, expected: JsonValue) -> bool:
    """A custom scorer reading the whole conversation: every turn's answer names its turn."""
    said = [observation.prompt, *observation.turns]
    answers = [*observation.answers, observation.output]
    return answers == [f"turn {n}: {text}" for n, text in enumerate(said, 1)]


CONVERSATION = Dataset.model_validate(
    {
        "name": "talk",
        "scorers": [
            {"kind": "exact"},
            {"kind": "custom", "path": "test_conversation_eval:every_turn_answered"},
        ],
        "cases": [
            {"id": "chat", "input": "hello", "turns": ["again", "bye"], "expected": "turn 3: bye"}
        ],
    }
)


def test_a_case_with_turns_runs_one_conversation_scored_whole(tmp_path: Path) -> None:
    """The case's turns follow its input in one trace; both scorers, one reading every turn's
    answer, pass."""
    results = run_eval(CONVERSATION, build, tmp_path / "run", clock=CLOCK)
    trace = Trace.load(tmp_path / "run" / results.cases[0].trace, require_complete=True)
    assert (1, 2) == (results.summary.passed, trace.kinds.count("user_turn"))


def test_an_interrupted_conversation_case_resumes_and_sends_the_rest(tmp_path: Path) -> None:
    """Ctrl-C during turn 2: the next eval run resumes turn 2 from the trace and sends turn 3."""

    def interrupted(request: ModelRequest) -> Message:
        if sum(m.role == "user" for m in request.transcript.messages) == 2:
            raise KeyboardInterrupt
        return echo(request)

    run_dir = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        run_eval(CONVERSATION, lambda *a: build(*a, model=interrupted), run_dir, clock=CLOCK)
    asked: list[str] = []

    def counting(request: ModelRequest) -> Message:
        asked.append(request.transcript.messages[-1].text)
        return echo(request)

    results = run_eval(CONVERSATION, lambda *a: build(*a, model=counting), run_dir, clock=CLOCK)
    trace = Trace.load(run_dir / results.cases[0].trace, require_complete=True)
    assert (1, ["again", "bye"]) == (results.summary.passed, asked)
    assert "run_resumed" in trace.kinds
