"""The tool policy, deny by default, and the runner that applies it to each call.

For each tool call the model asks for, in this order: an unknown tool is denied; a tool not
allowed by name (or named in ``ask``) is denied; arguments that fail validation are denied; a
call over the per-tool or per-run budget is denied; then a person's recorded decision (for a
tool in ``ask``) or else the approval hook, if any, approves, denies or modifies the arguments
(which are validated again). Only then does the function run. Every
decision is a `PolicyDecided` event with its reason; every outcome, denials and raising
tools included, is a `ToolReturned` event and an error result the model sees.
"""

from __future__ import annotations

import contextlib
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import ConfigDict, Discriminator, Field, JsonValue, ValidationError

from twinflow.agent._errors import CannotResume, RunPaused
from twinflow.agent._events import (
    ApprovalDecided,
    ChildRun,
    EventBody,
    PolicyDecided,
    PolicyRecord,
    ToolCalled,
    ToolReturned,
    _Frozen,
)
from twinflow.agent._inputs import InputAsker
from twinflow.agent._subagent import AgentTool, ChildLimits, Delegate
from twinflow.agent._tools import Tool

# validation_error_text: the one rendering of a refusal, shared with models.
from twinflow.vocab import Part, TextPart, ToolCallPart, ToolResultPart
from twinflow.vocab._reask import validation_error_text

__all__ = [
    "Approval",
    "ApprovalHook",
    "Approve",
    "Deny",
    "Modify",
    "Policy",
    "RecordedResults",
    "ToolRunner",
]


class Approve(_Frozen):
    """The approval hook lets the call run as asked."""

    kind: Literal["approve"] = "approve"
    """Union tag."""
    reason: str = "approved by the approval hook"
    """Why."""


class Deny(_Frozen):
    """The approval hook refuses the call."""

    kind: Literal["deny"] = "deny"
    """Union tag."""
    reason: str
    """Why; the model sees it."""


class Modify(_Frozen):
    """The approval hook lets the call run with other arguments (validated again)."""

    kind: Literal["modify"] = "modify"
    """Union tag."""
    arguments: dict[str, JsonValue]
    """The arguments to run with instead."""
    reason: str = "arguments modified by the approval hook"
    """Why."""


Approval = Annotated[Approve | Deny | Modify, Discriminator("kind")]
"""What an approval hook decides."""

ApprovalHook = Callable[[ToolCallPart], Approve | Deny | Modify]
"""Called with each call that passed the automatic rules, before it runs."""


