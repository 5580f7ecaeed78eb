"""The agents an eval run's cases get: built here, or in each Ray worker from the spec alone.

The composition root's part of ``twinflow eval run``: the real transport, clock and ids are
made here (or in the worker), the spec's agent is `twinflow.agent`'s, and the judges' models
share the agent's embedded server when both name it.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from twinflow.agent import Agent, ModelSpec, RunSpec
from twinflow.agent._connect import Resolved
from twinflow.agent._events import Environment
from twinflow.agent._spec import BudgetSpec
from twinflow.cli._eval_args import LOCAL_RAY
from twinflow.cli._output import say
from twinflow.cli._wiring import (
    JudgeModels,
    chat_model,
    judge_model_spec,
    judges_of,
)
from twinflow.eval import AgentFactory, Case, Dataset
from twinflow.eval._dataset import SimulatedUser
from twinflow.eval._results import RunIdentity
from twinflow.eval._simulated import UserFactory
from twinflow.kernel import (
    Clock,
    Executor,
    Ids,
    RayExecutor,
    SerialExecutor,
    SystemClock,
    SystemIds,
    ThreadExecutor,
    Transport,
)
from twinflow.models._providers import EMBEDDED
from twinflow.trace import TraceSink

__all__ = [
    "LocalAgents",
    "WorkerAgents",
    "cases_where",
    "judge_models",
    "model_url",
    "no_case_left",
    "no_judge_left",
    "render",
    "simulated_users",
]


@contextlib.contextmanager
def model_url(
    spec: RunSpec, out_dir: Path, on_progress: Callable[[str], None] = say
) -> Iterator[RunSpec]:
    """``spec`` with its model URL resolved (`ModelSpec.serving`) while the block runs."""
    with spec.model.serving(out_dir, on_progress) as base:
        yield spec.model_copy(update={"model": spec.model.model_copy(update={"url": base})})


def case_budgeted(resolved: Resolved, case: Case, use: bool) -> Resolved:
    """The spec as one case runs it: the case's ``budget:``, where it has one (and ``use``),
    replaces the spec's."""
    if not use or case.budget is None:
        return resolved
    items = {k: v if k in ("wall_seconds", "cost_usd") else int(v) for k, v in case.budget.items()}
    budget = BudgetSpec.model_validate(items)
    return dataclasses.replace(resolved, spec=resolved.spec.model_copy(update={"budget": budget}))


@dataclasses.dataclass(frozen=True)
class WorkerAgents:
    """Builds each case's agent where the case runs (a Ray worker), from the spec alone.

    It holds nothing but the spec, so it pickles; the transport, clock and ids are the
    kernel's, made in the worker, and the tools are imported there.
    """

    spec: RunSpec
    identity: RunIdentity
    case_budgets: bool = True
    """Each case's ``budget:`` replaces the spec's (False: ``--case-budget`` replaced both)."""

    def __call__(self, case: Case, sink: TraceSink, seed: int) -> Agent[Any]:
        """A fresh agent for one trial, writing its trace to ``sink``, sampling with ``seed``."""
        ids = SystemIds()
        resolved = case_budgeted(self.spec.resolve(), case, self.case_budgets)
        # One transport per case: its connections go with the agent when the case ends.
        model = chat_model(self.spec.model, self.spec.model.transport(), ids)
        return resolved.agent(
            model=model,
            clock=SystemClock(),
            ids=ids,
            trace=sink,
            seed=seed,
            # The worker's own interpreter and packages: the case ran here, not on the driver.
            environment=self.spec.environment(self.identity.model, self.identity.spec_digest),
        )


@dataclasses.dataclass(frozen=True)
class LocalAgents:
    """Builds each case's agent in this process, on one transport, clock and ids."""

    spec: RunSpec
    transport: Transport
    clock: Clock
    ids: Ids
    tools: list[Callable[..., Any]]
    environment: Environment
    case_budgets: bool = True
    """Each case's ``budget:`` replaces the spec's (False: ``--case-budget`` replaced both)."""

    @functools.cached_property
    def _resolved(self) -> Resolved:
        """The spec resolved once: every trial's agent shares its tools' models and schemas."""
        return self.spec.resolve(self.tools)

    def __call__(self, case: Case, sink: TraceSink, seed: int) -> Agent[Any]:
        """A fresh agent for one trial, writing its trace to ``sink``, sampling with ``seed``."""
        model = chat_model(self.spec.model, self.transport, self.ids)
        return case_budgeted(self._resolved, case, self.case_budgets).agent(
            model=model,
            clock=self.clock,
            ids=self.ids,
            trace=sink,
            seed=seed,
            environment=self.environment,
        )


