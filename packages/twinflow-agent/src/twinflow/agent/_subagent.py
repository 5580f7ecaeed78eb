"""Sub-agents as tools: a call runs another agent into its own trace, which the parent vouches for.

A sub-agent tool takes one argument, ``prompt``. Each call starts a new run of the child
agent, under the child's own policy, into a new trace file beside the parent's
(``<parent stem>.<tool name>.jsonl``, numbered if taken). The parent's ``tool_returned``
records the child's run id, trace file name, size and Merkle root (`ChildRun`), so one
checkpoint of the parent covers the child's whole trace (docs/adr/0191). A child that fails
is the parent's error result, and the parent's run goes on.

Budgets (docs/adr/0201): ``own`` (the default) gives the child its own configured limits;
``shared`` also bounds it by what the parent has left (steps, that is model requests, tokens
and tool calls) and counts what it used against the parent; a split (a mapping of ``steps``,
``tokens``, ``tool_calls``) bounds each call of the child by that part of the parent's budget
as well, and counts likewise. Either way the limits the child ran under are in its
``run_started``; what was counted against the parent is in the link (``child.counted``), so a
replay of the parent counts it again without the child; and a crossing is a recorded
decision: the child's ``policy_decided`` denial (tool calls) or ``budget_exceeded`` then
``run_failed`` (steps, tokens), the parent's ``policy_decided`` denial of a call to a child
once what it shares is spent, or the parent's ``budget_exceeded`` then ``run_failed`` once
its own limit is crossed.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel

from twinflow.agent._errors import AgentConfigError, AgentError
from twinflow.agent._events import (
    ChildRun,
    ChildUse,
    EventBody,
    ModelRequested,
    ModelResponded,
    RunStarted,
    ToolReturned,
)
from twinflow.agent._tools import Tool
from twinflow.kernel import ReplayDivergenceError
from twinflow.trace import MemoryTraceSink, TraceSink
from twinflow.vocab import RunId, ToolSpec, Usage
from twinflow.vocab import value_bytes as canonical_bytes

if TYPE_CHECKING:
    from twinflow.agent._agent import Agent
    from twinflow.agent._run import RunState

__all__ = [
    "MAX_DEPTH",
    "AgentTool",
    "Budget",
    "ChildLimits",
    "Delegate",
    "Delegated",
    "Split",
    "child_trace_path",
    "delegate_for",
    "replaying_children",
]

MAX_DEPTH = 4
"""Deepest nesting of sub-agents: a parent, a child, ..., four levels below the top run."""

Budget = Literal["own", "shared"] | Mapping[str, int]
"""``own``: the child's configured limits; ``shared``: also bounded by what the parent has
left; a mapping of ``steps``, ``tokens``, ``tool_calls`` (a split): also bounded by that part
of the parent's budget. Shared and split use is counted against the parent."""

SPLIT_KEYS = ("steps", "tokens", "tool_calls")
"""What a split budget may set aside for a child: model requests, tokens, tool calls."""


@dataclass(frozen=True, slots=True)
class Split:
    """A split budget: the most of the parent's budget one call of the child may use."""

    steps: int | None = None
    """Model requests (the child's steps, re-asks included)."""
    tokens: int | None = None
    """Input plus output tokens."""
    tool_calls: int | None = None
    """Tool calls."""


def _budget(name: str, budget: Budget) -> Literal["own", "shared"] | Split:
    """A sub-agent's budget checked: ``own``, ``shared`` or a `Split`.

    Raises:
        AgentConfigError: Anything else, naming the choices.
    """
    if budget in ("own", "shared"):
        return budget
    if isinstance(budget, Mapping) and budget:
        unknown = sorted(set(budget) - set(SPLIT_KEYS))
        values = list(budget.values())
        if not unknown and all(type(v) is int and v >= 0 for v in values):
            if budget.get("steps") == 0:
                raise AgentConfigError(f"sub-agent {name!r}: a split of 0 steps never runs it")
            return Split(**dict(budget))
    raise AgentConfigError(
        f"sub-agent {name!r}: budget must be 'own' or 'shared', or a split mapping "
        f"{', '.join(SPLIT_KEYS)} to counts (0 or more), not {budget!r}"
    )


