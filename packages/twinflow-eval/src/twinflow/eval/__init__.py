"""twinflow.eval (L3): datasets, scorers, the runner, offline rescoring, Lab Notes reports.

Every score is computed from a verified trace, so anyone holding a run directory can check
it: `twinflow eval rescore` verifies each trace and scores it again without a model.

Errors::

    TwinflowError                                      (twinflow.trace)
    └── EvalError
        ├── DatasetError (also a UserError)            a dataset file that cannot be used (file:line: key: why)
        ├── RunDirError (also a UserError)             a run directory that is missing, foreign or inconsistent
        │                                              (`.reason`: "run_dir"; "shards", shards that do not fit together)
        ├── TraceMismatchError                         a trace the results name is missing, unverified or not the recorded one
        ├── PlanError (also a UserError)               a plan that cannot be used (`.reason`: "plan", malformed or
        │                                              tampered; "mismatch", a run that is not the one it registered)
        ├── EvalValueError (also UserError, ValueError)  a case, scorer, score, shard or result built with a bad field
        │                                              (`.reason`: "value", a bad ``--shard i/n`` too; "scorer", a
        │                                              scorer that cannot be built: unknown dotted path...)
        └── RunAborted                                 the model could not be reached; finished cases are kept

The names here are what a user or a plug-in author calls: the dataset and its cases, the
scorers, running a dataset and its results. Resuming, merging, rescoring and comparing runs,
a run's plan, the statistics, the reports and the trace observations are the `twinflow eval`
command's: they stay in private modules the command reads (it is released with this package),
and ``TraceMismatchError`` and ``PlanError`` come only from them.

A run's own failures (`twinflow.agent.RunError`, the kernel's `TransportError`) are recorded per
case; replaying a case in `rescore` may raise the kernel's `ReplayDivergenceError`.
"""

from twinflow.eval._dataset import Case as Case
from twinflow.eval._dataset import Dataset as Dataset
from twinflow.eval._dataset import load_dataset as load_dataset
from twinflow.eval._errors import DatasetError as DatasetError
from twinflow.eval._errors import EvalError as EvalError
from twinflow.eval._errors import EvalValueError as EvalValueError
from twinflow.eval._errors import RunAborted as RunAborted
from twinflow.eval._errors import RunDirError as RunDirError
from twinflow.eval._results import CaseResult as CaseResult
from twinflow.eval._results import EvalResults as EvalResults
from twinflow.eval._results import Summary as Summary
from twinflow.eval._runner import AgentFactory as AgentFactory
from twinflow.eval._runner import run_eval as run_eval
from twinflow.eval._scorers import Custom as Custom
from twinflow.eval._scorers import ExactMatch as ExactMatch
from twinflow.eval._scorers import FieldMatch as FieldMatch
from twinflow.eval._scorers import Judge as Judge
from twinflow.eval._scorers import NoDeniedCalls as NoDeniedCalls
from twinflow.eval._scorers import NumericTolerance as NumericTolerance
from twinflow.eval._scorers import SchemaValid as SchemaValid
from twinflow.eval._scorers import Score as Score
from twinflow.eval._scorers import ScorerSpec as ScorerSpec
from twinflow.eval._scorers import ToolCalls as ToolCalls
