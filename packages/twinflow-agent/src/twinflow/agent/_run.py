"""One run's state and the checks a run makes of its configuration and of each reply.

`RunState` is what changes while a run goes (the transcript, the message chain, the counts);
the functions here are the checks the loop applies, each on values it is handed.
"""

from __future__ import annotations

import typing
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Generic

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from twinflow.agent._chain import MessageChain
from twinflow.agent._errors import AgentConfigError, RunError
from twinflow.agent._events import RunFailed, _Frozen
from twinflow.trace import Checkpoint
from twinflow.vocab import (
    ExtensionPart,
    GenericPart,
    Message,
    ModelResponse,
    RunId,
    StructuredPart,
    ToolCallPart,
    ToolSpec,
    Transcript,
    Usage,
)
from twinflow.vocab._reask import validation_error_text

if TYPE_CHECKING:
    from twinflow.agent._policy import ToolRunner
    from twinflow.agent._trace import TraceWriter
from twinflow.vocab import value_bytes as canonical_bytes

__all__ = [
    "Conversation",
    "RunResult",
    "RunState",
    "UsageLimits",
    "bad_output_type",
    "check_arguments",
    "check_call_ids",
    "class_path",
    "emission",
    "failure_reason",
    "over_limit",
    "part_kinds_of",
    "run_failed",
    "typed_parts",
]

# RunResult keeps a TypeVar without a default: pydantic validates an unparametrized generic
# model's field against the default, which would refuse a model output as "not a str".
ResultT = typing.TypeVar("ResultT")


class UsageLimits(_Frozen):
    """Limits on one run's usage; None means no limit."""

    requests: int | None = Field(default=None, ge=1)
    """Model requests, re-asks included."""
    input_tokens: int | None = Field(default=None, ge=0)
    """Prompt tokens, summed over requests."""
    output_tokens: int | None = Field(default=None, ge=0)
    """Generated tokens, summed over requests."""
    total_tokens: int | None = Field(default=None, ge=0)
    """Input plus output tokens."""
    tool_calls: int | None = Field(default=None, ge=0)
    """Tool calls the model made, all tools together (denied ones included)."""
    wall_seconds: float | None = Field(default=None, gt=0)
    """Seconds from ``run_started`` to the latest event, by the clock port (so a replay
    reads the same): waits for a refused request count."""
    cost_usd: float | None = Field(default=None, gt=0)
    """US dollars, summed over the replies' recorded costs (the price table's): a reply whose
    model has no price ends the run, since the limit could not be kept."""

    def record(self) -> dict[str, int | float | None]:
        """The limits as ``run_started`` records them: the first four always, the others only
        when set (configurations recorded before them keep their digests)."""
        dumped = self.model_dump()
        return {k: v for k, v in dumped.items() if k in _RECORDED_ALWAYS or v is not None}


_RECORDED_ALWAYS = ("requests", "input_tokens", "output_tokens", "total_tokens")
_LIMITS = tuple(UsageLimits.model_fields)
"""Every usage limit's name: a run is checked against each (a limit added is never skipped)."""


class RunResult(_Frozen, Generic[ResultT]):
    """What a run produced."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    output: ResultT
    """The validated output (a pydantic model), or the final text for a ``str`` output type."""
    transcript: Transcript
    """The whole conversation."""
    head: Checkpoint
    """Trace checkpoint after the run's last event (signed if the agent has a key)."""
    run_id: RunId
    """The run's id."""
    usage: Usage
    """Total usage."""
    steps: int
    """Model requests made, re-asks included."""
    trace_path: str | None = None
    """The trace file the run was written to; None for a sink that is not a file (memory)."""
    turn: int = 1
    """The conversation's turn this result answers: 1 for the prompt the run started with,
    then one more for each ``Agent.run(prompt, continue_from=...)``."""


