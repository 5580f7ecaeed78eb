"""The command's errors; the tree is drawn in the package docstring."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from twinflow.trace import TwinflowError

if TYPE_CHECKING:
    from twinflow.kernel import ReplayDivergenceError

__all__ = ["CheckFailed", "CliError", "divergence_failed"]


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


def divergence_failed(
    trace_path: Path, what: str, exc: ReplayDivergenceError, **extra: str
) -> CheckFailed:
    """The failed check a divergence is reported as (exit 1): where, both events, the difference."""
    return CheckFailed(
        f"{trace_path}: {what} diverged: {exc}",
        {
            "trace": str(trace_path),
            **extra,
            "seq": exc.seq,
            "expected": exc.expected,
            "actual": exc.actual,
            "pointer": None if exc.difference is None else exc.difference.pointer,
            "difference": None if exc.difference is None else str(exc.difference),
        },
    )
