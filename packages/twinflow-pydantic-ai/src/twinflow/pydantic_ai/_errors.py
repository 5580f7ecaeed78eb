"""The one error of twinflow.pydantic_ai; a failure is a ``reason`` tag on it::

    TwinflowError                 root of every twinflow error (twinflow.trace)
    └── RecordingError            a pydantic-ai run the recorder or the replay cannot carry on
                                  (`.reason`: unsupported, diverged, exhausted, trace)
"""

from __future__ import annotations

from typing import Literal

from twinflow.trace import TwinflowError

__all__ = ["RecordingError", "RecordingFailure"]

RecordingFailure = Literal["unsupported", "diverged", "exhausted", "trace"]
"""Why: the run uses a feature a trace cannot represent (nothing of that request is written or
sent); a replayed request differs from the recorded one; the replay asked for more requests
than were recorded; the recorded trace does not verify or is not a pydantic-ai recording."""


class RecordingError(TwinflowError):
    """A pydantic-ai run that cannot be recorded or replayed as it stands.

    Attributes:
        reason: Which failure (`RecordingFailure`).
        seq: The trace event where a replay diverged or stopped (None otherwise).
    """

    def __init__(self, message: str, *, reason: RecordingFailure, seq: int | None = None) -> None:
        super().__init__(message)
        self.reason: RecordingFailure = reason
        self.seq = seq