def _prompt(prompt: str) -> str:
    """The signature every sub-agent tool validates its arguments against (one ``prompt``)."""
    raise AssertionError("a sub-agent tool runs through AgentTool.delegate")


_PROMPT = Tool.from_function(_prompt, name="sub_agent", description="")
"""The one argument of every sub-agent tool, as a tool: its schema and arguments model."""


@dataclass(frozen=True, slots=True)
class ChildLimits:
    """What a ``shared`` budget leaves the child: None where the parent sets no limit."""

    tool_calls: int | None = None
    """Tool calls the parent has left."""
    tokens: int | None = None
    """Tokens (input plus output) the parent has left."""
    requests: int | None = None
    """Model requests the parent has left."""


@dataclass(frozen=True, slots=True)
class Delegated:
    """What a sub-agent call gave: the text the parent's model sees, and the child's run."""

    content: str
    """The child's output (its text, or its structured output's canonical JSON), or its error."""
    error_type: str | None
    """The child's error class name when it failed (the parent sees an error result)."""
    child: ChildRun
    """The child run the parent's ``tool_returned`` records."""
    usage: Usage
    """What the child used (counted against the parent under a ``shared`` budget)."""
    tool_calls: int
    """Tool calls the child decided (counted likewise)."""
    requests: int = 0
    """Model requests the child made (counted likewise)."""


def child_trace_path(parent: str, name: str) -> Path:
    """Where a child's trace goes: ``<parent stem>.<tool name>.jsonl`` beside the parent's."""
    path = Path(parent)
    return path.with_name(f"{path.stem}.{name}{path.suffix or '.jsonl'}")


class Delegate:
    """Runs the sub-agent calls of one parent run (`delegate_for`), bounding and counting a
    shared or split budget against that run."""

    def __init__(self, agent: Agent[Any], state: RunState) -> None:
        self._agent = agent
        self._state = state

    def _left(self) -> tuple[int | None, int | None]:
        """The tokens and requests the parent run has left (None: no limit)."""
        limits, state = self._agent.usage_limits, self._state
        tokens = None
        if limits.total_tokens is not None:
            tokens = max(limits.total_tokens - state.usage_in - state.usage_out, 0)
        requests = None if limits.requests is None else max(limits.requests - state.requests, 0)
        return tokens, requests

    def spent(self, tool: AgentTool) -> str | None:
        """Why a call to ``tool`` may not start: what it shares of the parent is used up."""
        if tool.budget == "own":
            return None
        tokens, requests = self._left()
        if requests == 0:
            return f"the run's {self._agent.usage_limits.requests} requests (steps) are used up"
        if tokens == 0:
            return f"the run's {self._agent.usage_limits.total_tokens} tokens are used up"
        return None

    def __call__(self, tool: AgentTool, prompt: str, limits: ChildLimits) -> Delegated:
        """Run the call, bounded by what the parent has left (and the split); count its use."""
        if tool.budget != "own":
            tokens, requests = self._left()
            limits = ChildLimits(limits.tool_calls, tokens, requests)
        done = tool.delegate(prompt, self._agent.trace_path, limits)
        if tool.budget != "own":
            self.count(done.child.counted)
        return done

    def count(self, used: ChildUse | None) -> None:
        """Count a child's recorded use against the parent run (live, or served from a record)."""
        if used is not None:
            self._state.usage_in += used.input_tokens
            self._state.usage_out += used.output_tokens
            self._state.requests += used.requests


Build = Callable[[TraceSink | Path], "Agent[Any]"]
"""Makes the child agent for one call, writing to the given sink or new trace file."""