@contextlib.contextmanager
def simulated_users(
    specs: dict[str, RunSpec],
    agent: RunSpec,
    local: LocalAgents,
    args: argparse.Namespace,
    on_progress: Callable[[str], None],
) -> Iterator[UserFactory | None]:
    """The simulated users' agents (`twinflow.eval._simulated.user_specs` read and checked
    them) while the block runs, on the cases' clock and ids, one connection per case in flight
    (``--concurrency``); None when the dataset has none. An ``embedded`` simulated user shares
    the agent's embedded server (``local.spec``'s URL) when the agent (``agent``) has one."""
    clock, ids, agent_url = local.clock, local.ids, local.spec.model.url
    if not specs:
        yield None
        return
    with contextlib.ExitStack() as stack:
        built: dict[str, tuple[Resolved, RunSpec, Transport]] = {}
        for name, spec in specs.items():
            if spec.model.url == EMBEDDED and agent.model.url == EMBEDDED:
                wired = spec.model_copy(
                    update={"model": spec.model.model_copy(update={"url": agent_url})}
                )
            else:
                wired = stack.enter_context(model_url(spec, args.out, on_progress))
            transport = spec.model.transport(connections=args.concurrency)
            stack.callback(transport.close)
            built[name] = (wired.resolve(), wired, transport)

        def build(user: SimulatedUser, trace: Path, seed: int) -> Agent[Any]:
            resolved, wired, transport = built[user.spec]
            model = chat_model(wired.model, transport, ids)
            return resolved.agent(model=model, clock=clock, ids=ids, trace=trace, seed=seed)

        yield build


def no_case_left(case: Case, sink: TraceSink, seed: int) -> Agent[Any]:
    raise AssertionError(f"case {case.id}: a finished run asked for an agent")


def no_judge_left(url: str) -> str:
    raise AssertionError("a finished run asked for a judge")


def judge_models(
    stack: contextlib.ExitStack,
    dataset: Dataset,
    out_dir: Path,
    agent_url: str,
    spec: RunSpec | None,
    on_progress: Callable[[str], None],
) -> JudgeModels:
    """The judges' models, closed with ``stack``: an ``embedded`` judge shares the agent's
    embedded server when the agent has one, else one is started for the judges here."""
    embedded = agent_url if spec is not None and spec.model.url == EMBEDDED else None
    if embedded is None and any(judge_model_spec(j).url == EMBEDDED for j in judges_of(dataset)):
        embedded = stack.enter_context(ModelSpec(url=EMBEDDED).serving(out_dir, on_progress))

    def url(named: str) -> str:
        if named != EMBEDDED:
            return named
        assert embedded is not None  # started above for every judge that names it
        return embedded

    models = JudgeModels(url, SystemIds())
    stack.callback(models.close)
    models.prepare(dataset)
    return models


def render(spec: RunSpec) -> Callable[[Case], str]:
    def render(case: Case) -> str:
        if "{input}" in spec.prompt:
            return spec.prompt.replace("{input}", case.input)
        return f"{spec.prompt}\n\n{case.input}"

    return render


def cases_where(
    stack: contextlib.ExitStack,
    args: argparse.Namespace,
    code_dirs: Sequence[Path],
    local: LocalAgents,
    identity: RunIdentity,
) -> tuple[AgentFactory, Executor]:
    """Where the cases run: as Ray tasks (``--ray``, each worker building its own agent), in
    threads (``--concurrency`` above 1), or one after another here."""
    if args.ray is not None:
        address = None if args.ray == LOCAL_RAY else args.ray
        ray = RayExecutor(address, code_dirs=[str(d) for d in code_dirs]).start()
        stack.callback(ray.close)
        return WorkerAgents(local.spec, identity, local.case_budgets), ray
    return local, ThreadExecutor() if args.concurrency > 1 else SerialExecutor()
