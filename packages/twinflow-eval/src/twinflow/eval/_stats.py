"""Small statistics, exact and dependency-free: Wilson intervals, the exact McNemar test, and
the per-case comparison of two runs."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

from pydantic import JsonValue

from twinflow.agent import Trace
from twinflow.eval._errors import TraceMismatchError
from twinflow.eval._frozen import EvalValue
from twinflow.eval._observe import observe
from twinflow.eval._results import CaseResult, EvalResults, RunManifest, read_json_model
from twinflow.trace import TraceCorruptError, read_inside

__all__ = [
    "Comparison",
    "RunSide",
    "ScorerDelta",
    "compare_results",
    "compare_runs",
    "mcnemar_exact",
    "wilson_interval",
]

FEW_DISCORDANT = 10
"""Below this many discordant pairs a McNemar test cannot show much: `Comparison.caveat` says
so. The p-value is the exact binomial one at every size, never the chi-squared approximation
(which needs about 10 or more discordant pairs to be close)."""

Z95 = 1.959963984540054
"""The 97.5th percentile of the standard normal distribution."""


def wilson_interval(successes: int, total: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval for a proportion (95% by default); (0, 1) when ``total`` is 0."""
    if total == 0:
        return (0.0, 1.0)
    p = successes / total
    denominator = 1 + z * z / total
    centre = (p + z * z / (2 * total)) / denominator
    half = z * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total)) / denominator
    return (max(0.0, centre - half), min(1.0, centre + half))


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value for ``b`` and ``c`` discordant pairs (binomial, p = 1/2)."""
    n = b + c
    if n == 0:
        return 1.0
    k = min(b, c)
    tail: float = sum(math.comb(n, i) for i in range(k + 1)) / 2**n
    return min(1.0, 2 * tail)


class RunSide(EvalValue):
    """What one side of a comparison is a run of: its dataset, spec and model."""

    dataset: str
    """The dataset's name and the start of its digest."""
    spec: str
    """The start of the run spec's digest (``not recorded`` for runs made before it was)."""
    model: str
    """The model's identity as the run recorded it."""

    @classmethod
    def of(cls, results: EvalResults, manifest: RunManifest | None) -> RunSide:
        """The side ``results`` (and its run's ``run.json``, if there is one) describe."""
        identity = manifest.identity if manifest is not None else None
        spec = identity.spec_digest if identity is not None else None
        model = identity.model if identity is not None else None
        return cls(
            dataset=f"{results.dataset} {results.dataset_digest[:12]}",
            spec="not recorded" if spec is None else spec[:12],
            model=model or "not recorded",
        )


class ScorerDelta(EvalValue):
    """One scorer's pass counts in A and B over the paired case repeats that it scored."""

    scorer: str
    """The scorer's label."""
    scored: int
    """Paired case repeats both runs scored with it."""
    passed_a: int
    """Of those, passed in A."""
    passed_b: int
    """Of those, passed in B."""

    @property
    def delta(self) -> float:
        """B's pass rate minus A's, for this scorer."""
        return (self.passed_b - self.passed_a) / self.scored if self.scored else 0.0


class Comparison(EvalValue):
    """How run B differs from run A, case repeat by case repeat."""

    regressions: tuple[str, ...]
    """Keys that passed in A and do not in B."""
    improvements: tuple[str, ...]
    """Keys that did not pass in A and pass in B."""
    both_passed: int
    """Keys passing in both."""
    both_not_passed: int
    """Keys passing in neither."""
    only_in_a: tuple[str, ...]
    """Keys A has and B lacks."""
    only_in_b: tuple[str, ...]
    """Keys B has and A lacks."""
    p_value: float
    """Exact McNemar two-sided p-value over the paired keys."""
    pass_rate_a: float
    """A's pass rate over the paired keys."""
    pass_rate_b: float
    """B's pass rate over the paired keys."""
    reasons_changed: tuple[str, ...] = ()
    """Paired keys whose verdict is the same but whose reasons are not (a scorer's outcome or
    detail, the run's error, the trace's problem): "still failing, differently"."""
    outputs_changed: tuple[str, ...] = ()
    """Paired keys whose accepted output differs (read from the traces; `compare_runs` only)."""
    side_a: RunSide | None = None
    """What A is a run of (None when not given)."""
    side_b: RunSide | None = None
    """What B is a run of."""
    differs: tuple[str, ...] = ()
    """Which of dataset, spec and model differ between A and B (empty: the same, or unknown)."""
    scorers: tuple[ScorerDelta, ...] = ()
    """Each scorer's pass counts in both runs, in the order A first names them."""
    caveat: str | None = None
    """Why the McNemar p-value says little here (too few discordant pairs), if it does."""


def _reasons(result: CaseResult) -> tuple[object, ...]:
    scores = tuple((s.scorer, s.outcome, s.detail) for s in result.scores)
    return (result.status, scores, result.error, result.problem)


def _scorer_deltas(
    paired: list[str], by_key_a: Mapping[str, CaseResult], by_key_b: Mapping[str, CaseResult]
) -> tuple[ScorerDelta, ...]:
    counts: dict[str, list[int]] = {}
    for key in paired:
        in_b = {s.scorer: s.outcome == "passed" for s in by_key_b[key].scores}
        for score in by_key_a[key].scores:
            if score.scorer in in_b:
                row = counts.setdefault(score.scorer, [0, 0, 0])
                row[0] += 1
                row[1] += score.outcome == "passed"
                row[2] += in_b[score.scorer]
    return tuple(
        ScorerDelta(scorer=name, scored=n, passed_a=pa, passed_b=pb)
        for name, (n, pa, pb) in counts.items()
    )