class AgentTool(Tool):
    """A tool that runs another agent on its one argument, ``prompt`` (`Agent.as_tool`)."""

    __slots__ = ("_build", "budget", "depth")

    def __init__(
        self, build: Build, *, name: str, description: str, depth: int, budget: Budget = "own"
    ) -> None:
        """A sub-agent tool.

        Args:
            build: Makes the child agent for one call, on a trace sink or a new trace file.
            name: The tool's name (what the parent's policy allows).
            description: What the parent's model is told the sub-agent does.
            depth: Levels of sub-agents below and including the child (1: a child without any).
            budget: ``own``, ``shared`` or a split (see the module docstring).

        Raises:
            AgentConfigError: ``depth`` over `MAX_DEPTH`, or an unknown ``budget``.
        """
        if depth > MAX_DEPTH:
            raise AgentConfigError(
                f"sub-agent {name!r} nests {depth} levels of agents; at most {MAX_DEPTH} are "
                "allowed: flatten the team"
            )
        checked = _budget(name, budget)
        # Built once for every sub-agent tool: the schema and the arguments model are the same.
        self.spec = ToolSpec(name=name, description=description, parameters=_PROMPT.spec.parameters)
        self.function = _prompt
        self._arguments = _PROMPT._arguments
        self._build = build
        self.depth = depth
        self.budget: Literal["own", "shared"] | Split = checked

    def delegate(self, prompt: str, beside: str | None, limits: ChildLimits) -> Delegated:
        """Run the child on ``prompt`` into a new trace beside ``beside`` (in memory if None).

        Never raises for a child that fails: its error is the result. Under a live replay of
        the parent (`replaying_children`), the recorded child is replayed live instead.
        """
        live = _LIVE.get()
        if live is not None:
            return live.replay(self)
        target: TraceSink | Path = (
            MemoryTraceSink() if beside is None else child_trace_path(beside, self.name)
        )
        agent = self._build(target)
        with agent:
            if self.budget != "own":
                _bound(agent, _split(limits, self.budget))
            watch = _Watch(agent)
            error_type: str | None = None
            try:
                result = agent.run(prompt)
            except Exception as exc:  # a failing child is the parent's error result
                content, error_type = f"{type(exc).__name__}: {exc}", type(exc).__name__
            else:
                output = result.output
                content = (
                    output
                    if isinstance(output, str)
                    else canonical_bytes(
                        output.model_dump(mode="json") if isinstance(output, BaseModel) else output
                    ).decode()
                )
            head = agent.writer.checkpoint()
            path = agent.trace_path
        if watch.run_id is None:
            raise AgentConfigError(f"sub-agent {self.name!r} did not start a run")
        usage = Usage(input_tokens=watch.input_tokens, output_tokens=watch.output_tokens)
        counted = None
        if self.budget != "own":
            counted = ChildUse(
                requests=watch.requests,
                input_tokens=watch.input_tokens,
                output_tokens=watch.output_tokens,
                tool_calls=watch.calls,
            )
        child = ChildRun(
            run_id=watch.run_id,
            trace=None if path is None else Path(path).name,
            size=head.size,
            root=head.root,
            counted=counted,
        )
        return Delegated(content, error_type, child, usage, watch.calls, watch.requests)


class _Watch:
    """Sees the child's events as they are recorded: its run id, and its tool calls that ran
    (counted against a shared budget). The trace is the same with or without it."""

    def __init__(self, agent: Agent[Any]) -> None:
        self.run_id: RunId | None = None
        self.calls = 0
        self.requests = 0
        self.input_tokens = 0
        self.output_tokens = 0
        agent._tap = self

    def __call__(self, body: EventBody) -> None:
        if isinstance(body, RunStarted):
            self.run_id = body.run_id
        elif isinstance(body, ModelRequested):
            self.requests += 1
        elif isinstance(body, ModelResponded):
            # Every reply's, a failed run's too: a shared budget counts what was spent.
            self.input_tokens += body.response.usage.input_tokens
            self.output_tokens += body.response.usage.output_tokens
        elif body.kind == "tool_called":
            self.calls += 1


def _least(*values: int | None) -> int | None:
    known = [v for v in values if v is not None]
    return min(known) if known else None


def _split(limits: ChildLimits, budget: Literal["shared"] | Split) -> ChildLimits:
    """What the parent has left, and no more than a split's part of it."""
    if budget == "shared":
        return limits
    return ChildLimits(
        tool_calls=_least(limits.tool_calls, budget.tool_calls),
        tokens=_least(limits.tokens, budget.tokens),
        requests=_least(limits.requests, budget.steps),
    )


