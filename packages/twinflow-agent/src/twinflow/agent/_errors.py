"""The errors of twinflow.agent; the whole tree is drawn in the package docstring.

Errors raised by the injected model (a connection failure from the kernel's transport, for
example) are recorded in the trace as ``run_failed`` and re-raised unchanged: never wrapped,
never retried, never swallowed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from twinflow.trace import (
    InvalidProofError,
    SignatureError,
    TraceCorruptError,
    TraceError,
    TwinflowError,
    UserError,
)
from twinflow.vocab import Attempt

if TYPE_CHECKING:
    from twinflow.agent._resume import Paused

__all__ = [
    "RECORDED_AS",
    "AgentConfigError",
    "AgentError",
    "CannotResume",
    "InvalidProofError",
    "McpToolFailed",
    "RecordedFailure",
    "RunError",
    "RunFailure",
    "RunPaused",
    "SignatureError",
    "SpecError",
    "TraceCorruptError",
    "TraceError",
]


class AgentError(TwinflowError):
    """Root of every twinflow.agent error."""


class AgentConfigError(AgentError, UserError):
    """A usage mistake in tools, policy or agent configuration; fix the call site."""


RunFailure = Literal["max_steps", "usage_limit", "output_invalid", "invalid_reply", "recorded"]
"""Why a run ended without an output (`RunError.reason`)."""

RECORDED_AS: dict[RunFailure, str] = {
    "max_steps": "MaxStepsExceeded",
    "usage_limit": "UsageLimitExceeded",
    "output_invalid": "OutputValidationFailed",
    "invalid_reply": "InvalidModelReply",
}


class RunError(AgentError):
    """A run ended without an output; the trace holds a ``run_failed`` event for it.

    ``reason`` says why: ``"max_steps"`` (the model was still calling tools when ``max_steps``
    ran out), ``"usage_limit"`` (a request or token limit was crossed), ``"output_invalid"``
    (the structured output did not validate within the allowed attempts), ``"invalid_reply"``
    (a reply the loop cannot act on: no valid action within its attempts, a part of an
    undeclared kind, or a tool call that repeats an id; nothing of it ran, and ``attempts``
    holds the refused replies, each also an ``output_rejected`` event in the trace), or
    ``"recorded"`` (replay: the recorded run failed here, `RecordedFailure`).
    """

    def __init__(
        self,
        message: str,
        *,
        reason: RunFailure,
        attempts: tuple[Attempt, ...] = (),
    ) -> None:
        """Carry why the run failed, and any refused attempts, along with the message."""
        super().__init__(message)
        self.reason = reason
        self.attempts = attempts

    @property
    def error_type(self) -> str:
        """The name ``run_failed.error_type`` records for this failure.

        Each reason keeps the name traces have always recorded for it, so a recorded run
        still replays byte for byte and resume still reads its failure the same way.
        """
        return RECORDED_AS.get(self.reason, type(self).__name__)


class RecordedFailure(RunError):
    """Raised by the replaying model where the recorded run failed (its type name and message)."""

    def __init__(self, message: str) -> None:
        """Fail as the recorded run did; the recorded name is this class's (made by replay)."""
        super().__init__(message, reason="recorded")


class CannotResume(AgentError, UserError):
    """The trace cannot be continued as it is (finished, failed for good, a call left
    mid-tool that is not safe to repeat, a decision for a call that is not waiting); nothing
    was written.

    ``reason`` is ``"in_flight"`` when a tool call has no result recorded (it may have taken
    effect: a caller must not run the case again from the start either); for a turn sent to a
    run that cannot take one, ``"failed"``, ``"paused"`` (waits for a decision) or
    ``"unfinished"`` (stopped mid-turn: resume it); else ``"not_resumable"``.
    """

    def __init__(self, message: str, *, reason: str = "not_resumable") -> None:
        """Create the error with its message and reason tag."""
        super().__init__(message)
        self.reason = reason


class RunPaused(AgentError):
    """The run stopped to wait for a person's decision on the calls in ``.paused.pending``
    (or for answers to the forms an MCP server asked for during a call); the trace ends with
    their ``approval_requested`` (``input_requested``) events, and `Agent.resume` with
    ``decisions=`` goes on from there."""

    def __init__(self, message: str, paused: Paused) -> None:
        """Carry the pause along with the message."""
        super().__init__(message)
        self.paused = paused


class McpToolFailed(AgentError):
    """An MCP tool call gave no usable result; the run records it as the call's error result.

    ``reason`` says which: ``"error"`` (the server marked the result ``isError``; the message
    is its text), ``"content_invalid"`` (a content block maps onto no part, or the content
    weighs more than the server's limit), ``"output_invalid"`` (``structuredContent`` does not
    match the tool's ``outputSchema``), ``"request_refused"`` (the server asked to call back
    into the run during the call: sampling, roots, an elicitation before 2026-07-28 or a URL
    one), ``"input_required"`` (a 2026-07-28 server asked for a form's input during a call made
    outside a run, with no ``answer``: a run pauses instead), ``"answer_invalid"`` (a
    callback's answer does not match the form's schema),
    ``"input_rounds"`` (the server kept asking past ``McpTools.max_input_rounds``).
    """

    def __init__(self, message: str, *, reason: str) -> None:
        """Carry why the call's result is unusable along with the message."""
        super().__init__(message)
        self.reason = reason


class SpecError(AgentError, UserError):
    """A run spec that cannot be used: unreadable, not YAML, a key with a bad value, a tool or
    output model that does not resolve; or, with ``reason="code_changed"``, a module a recorded
    run imported that is no longer the file that ran (``module`` names it)."""

    def __init__(
        self,
        message: str,
        reason: Literal["invalid", "code_changed"] = "invalid",
        module: str | None = None,
    ) -> None:
        """Carry why the spec was refused, and the changed module if that is why."""
        super().__init__(message)
        self.reason = reason
        self.module = module
