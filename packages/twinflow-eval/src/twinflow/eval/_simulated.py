"""A simulated user: a model writes a case's further user turns, in a traced run of its own.

After each answer of the run under test, the simulated user's agent (its spec's model and
``system``, no tools) is asked for the user's next message: its first turn is told the goal,
the case's opening message and the answer; each later turn, the next answer. Its replies are
one conversation in one trace, ``traces/<key>.user.jsonl`` beside the case's, and each
``user_turn`` it wrote links that trace at the size and Merkle root it had then (the
``simulator`` link, as a sub-agent's result links its child), so the case's checkpoint vouches
for every message the simulator wrote and ``twinflow verify CASE --tree`` checks it.

A reply holding `DONE` ends the conversation (nothing more is sent), and so does the turn
limit, ``max_turns``. Replaying the case's trace needs no simulator: the turns are in it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from twinflow.agent import Agent, RunResult, RunSpec, SpecError, load_spec
from twinflow.eval._dataset import Case, Dataset, SimulatedUser
from twinflow.eval._errors import DatasetError, EvalValueError
from twinflow.kernel import TransportError
from twinflow.vocab import value_bytes as canonical_bytes

__all__ = ["DONE", "UserFactory", "check_users", "converse_with", "user_specs", "user_trace"]

DONE = "[done]"
"""What a simulated user replies once its goal is met (or cannot be): the conversation ends."""

UserFactory = Callable[[SimulatedUser, Path, int], Agent[Any]]
"""Builds a simulated user's agent for one trial, writing its trace to the given new file and
sampling with the trial's seed."""

_FIRST = (
    "You play the user in a conversation with an assistant, to reach this goal:\n{goal}\n\n"
    "You opened with:\n{opening}\n\nThe assistant answered:\n{answer}\n\n"
    "Write your next message to the assistant, and nothing else. Once the goal is reached, "
    "or cannot be, reply {done} alone."
)
_NEXT = "The assistant answered:\n{answer}\n\nYour next message, or {done}."


def user_specs(dataset: Dataset, where: Path, agent_spec: Path) -> dict[str, RunSpec]:
    """Every simulated user's spec the dataset names, read and checked before anything runs,
    by its ``spec`` entry (a path relative to ``where``, the dataset's directory).

    Raises:
        DatasetError: One line naming the user's spec and what is wrong: it is missing or
            invalid, is the agent's own spec (a cycle: the agent would write its own turns),
            or names tools, sub-agents, MCP servers or an output model (a simulated user
            writes text and acts on nothing).
    """
    users = [u for u in (dataset.user, *(c.user for c in dataset.cases)) if u is not None]
    specs: dict[str, RunSpec] = {}
    for user in users:
        if user.spec in specs:
            continue
        path = where / user.spec
        label = f"simulated user {user.spec!r}"
        if path.resolve() == agent_spec.resolve():
            raise DatasetError(
                f"{label} is the agent's own spec (a cycle: the agent would write its own "
                "turns): name a spec of the user's"
            )
        try:
            spec = load_spec(path)
        except SpecError as exc:
            raise DatasetError(f"{label}: {' '.join(str(exc).split())}") from None
        named = [
            key for key in ("tools", "builtin_tools", "mcp_servers", "agents") if getattr(spec, key)
        ] + (["output"] if spec.output is not None else [])
        if named:
            raise DatasetError(
                f"{label}: names {', '.join(named)}; a simulated user writes text and acts on "
                "nothing: remove them from its spec"
            )
        specs[user.spec] = spec
    return specs


def check_users(dataset: Dataset, cases: Sequence[Case], users: bool, local: bool) -> None:
    """Refuse, before anything runs, a simulated user a run cannot make: it has no ``users``
    factory, or its cases run where the run directory is not.

    Raises:
        EvalValueError: Naming the first case with a simulated user.
    """
    simulated = next((case for case in cases if dataset.user_for(case) is not None), None)
    if simulated is None:
        return
    if not users:
        raise EvalValueError(
            f"case {simulated.id} has a simulated user: pass users= (the simulated users' "
            "agents), as `twinflow eval run` does"
        )
    if not local:
        raise EvalValueError(
            f"case {simulated.id} has a simulated user, whose trace is written beside the "
            "case's: run it in this process (without --ray)"
        )


def user_trace(case_trace: Path) -> Path:
    """The simulated user's trace of a case: ``<key>.user.jsonl`` beside ``<key>.jsonl``."""
    return case_trace.with_name(f"{case_trace.stem}.user.jsonl")


def _text(result: RunResult[Any]) -> str:
    output = result.output
    if isinstance(output, str):
        return output
    value = output.model_dump(mode="json") if isinstance(output, BaseModel) else output
    return canonical_bytes(value).decode()


def converse_with(
    agent: Agent[Any],
    prompt: str,
    goal: str,
    user: SimulatedUser,
    build: Callable[[], Agent[Any]],
) -> None:
    """Run a case whose further turns a simulated user writes, into the agent's one trace.

    ``prompt`` is the case's opening message (its rendered ``input``), ``goal`` what the
    simulated user wants; ``build`` makes the simulated user's agent, once the first answer
    is in (a case whose first turn fails leaves no simulator trace). Raises what the agent's
    run raises (its trace records it); a simulated user that fails ends the conversation (its
    own trace records why).
    """
    result = agent.run(prompt)
    said: RunResult[Any] | None = None
    with build() as simulator:
        for _ in range(user.max_turns):
            answer = _text(result)
            try:
                if said is None:
                    asked = _FIRST.format(goal=goal, opening=prompt, answer=answer, done=DONE)
                    said = simulator.run(asked)
                else:
                    said = simulator.run(_NEXT.format(answer=answer, done=DONE), continue_from=said)
            except TransportError:
                raise  # the model could not be reached: the case is aborted, not scored
            except Exception:  # the simulated user's trace records its failure (run_failed)
                return
            message = _text(said).strip()
            if DONE in message or not message:
                return
            result = agent.run(message, continue_from=result, simulator=said)