class Policy(_Frozen):
    """Which tools may run, how often, and with whose approval. Deny by default."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    allow: frozenset[str] = frozenset()
    """Tool names allowed to run; every other tool is denied."""
    per_tool_budget: Mapping[str, int] = Field(default_factory=dict)
    """Calls allowed per tool in one run (tools not named here: no per-tool limit)."""
    max_tool_calls: int | None = Field(default=None, ge=0)
    """Tool calls allowed in one run, all tools together; None for no limit."""
    approval: ApprovalHook | None = None
    """Hook deciding on each call the automatic rules allowed."""
    max_output_chars: int = Field(default=16_000, ge=1)
    """Tool output above this many characters is cut, with a marker saying how much."""
    include_traceback: bool = False
    """Add the traceback to the error result of a tool that raises."""
    ask: frozenset[str] = frozenset()
    """Tools that run only once a person approves the call: the run stops with
    ``approval_requested`` and goes on when `Agent.resume` is given the decision. Naming a tool
    here allows it (subject to that decision)."""
    repeat_safe: frozenset[str] = frozenset()
    """Tools `Agent.resume` may run again when a crash left a call to them without a result
    (the tool's effect may have happened once already). A call to any other tool left that way
    stops the resume, naming it. Not part of the recorded configuration: it is a permission
    for resuming, and the trace records its use (``run_resumed.repeated_call``)."""

    def record(self) -> PolicyRecord:
        """The policy's data, as recorded in the trace."""
        hook = self.approval
        return PolicyRecord(
            allow=tuple(sorted(self.allow)),
            # The trace's record keeps its own field names: renaming them would change
            # every recorded configuration digest.
            tool_budgets=dict(self.per_tool_budget),
            run_budget=self.max_tool_calls,
            approval=None if hook is None else f"{hook.__module__}.{hook.__qualname__}",
            max_output_chars=self.max_output_chars,
            include_traceback=self.include_traceback,
            ask=tuple(sorted(self.ask)),
        )

    def allows(self, name: str) -> bool:
        """Whether calls to ``name`` may run at all (by name, or once a person approves)."""
        return name in self.allow or name in self.ask


Emit = Callable[[EventBody], None]

RecordedResults = Callable[[ToolCallPart], ToolReturned | None]
"""Gives the recorded result of a call, in place of running the tool (replay); None runs the
tool (a resume past its recorded prefix)."""


@dataclass(frozen=True, slots=True)
class _Permit:
    """The call may run: with these validated arguments, on whose word and why."""

    tool: Tool
    kwargs: dict[str, object]
    by: Literal["policy", "approval"]
    reason: str
    modified: dict[str, JsonValue] | None
    """The approval hook's replacement arguments, if it changed them."""


@dataclass(frozen=True, slots=True)
class _Refusal:
    """The call is denied: the error type and reason the model sees, and who decided."""

    error_type: str
    reason: str
    by: Literal["policy", "approval"] = "policy"


class ToolRunner:
    """Applies a policy to tool calls for one run (it holds that run's budgets)."""

    def __init__(
        self,
        tools: Mapping[str, Tool],
        policy: Policy,
        emit: Emit,
        *,
        recorded: RecordedResults | None = None,
        decisions: Mapping[str, ApprovalDecided] | None = None,
        before_call: Callable[[], None] | None = None,
        delegate: Delegate | None = None,
        inputs: InputAsker | None = None,
    ) -> None:
        """Start a run's tool runner.

        Args:
            tools: Registered tools by name.
            policy: The policy.
            emit: Receives each event (decision, call, result) in order.
            recorded: If given, allowed calls are answered with the recorded result instead
                of running the tool (replay's recorded mode).
            decisions: A person's decisions on calls to tools in ``policy.ask``, by call id
                (the agent pauses the run before a call without one reaches the runner).
            before_call: Called after a call's ``tool_called`` is emitted and before the tool
                runs (the agent hands the trace's buffered lines to the operating system
                there, so a process that dies inside the tool leaves the call on record).
            delegate: Runs a sub-agent tool's call (`AgentTool`) for the run.
            inputs: Answers an MCP call's forms for the run (records them; pauses the run
                for a person's answer), and serves a recorded call's requests and answers.
        """
        self._delegate = delegate
        self._inputs = inputs
        self._tools = tools
        self._before_call = before_call
        self._policy = policy
        self._emit = emit
        self._recorded = recorded
        self._decisions = decisions if decisions is not None else {}
        self._used: dict[str, int] = {}
        self._used_total = 0
        self.decided = 0
        """Calls decided so far in this run."""
        self.refused: dict[tuple[str, str], int] = {}
        """Calls refused so far, counted by (tool name, error type)."""

    def may_call(self, name: str) -> bool:
        """Whether a call to ``name`` could still run: its budgets are not used up.

        The agent offers the model only such tools, so a model that keeps calling a tool
        whose budget is spent is not invited to. Tools the policy does not allow are still
        offered: denying them, with a reason the model sees, is the policy's job.
        """
        return self._spent(name) is None

    def _spent(self, name: str) -> str | None:
        """Why a call to ``name`` is over budget, or None while both budgets allow it."""
        policy = self._policy
        budget = policy.per_tool_budget.get(name)
        if budget is not None and self._used.get(name, 0) >= budget:
            return f"tool {name!r} budget of {budget} calls is used up"
        if policy.max_tool_calls is not None and self._used_total >= policy.max_tool_calls:
            return f"run budget of {policy.max_tool_calls} tool calls is used up"
        tool = self._tools.get(name)
        if isinstance(tool, AgentTool) and self._delegate is not None:
            return self._delegate.spent(tool)
        return None

    def served(
        self, name: str, arguments: dict[str, JsonValue] | None = None, content: str | None = None
    ) -> None:
        """Count a call to ``name`` that ran in the run's served steps (a fork's parent's), and
        hand a sandboxed tool its recorded call (``arguments``, result ``content``)."""
        self._used[name] = self._used.get(name, 0) + 1
        self._used_total += 1
        tool = self._tools.get(name)
        if tool is not None and arguments is not None and content is not None:
            with contextlib.suppress(ValidationError):
                self._restore(tool, tool.validate(arguments), content)

    @staticmethod
    def _restore(tool: Tool, kwargs: dict[str, object], content: str) -> None:
        # A sandboxed tool rebuilds its work directory from recorded calls when it next runs.
        restore = getattr(tool.function, "twinflow_recorded", None)
        if restore is not None:
            restore(kwargs, content)

    def run(self, call: ToolCallPart) -> ToolResultPart:
        """Decide on one call, run it if allowed, and return the result the model sees.

        Args:
            call: The model's tool call.

        Returns:
            The result part (an error result for every refusal or failure).
        """
        decided = self._decide(call)
        self.decided += 1
        if isinstance(decided, _Refusal):
            key = (call.name, decided.error_type)
            self.refused[key] = self.refused.get(key, 0) + 1
            return self._deny(call, decided.error_type, decided.reason, by=decided.by)
        self._emit(
            PolicyDecided(
                call_id=call.id,
                tool=call.name,
                decision="allow",
                by=decided.by,
                reason=decided.reason,
                arguments=decided.modified,
            )
        )
        self._used[call.name] = self._used.get(call.name, 0) + 1
        self._used_total += 1
        arguments = call.arguments if decided.modified is None else decided.modified
        self._emit(ToolCalled(call_id=call.id, tool=call.name, arguments=arguments))
        return self._call(call, decided)

    def _call(self, call: ToolCallPart, decided: _Permit) -> ToolResultPart:
        """Run an allowed call (or serve its recorded result); a raising tool is an error result."""
        returned = None if self._recorded is None else self._recorded(call)
        if returned is not None:
            self._restore(decided.tool, decided.kwargs, returned.result.content)
            if self._inputs is not None:
                for body in self._inputs.served(call.id):
                    self._emit(body)
            counted = None if returned.child is None else returned.child.counted
            if counted is not None and self._delegate is not None:
                # A served child's use counts against the run as it did when it ran.
                self._used_total += counted.tool_calls
                self._delegate.count(counted)
            self._emit(returned)
            return returned.result
        if self._before_call is not None:
            self._before_call()
        tool = decided.tool
        if isinstance(tool, AgentTool) and self._delegate is not None:
            left = self._policy.max_tool_calls
            done = self._delegate(
                tool,
                str(decided.kwargs["prompt"]),
                ChildLimits(tool_calls=None if left is None else left - self._used_total),
            )
            if tool.budget != "own":
                self._used_total += done.tool_calls
            return self._result(call, done.content, done.error_type, child=done.child)
        asking = getattr(tool, "call_asking", None)
        try:
            if asking is not None and self._inputs is not None:
                output = asking(decided.kwargs, self._inputs.for_call(call.id, call.name))
            else:
                output = tool.call(decided.kwargs)
        except (RunPaused, CannotResume):
            raise  # the run waits for a person's answer, or cannot go on: not the call's result
        except Exception as exc:  # a raising tool is a result the model sees, never a crash
            message = f"{type(exc).__name__}: {exc}"
            if self._policy.include_traceback:
                message += "\n" + "".join(traceback.format_exception(exc))
            return self._result(call, message, type(exc).__name__)
        if isinstance(output, str):
            return self._result(call, output, None)
        text = "\n".join(p.text for p in output if isinstance(p, TextPart))
        return self._result(call, text, None, output)

    def _decide(self, call: ToolCallPart) -> _Permit | _Refusal:
        """The rules in the module docstring's order; the first refusal decides."""
        tool = self._tools.get(call.name)
        if tool is None:
            known = ", ".join(sorted(self._tools)) or "none"
            return _Refusal("UnknownTool", f"no tool named {call.name!r} (tools: {known})")
        if not self._policy.allows(call.name):
            return _Refusal("ToolDenied", f"tool {call.name!r} is not allowed by the policy")
        try:
            kwargs = tool.validate(call.arguments)
        except ValidationError as exc:
            return _Refusal(
                "InvalidArguments",
                f"arguments for {call.name!r} are invalid:\n{validation_error_text(exc)}",
            )
        spent = self._spent(call.name)
        if spent is not None:
            return _Refusal("BudgetExceeded", spent)
        if call.name in self._policy.ask:
            decided = self._decisions.get(call.id)
            if decided is None:
                # The agent pauses before any call of a reply that waits reaches here.
                raise AssertionError(f"call {call.id} reached the runner without a decision")
            if decided.decision == "deny":
                return _Refusal(
                    "ToolDenied", f"denied by {decided.by}: {decided.reason}", "approval"
                )
            return _Permit(
                tool, kwargs, "approval", f"approved by {decided.by}: {decided.reason}", None
            )
        hook = self._policy.approval
        if hook is None:
            return _Permit(tool, kwargs, "policy", "allowed by name", None)
        verdict: object = hook(call)
        if isinstance(verdict, Approve):
            return _Permit(tool, kwargs, "approval", verdict.reason, None)
        if isinstance(verdict, Deny):
            return _Refusal("ToolDenied", verdict.reason, "approval")
        if not isinstance(verdict, Modify):
            # Deny by default: only an explicit Approve or Modify lets a call run.
            return _Refusal(
                "ToolDenied",
                f"the approval hook returned {type(verdict).__name__}, not Approve, Deny or Modify",
                "approval",
            )
        try:
            kwargs = tool.validate(verdict.arguments)
        except ValidationError as exc:
            return _Refusal(
                "InvalidArguments",
                f"modified arguments for {call.name!r} are invalid:\n{validation_error_text(exc)}",
                "approval",
            )
        return _Permit(tool, kwargs, "approval", verdict.reason, verdict.arguments)

    def _deny(
        self,
        call: ToolCallPart,
        error_type: str,
        reason: str,
        *,
        by: Literal["policy", "approval"] = "policy",
    ) -> ToolResultPart:
        self._emit(
            PolicyDecided(call_id=call.id, tool=call.name, decision="deny", by=by, reason=reason)
        )
        return self._result(call, f"{error_type}: {reason}", error_type)

    def _result(
        self,
        call: ToolCallPart,
        content: str,
        error_type: str | None,
        parts: tuple[Part, ...] = (),
        *,
        child: ChildRun | None = None,
    ) -> ToolResultPart:
        # The cap is on text, wherever the model reads it: ``content``, and the text parts a
        # result with more than text carries (an adapter sends those, not ``content``). Its
        # other parts are bounded by the tool that made them.
        cap = self._policy.max_output_chars
        cut = max(0, len(content) - cap)
        if cut:
            marker = f"[truncated: {cut} more characters]"
            content = content[:cap] + "\n" + marker
            parts = _capped_text(parts, cap, marker)
        result = ToolResultPart(
            call_id=call.id,
            name=call.name,
            content=content,
            is_error=error_type is not None,
            parts=parts,
        )
        self._emit(
            ToolReturned(result=result, error_type=error_type, truncated_chars=cut, child=child)
        )
        return result


def _capped_text(parts: tuple[Part, ...], cap: int, marker: str) -> tuple[Part, ...]:
    """``parts`` with their text cut to ``cap`` characters in all (counting the newline that
    joins two text parts, as ``content`` does), ``marker`` where the cut is; others kept."""
    kept: list[Part] = []
    room = cap
    for part in parts:
        if not isinstance(part, TextPart):
            kept.append(part)
        elif room > len(part.text):
            kept.append(part)
            room -= len(part.text) + 1
        elif room >= 0:
            head = part.text[: max(room, 0)]
            kept.append(TextPart(text=f"{head}\n{marker}" if head else marker))
            room = -1
    return tuple(kept)
