"""twinflow.eval (L3): datasets, scorers, the runner, offline rescoring, Lab Notes reports.

Every score is computed from a verified trace, so anyone holding a run directory can check
it: `rescore` verifies each trace and scores it again without a model.
"""

from twinflow.eval._dataset import Case, Dataset, load_dataset
from twinflow.eval._errors import (
    DatasetError,
    EvalError,
    RunAborted,
    RunDirError,
    ScorerError,
    ShardError,
)
from twinflow.eval._observe import Observation, ToolCallRecord, observe
from twinflow.eval._report import (
    CaseDetail,
    RunFacts,
    read_details,
    render_html,
    render_markdown,
    write_reports,
)
from twinflow.eval._results import (
    CaseResult,
    CaseStatus,
    EvalResults,
    RunIdentity,
    RunManifest,
    Shard,
    Summary,
    case_key,
    select_keys,
)
from twinflow.eval._runner import (
    AgentFactory,
    Progress,
    load_run,
    merge_runs,
    rescore,
    run_eval,
    score_trace,
)
from twinflow.eval._scorers import (
    Custom,
    ExactMatch,
    ExpectedCall,
    FieldMatch,
    NoDeniedCalls,
    NumericTolerance,
    SchemaValid,
    Score,
    ScorerSpec,
    ToolCalls,
    matches,
    score_all,
)
from twinflow.eval._stats import (
    Comparison,
    compare_results,
    compare_runs,
    mcnemar_exact,
    wilson_interval,
)
from twinflow.eval._yaml import known_keys, unknown_key_message, yaml_syntax_problem

__all__ = [
    "AgentFactory",
    "Case",
    "CaseDetail",
    "CaseResult",
    "CaseStatus",
    "Comparison",
    "Custom",
    "Dataset",
    "DatasetError",
    "EvalError",
    "EvalResults",
    "ExactMatch",
    "ExpectedCall",
    "FieldMatch",
    "NoDeniedCalls",
    "NumericTolerance",
    "Observation",
    "Progress",
    "RunAborted",
    "RunDirError",
    "RunFacts",
    "RunIdentity",
    "RunManifest",
    "SchemaValid",
    "Score",
    "ScorerError",
    "ScorerSpec",
    "Shard",
    "ShardError",
    "Summary",
    "ToolCallRecord",
    "ToolCalls",
    "case_key",
    "compare_results",
    "compare_runs",
    "known_keys",
    "load_dataset",
    "load_run",
    "matches",
    "mcnemar_exact",
    "merge_runs",
    "observe",
    "read_details",
    "render_html",
    "render_markdown",
    "rescore",
    "run_eval",
    "score_all",
    "score_trace",
    "select_keys",
    "unknown_key_message",
    "wilson_interval",
    "write_reports",
    "yaml_syntax_problem",
]
