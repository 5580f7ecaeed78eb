"""The command's errors; the tree is drawn in the package docstring."""

from __future__ import annotations

from typing import Any, Literal

from twinflow.trace import TwinflowError

__all__ = ["CheckFailed", "CliError"]


class CliError(TwinflowError):
    """A command refused its input (exit 2); ``reason`` says why: ``unreadable_trace`` (the
    file is not a twinflow trace at all: missing, empty, another format)."""

    def __init__(self, message: str, reason: Literal["unreadable_trace"] = "unreadable_trace"):
        """Carry why the command refused."""
        super().__init__(message)
        self.reason = reason


class CheckFailed(CliError):
    """A check the user asked for did not pass (exit 1). ``payload`` is the ``--json`` output."""

    def __init__(self, message: str, payload: dict[str, Any] | None = None) -> None:
        """Carry the ``--json`` document of the failed check."""
        super().__init__(message)
        self.payload = payload or {}
