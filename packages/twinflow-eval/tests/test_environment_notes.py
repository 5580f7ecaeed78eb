"""The environment on record in eval: Lab Notes show it, compare lists what differs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from eval_testkit import START, dataset, scripted_agent

from twinflow.agent import Agent
from twinflow.agent._events import Environment
from twinflow.eval import Case, run_eval
from twinflow.eval._stats import compare_runs
from twinflow.kernel import SteppingClock
from twinflow.trace import TraceSink

CLOCK = SteppingClock(START)
HERE = Environment(
    python="3.11.7",
    implementation="CPython",
    platform="Linux-6-x86_64",
    distributions={"pydantic": "2.14.4"},
    model="embedded SmolLM2.gguf sha256:00",
    spec_digest="ab" * 32,
    modules={"calc": "cd" * 32},
)


def _factory(environment: Environment) -> Any:
    def build(case: Case, sink: TraceSink, seed: int) -> Agent[Any]:
        return scripted_agent(sink, seed, environment=environment)

    return build


def test_lab_notes_show_the_environment_the_cases_ran_in(tmp_path: Path) -> None:
    """The header names Python and the platform; the section lists modules and distributions."""
    run_eval(dataset(2), _factory(HERE), tmp_path / "run", clock=CLOCK)
    notes = (tmp_path / "run" / "lab-notes.md").read_text()
    assert (
        "- **environment**: Python 3.11.7 (CPython) on Linux-6-x86_64; 1 distributions "
        "imported, 1 spec modules"
    ) in notes
    assert f"- module calc sha256 {'cd' * 32}" in notes
    assert "- distribution pydantic 2.14.4" in notes
    assert (
        "<li>python 3.11.7 (CPython), platform Linux-6-x86_64</li>"
        in (tmp_path / "run" / "lab-notes.html").read_text()
    )


def test_lab_notes_list_how_a_second_environment_differs(tmp_path: Path) -> None:
    """Cases that ran in two environments (two workers): the second is shown as differences."""
    other = HERE.model_copy(update={"python": "3.12.1"})

    def build(case: Case, sink: TraceSink, seed: int) -> Agent[Any]:
        return _factory(other if case.id == "c1" else HERE)(case, sink, seed)

    run_eval(dataset(2), build, tmp_path / "run", clock=CLOCK)
    notes = (tmp_path / "run" / "lab-notes.md").read_text()
    assert "the cases ran in 2 environments" in notes
    assert "- environment 2: python: 3.11.7 -&gt; 3.12.1" in notes


def test_compare_lists_what_differs_between_two_runs_environments(tmp_path: Path) -> None:
    """Another Python, another pydantic and a changed module: one line each, none for the same."""
    other = HERE.model_copy(
        update={
            "python": "3.12.1",
            "distributions": {"pydantic": "2.15.0"},
            "modules": {"calc": "ef" * 32},
        }
    )
    run_eval(dataset(2), _factory(HERE), tmp_path / "a", clock=CLOCK)
    run_eval(dataset(2), _factory(other), tmp_path / "b", clock=CLOCK)
    run_eval(dataset(2), _factory(HERE), tmp_path / "c", clock=CLOCK)
    assert (
        "python: 3.11.7 -> 3.12.1",
        "distribution pydantic: 2.14.4 -> 2.15.0",
        f"module calc: {'cd' * 32} -> {'ef' * 32}",
    ) == compare_runs(tmp_path / "a", tmp_path / "b").environment_differences
    assert () == compare_runs(tmp_path / "a", tmp_path / "c").environment_differences
