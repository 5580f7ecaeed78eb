"""The errors of twinflow.eval; the tree is drawn in the package docstring."""

from __future__ import annotations

from twinflow.trace import TwinflowError, UserError

__all__ = [
    "DatasetError",
    "EvalError",
    "EvalValueError",
    "PlanError",
    "PlanMismatchError",
    "RunAborted",
    "RunDirError",
    "ScorerError",
    "ShardError",
    "TraceMismatchError",
]


class EvalError(TwinflowError):
    """Root of the eval harness's errors."""


class DatasetError(EvalError, UserError):
    """A dataset file that cannot be used; the message names the file, line and key."""


class RunDirError(EvalError, UserError):
    """A run directory that is missing, belongs to another dataset, or does not hold together."""


class TraceMismatchError(EvalError):
    """A trace a run directory's results name is missing, does not verify, or is not the trace
    the results recorded (its checkpoint differs): the results cannot be trusted as they are."""


class ShardError(EvalError, UserError):
    """A bad shard spec, or shard directories that do not make up one run."""


class ScorerError(EvalError, UserError):
    """A scorer that cannot be built (an unknown dotted path, a bad argument)."""


class EvalValueError(EvalError, UserError, ValueError):
    """A case, scorer, score or result record was constructed with a bad field; the message
    names the class and the field. (Reading a file reports its own error: `DatasetError`,
    `RunDirError`.)"""


class PlanError(EvalError, UserError):
    """A plan file or a rule that cannot be used: malformed, tampered, or naming unknown metrics."""


class PlanMismatchError(EvalError, UserError):
    """A run that is not the one its plan registered (another dataset, spec or scorers)."""


class RunAborted(EvalError):
    """The run stopped because the model could not be reached; finished cases are kept."""
