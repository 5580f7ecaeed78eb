"""A simulated user through the Python API: ``run_eval(users=...)``, and what it refuses."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from eval_testkit import START, factory

from twinflow.agent import Agent, FunctionModel, Trace
from twinflow.eval import Case, Dataset, EvalValueError, run_eval
from twinflow.eval._dataset import SimulatedUser
from twinflow.kernel import CountingIds, RayExecutor, SteppingClock
from twinflow.vocab import Message, ModelRequest

USER = SimulatedUser(spec="user.yaml", max_turns=3)


def one_case(**fields: Any) -> Dataset:
    """A dataset of one case with the simulated user ``USER``."""
    return Dataset(name="d", cases=(Case(id="c", input="12 USD", **fields),), user=USER)


def simulator(user: SimulatedUser, trace: Path, seed: int) -> Agent[Any]:
    """A simulated user that asks twice, then says it is done."""

    def reply(request: ModelRequest) -> Message:
        asked = sum(1 for m in request.transcript.messages if m.role == "user")
        return Message.assistant(f"again {asked}" if asked <= 2 else "thanks [done]")

    return Agent(FunctionModel(reply), clock=SteppingClock(START), ids=CountingIds(), trace=trace)


def test_the_simulated_user_writes_the_turns_of_the_case(tmp_path: Path) -> None:
    """Its two messages are the case's turns 2 and 3; ``[done]`` ends the conversation."""
    run_eval(one_case(), factory(), tmp_path, clock=SteppingClock(START), users=simulator)
    trace = Trace.load(tmp_path / "traces" / "c@1.jsonl")
    texts = [e.body.text for e in trace.events if e.body.kind == "user_turn"]  # type: ignore[union-attr]  # user_turn's
    assert ["again 1", "again 2"] == texts


def test_a_case_whose_first_turn_fails_asks_no_simulated_user(tmp_path: Path) -> None:
    """The first answer failed: no simulated user is made, and no trace of one is left."""
    asked: list[str] = []

    def counted(user: SimulatedUser, trace: Path, seed: int) -> Agent[Any]:
        asked.append(trace.name)
        return simulator(user, trace, seed)

    dataset = Dataset(name="d", cases=(Case(id="c", input="bad 1 USD"),), user=USER)
    run_eval(dataset, factory(), tmp_path, clock=SteppingClock(START), users=counted)
    assert ([], False) == (asked, (tmp_path / "traces" / "c@1.user.jsonl").exists())


def test_a_simulated_user_without_users_is_refused(tmp_path: Path) -> None:
    """A case with a simulated user and no ``users=``: refused before anything is written."""
    with pytest.raises(EvalValueError, match="case c has a simulated user"):
        run_eval(one_case(), factory(), tmp_path / "out", clock=SteppingClock(START))
    assert not (tmp_path / "out").exists()


def test_a_simulated_user_is_refused_on_a_cluster(tmp_path: Path) -> None:
    """Cases that run where the run directory is not cannot write the simulator's trace."""
    with pytest.raises(EvalValueError, match="without --ray"):
        run_eval(
            one_case(),
            factory(),
            tmp_path / "out",
            clock=SteppingClock(START),
            executor=RayExecutor("ray://127.0.0.1:9"),
            users=simulator,
        )


def test_listed_turns_and_a_case_user_are_not_both_allowed() -> None:
    """A case takes its further turns from ``turns`` or a ``user``, not both."""
    with pytest.raises(EvalValueError, match="not both"):
        Case(id="c", input="hi", turns=("more",), user=USER)


def test_a_case_with_listed_turns_ignores_the_datasets_user() -> None:
    """The dataset's simulated user writes only for cases that list no turns of their own."""
    dataset = Dataset(
        name="d", cases=(Case(id="a", input="x", turns=("y",)), Case(id="b", input="x")), user=USER
    )
    assert [None, USER] == [dataset.user_for(case) for case in dataset.cases]