def _bound(agent: Agent[Any], limits: ChildLimits) -> None:
    """Bound the child by what the parent has left; its ``run_started`` records the result."""
    policy = agent.policy
    if limits.tool_calls is not None:
        own = policy.max_tool_calls
        left = limits.tool_calls if own is None else min(own, limits.tool_calls)
        agent.policy = policy.model_copy(update={"max_tool_calls": left})
    if limits.tokens is not None:
        own_tokens = agent.usage_limits.total_tokens
        tokens = limits.tokens if own_tokens is None else min(own_tokens, limits.tokens)
        agent.usage_limits = agent.usage_limits.model_copy(update={"total_tokens": tokens})
    if limits.requests is not None:
        # At least 1: a call is denied before it starts once the parent has none left.
        requests = _least(agent.usage_limits.requests, max(limits.requests, 1))
        agent.usage_limits = agent.usage_limits.model_copy(update={"requests": requests})
    agent._configure(agent.config.model)


def delegate_for(agent: Agent[Any], state: RunState) -> Delegate:
    """How ``agent``'s run ``state`` runs its sub-agent calls: beside its trace, a shared or
    split budget bounded by what the run has left and its use counted against the run."""
    return Delegate(agent, state)


class _LiveChildren:
    """The recorded child runs of a trace being replayed live, served in call order."""

    def __init__(self, directory: Path, recorded: Sequence[ToolReturned]) -> None:
        self._directory = directory
        self._recorded: Iterator[ToolReturned] = iter(recorded)
        self.divergence: ReplayDivergenceError | None = None
        """A child's divergence, named by its link: the parent's replay reports it first."""

    def replay(self, tool: AgentTool) -> Delegated:
        """Replay the next recorded child live with ``tool``'s agent: its tools run again and
        every event is compared with its trace; the parent gets the recorded result.

        Raises:
            AgentError: The parent's record has no further child run, or it is not a file.
            ReplayDivergenceError: The child's re-run differs from its trace (the parent's
                replay stops there).
        """
        recorded = next(self._recorded, None)
        if recorded is None or recorded.child is None:
            raise AgentError(
                f"the re-run called sub-agent {tool.name!r} more often than the recorded run did"
            )
        child = recorded.child
        if child.trace is None:
            raise AgentError(
                f"sub-agent {tool.name!r}: the recorded child run {child.run_id} has no trace "
                "file (its parent wrote to memory); it cannot be replayed live"
            )
        agent = tool._build(MemoryTraceSink())
        with agent, _serving(None):
            try:
                agent.replay(self._directory / child.trace, mode="live")
            except ReplayDivergenceError as exc:
                self.divergence = ReplayDivergenceError(
                    f"sub-agent {tool.name!r} (child trace {child.trace}, run {child.run_id}): "
                    f"{exc}",
                    seq=exc.seq,
                    expected=exc.expected,
                    actual=exc.actual,
                )
                raise self.divergence from None
        used = child.counted
        return Delegated(
            recorded.result.content,
            recorded.error_type,
            child,
            Usage(
                input_tokens=0 if used is None else used.input_tokens,
                output_tokens=0 if used is None else used.output_tokens,
            ),
            0 if used is None else used.tool_calls,
            0 if used is None else used.requests,
        )


_LIVE: ContextVar[_LiveChildren | None] = ContextVar("twinflow_live_children", default=None)
"""Set while a trace is replayed live: its sub-agent calls replay their recorded children."""


@contextlib.contextmanager
def _serving(live: _LiveChildren | None) -> Iterator[_LiveChildren | None]:
    token = _LIVE.set(live)
    try:
        yield live
    finally:
        _LIVE.reset(token)


def replaying_children(
    directory: Path | None, recorded: Sequence[ToolReturned]
) -> contextlib.AbstractContextManager[_LiveChildren | None]:
    """For a live replay: sub-agent calls replay the recorded children (``recorded``, the
    trace's results that name one) from ``directory`` instead of starting new runs.

    Raises:
        AgentError: The trace has child runs and no ``directory`` was given.
    """
    children = [r for r in recorded if r.child is not None]
    if not children:
        return _serving(None)
    if directory is None:
        raise AgentError(
            "the trace records sub-agent runs: a live replay needs the trace's file (its "
            "children's traces are beside it), not its bytes"
        )
    return _serving(_LiveChildren(directory, children))