def _caveat(discordant: int) -> str | None:
    if discordant == 0:
        return "no discordant pairs: the runs agree on every paired case, the test has nothing to weigh"
    if discordant < FEW_DISCORDANT:
        return (
            f"only {discordant} discordant pair(s): the exact binomial p is used, but fewer than "
            f"{FEW_DISCORDANT} are too few to conclude either way (a large p is not evidence of "
            "no difference)"
        )
    return None


def compare_results(
    a: EvalResults,
    b: EvalResults,
    outputs_a: Mapping[str, JsonValue] | None = None,
    outputs_b: Mapping[str, JsonValue] | None = None,
    *,
    side_a: RunSide | None = None,
    side_b: RunSide | None = None,
) -> Comparison:
    """Pair two runs' results by case key and test the difference (exact McNemar).

    Args:
        a: The baseline run's results.
        b: The new run's results.
        outputs_a: Each case's output in A (keys missing: not compared).
        outputs_b: The same for B.
        side_a: What A is a run of (its dataset, spec and model), to say whether they differ.
        side_b: The same for B.
    """
    by_key_a = {r.key: r for r in a.cases}
    by_key_b = {r.key: r for r in b.cases}
    outputs_a, outputs_b = outputs_a or {}, outputs_b or {}
    passed_a = {r.key: r.status == "passed" for r in a.cases}
    passed_b = {r.key: r.status == "passed" for r in b.cases}
    paired = [k for k in passed_a if k in passed_b]
    regressions = tuple(k for k in paired if passed_a[k] and not passed_b[k])
    improvements = tuple(k for k in paired if passed_b[k] and not passed_a[k])
    n = len(paired)
    return Comparison(
        regressions=regressions,
        improvements=improvements,
        both_passed=sum(1 for k in paired if passed_a[k] and passed_b[k]),
        both_not_passed=sum(1 for k in paired if not passed_a[k] and not passed_b[k]),
        only_in_a=tuple(k for k in passed_a if k not in passed_b),
        only_in_b=tuple(k for k in passed_b if k not in passed_a),
        p_value=mcnemar_exact(len(regressions), len(improvements)),
        pass_rate_a=sum(passed_a[k] for k in paired) / n if n else 0.0,
        pass_rate_b=sum(passed_b[k] for k in paired) / n if n else 0.0,
        reasons_changed=tuple(
            k
            for k in paired
            if passed_a[k] == passed_b[k] and _reasons(by_key_a[k]) != _reasons(by_key_b[k])
        ),
        outputs_changed=tuple(
            k for k in paired if k in outputs_a and k in outputs_b and outputs_a[k] != outputs_b[k]
        ),
        side_a=side_a,
        side_b=side_b,
        differs=tuple(
            what
            for what in ("dataset", "spec", "model")
            if side_a is not None
            and side_b is not None
            and getattr(side_a, what) != getattr(side_b, what)
        ),
        scorers=_scorer_deltas(paired, by_key_a, by_key_b),
        caveat=_caveat(len(regressions) + len(improvements)),
    )


def _outputs(run_dir: Path, results: EvalResults) -> dict[str, JsonValue]:
    """Each scored case's accepted output, read from its verified trace."""
    out: dict[str, JsonValue] = {}
    for result in results.cases:
        if result.status == "flagged":  # its trace did not verify when scored: no output
            continue
        where = f"{run_dir}/results.json: case {result.key}"
        try:
            data = read_inside(run_dir, result.trace, what="results.json")
        except FileNotFoundError:
            raise TraceMismatchError(
                f"{where} names the trace {result.trace!r:.200}, which is missing; "
                "compare needs every scored case's trace"
            ) from None
        try:
            trace = Trace.load(data)
        except TraceCorruptError as exc:
            raise TraceMismatchError(
                f"{where}: its trace {result.trace!r:.200} does not verify "
                f"({exc.report.problem}); it was altered after it was scored"
            ) from None
        actual = trace.checkpoint()
        recorded = result.checkpoint
        if (actual.size, actual.root) != (recorded.size, recorded.root):
            raise TraceMismatchError(
                f"{where}: its trace {result.trace!r:.200} (size {actual.size}, root "
                f"(hex) {actual.root[:12]}) is not the one the results recorded (size "
                f"{recorded.size}, root (hex) {recorded.root[:12]}); a trace or the results were "
                "replaced"
            )
        out[result.key] = observe(trace).output
    return out


def compare_runs(a: str | Path, b: str | Path) -> Comparison:
    """`compare_results` over two run directories' ``results.json``, their traces verified.

    Every case that was scored (not flagged) must have its trace, inside its run directory, and
    the trace must verify and be the one the results recorded (same size and Merkle root): a
    comparison of results whose traces were altered or removed would compare nothing.

    Raises:
        RunDirError: A directory has no valid ``results.json``.
        UnsafePathError: ``results.json`` names a trace outside its directory or through a link.
        TraceMismatchError: A scored case's trace is missing, does not verify, or differs.
    """
    run_a, run_b = Path(a), Path(b)
    results_a = read_json_model(run_a / "results.json", EvalResults)
    results_b = read_json_model(run_b / "results.json", EvalResults)
    return compare_results(
        results_a,
        results_b,
        _outputs(run_a, results_a),
        _outputs(run_b, results_b),
        side_a=RunSide.of(results_a, _manifest(run_a)),
        side_b=RunSide.of(results_b, _manifest(run_b)),
    )


def _manifest(run_dir: Path) -> RunManifest | None:
    path = run_dir / "run.json"
    return read_json_model(path, RunManifest) if path.exists() else None