class RunState:
    """Mutable state of one run."""

    __slots__ = (
        "call_ids",
        "chain",
        "cost_usd",
        "offered",
        "requests",
        "run_id",
        "sent",
        "step",
        "tool_calls",
        "transcript",
        "turn",
        "unpriced",
        "usage_in",
        "usage_out",
        "waited",
    )

    def __init__(self, run_id: RunId, transcript: Transcript) -> None:
        self.run_id = run_id
        self.transcript = transcript
        self.turn = 1
        self.chain = MessageChain()
        self.call_ids: set[str] = set()
        self.offered: tuple[ToolSpec, ...] = ()
        self.sent = 0
        self.step = 0
        self.requests = 0
        self.usage_in = 0
        self.usage_out = 0
        self.cost_usd = 0.0
        """US dollars of the replies' recorded costs."""
        self.unpriced: str | None = None
        """The model of the first reply without a price (its cost unknown), if any."""
        self.waited = 0.0
        self.tool_calls = 0
        """Seconds waited before sending refused requests again (`model_waited`)."""

    def usage(self) -> Usage:
        """The run's usage so far."""
        return Usage(input_tokens=self.usage_in, output_tokens=self.usage_out)


class Conversation:
    """A run between its turns: its state, the tool runner holding its budgets, the writer
    its trace goes on in (a next turn continues in process only through that writer), and the
    checkpoint after its last turn."""

    __slots__ = ("head", "runner", "state", "writer")

    def __init__(self, state: RunState, runner: ToolRunner, writer: TraceWriter) -> None:
        self.state = state
        self.runner = runner
        self.writer = writer
        self.head: Checkpoint | None = None


def emission(message: Message) -> str:
    """The raw text a structured output is validated from."""
    for part in message.parts:
        if isinstance(part, StructuredPart):
            return canonical_bytes(part.value).decode()
    return message.text


def class_path(cls: type) -> str:
    """``module:QualName`` of a class; vocab's own kinds under their public module."""
    module = cls.__module__
    if module.startswith("twinflow.vocab._"):
        module = "twinflow.vocab"
    return f"{module}:{cls.__qualname__}"


def part_kinds_of(classes: Sequence[type[ExtensionPart]]) -> dict[str, type[ExtensionPart]]:
    """The declared extension kinds by name, sorted (so the record does not depend on order).

    Raises:
        AgentConfigError: Not an `ExtensionPart` subclass with its own kind, or a kind twice.
    """
    kinds: dict[str, type[ExtensionPart]] = {}
    for index, cls in enumerate(classes):
        if (
            not isinstance(cls, type)
            or not issubclass(cls, ExtensionPart)
            or cls in (ExtensionPart, GenericPart)
            or issubclass(cls, GenericPart)
        ):
            raise AgentConfigError(
                f"part_kinds[{index}]: {cls!r} is not an extension part class (a subclass of "
                "twinflow.vocab.ExtensionPart declaring its kind)"
            )
        kind = cls.model_fields["kind"].default
        if kind in kinds:
            raise AgentConfigError(
                f"part_kinds[{index}]: kind {kind!r} is declared twice ({class_path(kinds[kind])} "
                f"and {class_path(cls)})"
            )
        kinds[kind] = cls
    return dict(sorted(kinds.items()))


def bad_output_type(output_type: object) -> AgentConfigError:
    """The error for an output type that is neither ``str`` nor a pydantic model class."""
    return AgentConfigError(
        f"output_type must be str or a pydantic model class, not {output_type!r}"
    )


def check_arguments(max_steps: int, output_type: object) -> None:
    """Refuse a ``max_steps`` below 1, and an output type that is neither ``str`` nor a
    pydantic model class.

    Raises:
        AgentConfigError: Saying which.
    """
    if max_steps < 1:
        raise AgentConfigError(f"max_steps must be at least 1, not {max_steps}")
    if output_type is not str and not (
        isinstance(output_type, type) and issubclass(output_type, BaseModel)
    ):
        raise bad_output_type(output_type)


