"""The errors of twinflow.agent; the whole tree is drawn in the package docstring.

Errors raised by the injected model (a connection failure from the kernel's transport, for
example) are recorded in the trace as ``run_failed`` and re-raised unchanged: never wrapped,
never retried, never swallowed.
"""

from __future__ import annotations

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
    "McpContentInvalid",
    "McpOutputInvalid",
    "McpRequestRefused",
    "McpToolError",
    "McpToolFailed",
    "OutputValidationFailed",
    "RunError",
    "SignatureError",
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
    """An MCP tool call gave no usable result; the run records it as the call's error result."""


class McpToolError(McpToolFailed):
    """The server answered that the call failed (``isError``); the message is its text."""


class McpContentInvalid(McpToolFailed):
    """The call's content has a block that maps onto no part (an unknown type, bad base64) or
    weighs more than the server's limit."""


class McpOutputInvalid(McpToolFailed):
    """The call's ``structuredContent`` does not match the tool's ``outputSchema``."""


class McpRequestRefused(McpToolFailed):
    """The server asked to call back into the run (sampling, elicitation) during the call."""
