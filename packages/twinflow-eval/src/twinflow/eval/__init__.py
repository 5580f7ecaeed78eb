"""twinflow.eval (L3): datasets, scorers, the runner, offline rescoring, Lab Notes reports.

Every score is computed from a verified trace, so anyone holding a run directory can check
it: `rescore` verifies each trace and scores it again without a model.

Errors::

    TwinflowError                                      (twinflow.vocab)
    └── EvalError
        ├── DatasetError (also a UserError)            a dataset file that cannot be used (file:line: key: why)
        ├── RunDirError (also a UserError)             a run directory that is missing, foreign or inconsistent
        ├── ShardError (also a UserError)              a bad ``--shard i/n`` or shards that do not fit together
        ├── TraceMismatchError                         a trace the results name is missing, unverified or not the recorded one
        ├── ScorerError (also a UserError)             a scorer spec that cannot be built (unknown dotted path...)
        ├── PlanError (also a UserError)               a plan file or decision rule that cannot be used (malformed, tampered)
        ├── PlanMismatchError (also a UserError)       a run that is not the one its plan registered
        ├── EvalValueError (also UserError, ValueError)  a case, scorer, score or result built with a bad field
        └── RunAborted                                 the model could not be reached; finished cases are kept

A run's own failures (`twinflow.agent.RunError`, the kernel's `TransportError`) are recorded per
case; replaying a case in `rescore` may raise the agent's `ReplayDivergenceError`.
"""

from twinflow.eval._dataset import MAX_TRIALS, Case, Dataset, load_dataset
from twinflow.eval._details import CaseDetail as CaseDetail
from twinflow.eval._details import RunFacts as RunFacts
from twinflow.eval._details import read_details as read_details
from twinflow.eval._errors import (
    DatasetError,
    EvalError,
    EvalValueError,
    RunAborted,
    RunDirError,
    ScorerError,
    ShardError,
    TraceMismatchError,
)
from twinflow.eval._judge import (
    JudgeVerdict,
    JudgeWiring,
    Judging,
    judge_agent,
    judge_prompt,
    verdict_type,
)
from twinflow.eval._lab_notes import render_html as render_html
from twinflow.eval._lab_notes import write_reports as write_reports
from twinflow.eval._observe import Observation, ToolCallRecord, observe
from twinflow.eval._plan import (
    METRICS,
    Plan,
    PlanError,
    PlanMismatchError,
    PlanOutcome,
    ReadPlan,
    Rule,
    check_plan,
    judge_plan,
    make_plan,
    parse_rule,
    read_plan,
    run_metrics,
    scorers_digest,
    write_plan,
)
from twinflow.eval._report import render_markdown as render_markdown
from twinflow.eval._rescore import load_run as load_run
from twinflow.eval._rescore import merge_runs as merge_runs
from twinflow.eval._rescore import rescore as rescore
from twinflow.eval._results import (
    SEED_STRIDE,
    CaseResult,
    CaseStatus,
    EvalResults,
    RunIdentity,
    RunManifest,
    Shard,
    Summary,
    case_key,
    select_keys,
    trial_seed,
    trials_of,
)
from twinflow.eval._runner import (
    AgentFactory,
    Progress,
    check_plan_slot,
    code_modules,
    pending_keys,
    run_eval,
)
from twinflow.eval._scorers import (
    Custom,
    ExactMatch,
    ExpectedCall,
    FieldMatch,
    Judge,
    JudgementLink,
    NoDeniedCalls,
    NumericTolerance,
    SchemaValid,
    Score,
    ScorerSpec,
    ToolCalls,
    matches,
    score_all,
)
from twinflow.eval._scoring import score_trace as score_trace
from twinflow.eval._stats import (
    BOOTSTRAP_RESAMPLES,
    FEW_CASES,
    Comparison,
    PairedBootstrap,
    RunSide,
    ScorerDelta,
    compare_results,
    compare_runs,
    mcnemar_exact,
    paired_bootstrap,
    splitmix64,
    wilson_interval,
)
from twinflow.eval._trials import (
    CaseTrials,
    TrialStats,
    clustered_stderr,
    pass_at_k,
    pass_hat_k,
    trial_stats,
)

__all__ = [
    "BOOTSTRAP_RESAMPLES",
    "FEW_CASES",
    "MAX_TRIALS",
    "METRICS",
    "SEED_STRIDE",
    "AgentFactory",
    "Case",
    "CaseDetail",
    "CaseResult",
    "CaseStatus",
    "CaseTrials",
    "Comparison",
    "Custom",
    "Dataset",
    "DatasetError",
    "EvalError",
    "EvalResults",
    "EvalValueError",
    "ExactMatch",
    "ExpectedCall",
    "FieldMatch",
    "Judge",
    "JudgeVerdict",
    "JudgeWiring",
    "JudgementLink",
    "Judging",
    "NoDeniedCalls",
    "NumericTolerance",
    "Observation",
    "PairedBootstrap",
    "Plan",
    "PlanError",
    "PlanMismatchError",
    "PlanOutcome",
    "Progress",
    "ReadPlan",
    "Rule",
    "RunAborted",
    "RunDirError",
    "RunFacts",
    "RunIdentity",
    "RunManifest",
    "RunSide",
    "SchemaValid",
    "Score",
    "ScorerDelta",
    "ScorerError",
    "ScorerSpec",
    "Shard",
    "ShardError",
    "Summary",
    "ToolCallRecord",
    "ToolCalls",
    "TraceMismatchError",
    "TrialStats",
    "case_key",
    "check_plan",
    "check_plan_slot",
    "clustered_stderr",
    "code_modules",
    "compare_results",
    "compare_runs",
    "judge_agent",
    "judge_plan",
    "judge_prompt",
    "load_dataset",
    "load_run",
    "make_plan",
    "matches",
    "mcnemar_exact",
    "merge_runs",
    "observe",
    "paired_bootstrap",
    "parse_rule",
    "pass_at_k",
    "pass_hat_k",
    "pending_keys",
    "read_details",
    "read_plan",
    "render_html",
    "render_markdown",
    "rescore",
    "run_eval",
    "run_metrics",
    "score_all",
    "score_trace",
    "scorers_digest",
    "select_keys",
    "splitmix64",
    "trial_seed",
    "trial_stats",
    "trials_of",
    "verdict_type",
    "wilson_interval",
    "write_plan",
    "write_reports",
]
