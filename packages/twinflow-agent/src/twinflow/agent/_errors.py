"""The errors of twinflow.agent; the whole tree is drawn in the package docstring.

Errors raised by the injected model (a connection failure from the kernel's transport, for
example) are recorded in the trace as ``run_failed`` and re-raised unchanged: never wrapped,
never retried, never swallowed.
"""

from __future__ import annotations

from typing import Literal

from twinflow.trace import (
    InvalidProofError,
    SignatureError,
    TraceCorruptError,
    TraceError,
    TwinflowError,
    UserError,
)
from twinflow.vocab import Attempt

__all__ = [
    "AgentConfigError",
    "AgentError",
    "InvalidModelReply",
    "InvalidProofError",
    "MaxStepsExceeded",
    "McpToolFailed",
    "OutputValidationFailed",
    "RunError",
    "SignatureError",
    "SpecError",
    "TraceCorruptError",
    "TraceError",
    "UsageLimitExceeded",
]


class AgentError(TwinflowError):
    """Root of every twinflow.agent error."""


class AgentConfigError(AgentError, UserError):
    """A usage mistake in tools, policy or agent configuration; fix the call site."""


class RunError(AgentError):
    """A run ended without an output; the trace holds a ``run_failed`` event for it."""


class MaxStepsExceeded(RunError):
    """The model was still calling tools when ``max_steps`` ran out."""


class UsageLimitExceeded(RunError):
    """A usage limit (requests or tokens) was exceeded."""


class OutputValidationFailed(RunError):
    """The structured output did not validate within the allowed attempts."""


class InvalidModelReply(RunError):
    """The model's reply cannot be acted on: no valid action within its attempts, or a tool
    call that repeats an id. Nothing of it ran; ``attempts`` holds the refused replies (each is
    also an ``output_rejected`` event in the trace)."""

    def __init__(self, message: str, attempts: tuple[Attempt, ...] = ()) -> None:
        """Carry the refused attempts along with the message."""
        super().__init__(message)
        self.attempts = attempts


class McpToolFailed(AgentError):
    """An MCP tool call gave no usable result; the run records it as the call's error result.

    ``reason`` says which: ``"error"`` (the server marked the result ``isError``; the message
    is its text), ``"content_invalid"`` (a content block maps onto no part, or the content
    weighs more than the server's limit), ``"output_invalid"`` (``structuredContent`` does not
    match the tool's ``outputSchema``), ``"request_refused"`` (the server asked to call back
    into the run, sampling or elicitation, during the call).
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
