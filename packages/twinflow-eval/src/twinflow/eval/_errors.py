"""The errors of twinflow.eval; the tree is drawn in the package docstring."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from twinflow.trace import TwinflowError, UserError

if TYPE_CHECKING:
    from twinflow.eval._scorers import JudgementLink

__all__ = [
    "DatasetError",
    "EvalError",
    "EvalValueError",
    "PlanError",
    "RunAborted",
    "RunDirError",
    "TraceMismatchError",
    "scorer_error",
]


class EvalError(TwinflowError):
    """Root of the eval harness's errors."""


class DatasetError(EvalError, UserError):
    """A dataset file that cannot be used; the message names the file, line and key."""


class RunDirError(EvalError, UserError):
    """A run directory that is missing, belongs to another dataset, or does not hold together.

    Attributes:
        reason: ``"run_dir"``: one run directory is missing, foreign or inconsistent;
            ``"shards"``: shard directories that do not make up one run (another dataset,
            another trial count, a shard missing or twice, an unfinished shard).
    """

    def __init__(self, message: str, *, reason: Literal["run_dir", "shards"] = "run_dir") -> None:
        """Create the error; `message` says what is wrong and what to do."""
        super().__init__(message)
        self.reason = reason


class TraceMismatchError(EvalError):
    """A trace a run directory's results name is missing, does not verify, or is not the trace
    the results recorded (its checkpoint differs): the results cannot be trusted as they are."""


class EvalValueError(EvalError, UserError, ValueError):
    """A case, scorer, score, shard or result record was constructed with a bad field; the
    message names the class and the field. (Reading a file reports its own error:
    `DatasetError`, `RunDirError`.)

    Attributes:
        reason: ``"value"``: a value built with a bad field (a bad ``--shard i/n`` too);
            ``"scorer"``: a scorer that cannot be built (a dotted path that does not resolve,
            a bad argument, a verdict model without its boolean field); ``"budget"``: an eval
            budget that cannot be kept (a key it cannot bound, a cost with no prices).
    """

    def __init__(
        self, message: str, *, reason: Literal["value", "scorer", "budget"] = "value"
    ) -> None:
        """Create the error; `message` says what is wrong and what to do."""
        super().__init__(message)
        self.reason = reason


def scorer_error(message: str) -> EvalValueError:
    """The error for a scorer that cannot be built, as `resolve_dotted` raises it."""
    return EvalValueError(message, reason="scorer")


class PlanError(EvalError, UserError):
    """A plan that cannot be used.

    Attributes:
        reason: ``"plan"``: the plan file or its rule is malformed, tampered, or names unknown
            metrics; ``"mismatch"``: the run is not the one the plan registered (another
            dataset, spec, scorers or trial count).
    """

    def __init__(self, message: str, *, reason: Literal["plan", "mismatch"] = "plan") -> None:
        """Create the error; `message` says what is wrong and what to do."""
        super().__init__(message)
        self.reason = reason


class RunAborted(EvalError):
    """The run stopped because the model could not be reached; finished cases are kept."""


class Unscorable(Exception):
    """A judgement that gives no verdict: the errored score's detail, and its link if any.

    Never leaves the package: the judge scorer records it as the case's errored score.
    """

    def __init__(self, detail: str, link: JudgementLink | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.link = link
