"""The errors of twinflow.eval.

```
TwinflowError
└── EvalError
    ├── DatasetError(EvalError, UserError)   a dataset file that cannot be used (file:line: key: why)
    ├── RunDirError(EvalError, UserError)    a run directory that is missing, foreign or inconsistent
    ├── ShardError(EvalError, UserError)     a bad ``--shard i/n`` or shards that do not fit together
    ├── ScorerError(EvalError, UserError)    a scorer spec that cannot be built (unknown dotted path...)
    ├── EvalValueError(EvalError, UserError, ValueError)  a case, score or result built with a bad field
    └── RunAborted(EvalError)                the model could not be reached; finished cases are kept
```
"""

from __future__ import annotations

from twinflow.vocab import TwinflowError, UserError

__all__ = [
    "DatasetError",
    "EvalError",
    "EvalValueError",
    "RunAborted",
    "RunDirError",
    "ScorerError",
    "ShardError",
]


class EvalError(TwinflowError):
    """Root of the eval harness's errors."""


class DatasetError(EvalError, UserError):
    """A dataset file that cannot be used; the message names the file, line and key."""


class RunDirError(EvalError, UserError):
    """A run directory that is missing, belongs to another dataset, or does not hold together."""


class ShardError(EvalError, UserError):
    """A bad shard spec, or shard directories that do not make up one run."""


class ScorerError(EvalError, UserError):
    """A scorer that cannot be built (an unknown dotted path, a bad argument)."""


class EvalValueError(EvalError, UserError, ValueError):
    """A case, scorer, score or result record was constructed with a bad field; the message
    names the class and the field. (Reading a file reports its own error: `DatasetError`,
    `RunDirError`.)"""


class RunAborted(EvalError):
    """The run stopped because the model could not be reached; finished cases are kept."""
