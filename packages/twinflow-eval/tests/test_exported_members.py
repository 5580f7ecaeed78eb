"""The public surface of twinflow.eval."""

import twinflow.eval

EXPECTED = {
    "AgentFactory", "Case", "CaseResult", "CaseStatus", "Comparison", "Custom", "Dataset",
    "DatasetError", "EvalError", "EvalResults", "ExactMatch", "ExpectedCall", "FieldMatch",
    "NoDeniedCalls", "NumericTolerance", "Observation", "Progress", "RunAborted", "RunDirError",
    "RunIdentity", "RunManifest", "SchemaValid", "Score", "ScorerError", "ScorerSpec", "Shard", "ShardError",
    "Summary", "ToolCallRecord", "ToolCalls", "case_key", "compare_results", "compare_runs",
    "load_dataset", "load_run", "matches", "mcnemar_exact", "merge_runs", "observe",
    "code_modules", "render_html", "render_markdown", "rescore", "run_eval", "score_all", "score_trace",
    "select_keys", "wilson_interval", "write_reports", "known_keys", "unknown_key_message",
    "yaml_syntax_problem", "yaml_line", "located_problem", "validation_problem", "resolve_dotted", "split_dotted", "CaseDetail", "RunFacts", "read_details",
}  # fmt: skip


def test_all_lists_exactly_the_public_names() -> None:
    """`__all__` names the eval package's public API, each once."""
    assert sorted(EXPECTED) == sorted(twinflow.eval.__all__)


def test_every_exported_name_resolves() -> None:
    """Every name in `__all__` is an attribute of the package."""
    expected: list[str] = []
    assert expected == [n for n in twinflow.eval.__all__ if not hasattr(twinflow.eval, n)]