def typed_parts(
    part_kinds: dict[str, type[ExtensionPart]], state: RunState, response: ModelResponse
) -> ModelResponse:
    """Refuse a reply holding a part of an extension kind the run did not declare.

    A declared kind read back from a trace (a resume's or a fork's recorded replies) is a
    `GenericPart`: it is typed here with the declared class, so the adapters see the
    plugin's own fallback when the conversation is sent on. The bytes are the same.

    Raises:
        RunError (``invalid_reply``): A part of an undeclared kind, or one its class refuses.
    """
    parts = response.message.parts
    typed: list[Any] = []
    for part in parts:
        if isinstance(part, ExtensionPart):
            cls = part_kinds.get(part.kind)
            if cls is None:
                declared = ", ".join(part_kinds) or "none"
                raise RunError(
                    f"run {state.run_id}: the model's reply at step {state.step} holds a "
                    f"{part.kind!r} part, a kind this run did not declare (declared: "
                    f"{declared}); name its class in part_kinds where the agent is built",
                    reason="invalid_reply",
                )
            if isinstance(part, GenericPart):
                part = _declared_part(cls, part, state)
        typed.append(part)
    if all(a is b for a, b in zip(typed, parts, strict=True)):
        return response
    message = response.message.model_copy(update={"parts": tuple(typed)})
    return response.model_copy(update={"message": message})


def _declared_part(cls: type[ExtensionPart], part: GenericPart, state: RunState) -> ExtensionPart:
    try:
        return cls.model_validate({"kind": part.kind, **part.fields})
    except ValidationError as exc:
        raise RunError(
            f"run {state.run_id}: the {part.kind!r} part of the reply at step "
            f"{state.step} is not a valid {class_path(cls)}: "
            f"{'; '.join(validation_error_text(exc).splitlines())}",
            reason="invalid_reply",
        ) from None


def check_call_ids(state: RunState, calls: Sequence[ToolCallPart]) -> None:
    """Refuse a reply reusing a tool-call id, before any of its tools runs.

    Raises:
        RunError (``invalid_reply``): An id used before in this run.
    """
    for call in calls:
        if call.id in state.call_ids:
            raise RunError(
                f"run {state.run_id}: the model's reply at step {state.step} calls "
                f"{call.name!r} with id {call.id!r}, an id already used in this run; no tool "
                "of that reply ran. Tool-call ids must be unique: fix the model adapter",
                reason="invalid_reply",
            )
        state.call_ids.add(call.id)


def failure_reason(exc: BaseException) -> str | None:
    """The stable ``reason`` tag ``run_failed`` records for an error: a transport or file
    error's own (``timeout``, ``blocked``, ``write``...). A `RunError`'s reason is in its
    recorded name already; a replayed failure carries the recorded tag (``recorded_reason``)."""
    reason = getattr(exc, "recorded_reason" if isinstance(exc, RunError) else "reason", None)
    return reason if isinstance(reason, str) else None


def run_failed(state: RunState, exc: BaseException) -> RunFailed:
    """The ``run_failed`` event of a run that ``exc`` ended."""
    return RunFailed(
        run_id=state.run_id,
        steps=state.requests,
        error_type=exc.error_type if isinstance(exc, RunError) else type(exc).__name__,
        message=str(exc),
        reason=failure_reason(exc),
    )


def over_limit(
    limits: UsageLimits, state: RunState, wall: float
) -> tuple[str, int | float, int | float] | None:
    """The first limit the run's usage is over (name, used, limit), or None while each holds."""
    used: dict[str, int | float] = {
        "requests": state.requests,
        "input_tokens": state.usage_in,
        "output_tokens": state.usage_out,
        "total_tokens": state.usage_in + state.usage_out,
        "tool_calls": state.tool_calls,
        "wall_seconds": round(wall, 3),
        "cost_usd": round(state.cost_usd, 10),
    }
    for name in _LIMITS:
        value = used[name]
        limit = getattr(limits, name)
        if limit is not None and value > limit:
            return name, value, limit
    return None
