"""twinflow.eval (L3): datasets, scorers, the runner, offline rescoring, Lab Notes reports.

Every score is computed from a verified trace, so anyone holding a run directory can check
it: `rescore` verifies each trace and scores it again without a model.

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

The names here are what a user or the command calls: the dataset and its cases, the scorers,
running, resuming, merging, rescoring and comparing runs, and a run's plan. The statistics,
the reports and the trace observations stay in their private modules.

A run's own failures (`twinflow.agent.RunError`, the kernel's `TransportError`) are recorded per
case; replaying a case in `rescore` may raise the kernel's `ReplayDivergenceError`.
"""

from twinflow.eval._dataset import MAX_TRIALS as MAX_TRIALS
from twinflow.eval._dataset import Case as Case
from twinflow.eval._dataset import Dataset as Dataset
from twinflow.eval._dataset import load_dataset as load_dataset
from twinflow.eval._errors import DatasetError as DatasetError
from twinflow.eval._errors import EvalError as EvalError
from twinflow.eval._errors import EvalValueError as EvalValueError
from twinflow.eval._errors import PlanError as PlanError
from twinflow.eval._errors import RunAborted as RunAborted
from twinflow.eval._errors import RunDirError as RunDirError
from twinflow.eval._errors import TraceMismatchError as TraceMismatchError
from twinflow.eval._judge import JudgeWiring as JudgeWiring
from twinflow.eval._judge import verdict_type as verdict_type
from twinflow.eval._plan import METRICS as METRICS
from twinflow.eval._plan import ReadPlan as ReadPlan
from twinflow.eval._plan import check_plan as check_plan
from twinflow.eval._plan import judge_plan as judge_plan
from twinflow.eval._plan import make_plan as make_plan
from twinflow.eval._plan import read_plan as read_plan
from twinflow.eval._plan import write_plan as write_plan
from twinflow.eval._rescore import load_run as load_run
from twinflow.eval._rescore import merge_runs as merge_runs
from twinflow.eval._rescore import rescore as rescore
from twinflow.eval._results import CaseResult as CaseResult
from twinflow.eval._results import EvalResults as EvalResults
from twinflow.eval._results import RunIdentity as RunIdentity
from twinflow.eval._results import Shard as Shard
from twinflow.eval._results import Summary as Summary
from twinflow.eval._runner import AgentFactory as AgentFactory
from twinflow.eval._runner import check_plan_slot as check_plan_slot
from twinflow.eval._runner import code_modules as code_modules
from twinflow.eval._runner import pending_keys as pending_keys
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
from twinflow.eval._stats import Comparison as Comparison
from twinflow.eval._stats import compare_runs as compare_runs
from twinflow.eval._trials import TrialStats as TrialStats
