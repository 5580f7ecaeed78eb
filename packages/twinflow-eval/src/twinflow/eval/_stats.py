"""Small statistics, exact and dependency-free: Wilson intervals, the exact McNemar test, the
paired cluster bootstrap of a rate difference, and the per-case comparison of two runs."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Literal

from pydantic import JsonValue

from twinflow._base._files import read_inside
from twinflow.agent import RunStarted, Trace
from twinflow.agent._events import Environment
from twinflow.eval._errors import TraceMismatchError
from twinflow.eval._frozen import EvalValue
from twinflow.eval._observe import observe
from twinflow.eval._results import CaseResult, EvalResults, RunManifest, read_json_model
from twinflow.eval._trials import Z95
from twinflow.trace import TraceCorruptError

__all__ = [
    "BOOTSTRAP_RESAMPLES",
    "FEW_CASES",
    "Comparison",
    "PairedBootstrap",
    "RunSide",
    "ScorerDelta",
    "compare_results",
    "compare_runs",
    "mcnemar_exact",
    "paired_bootstrap",
    "splitmix64",
    "wilson_interval",
]

FEW_DISCORDANT = 10
"""Below this many discordant pairs a McNemar test cannot show much: `Comparison.caveat` says
so. The p-value is the exact binomial one at every size, never the chi-squared approximation
(which needs about 10 or more discordant pairs to be close)."""


def wilson_interval(successes: int, total: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval for a proportion (95% by default); (0, 1) when ``total`` is 0."""
    if total == 0:
        return (0.0, 1.0)
    p = successes / total
    denominator = 1 + z * z / total
    centre = (p + z * z / (2 * total)) / denominator
    half = z * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total)) / denominator
    return (max(0.0, centre - half), min(1.0, centre + half))


BOOTSTRAP_RESAMPLES = 10_000
"""Resamples of a paired bootstrap: enough for a stable 95% percentile interval."""

FEW_CASES = 20
"""Below this many paired cases a percentile bootstrap interval covers less than it says:
`PairedBootstrap.caveat` says so."""

_MASK = (1 << 64) - 1


def splitmix64(seed: int) -> Iterator[int]:
    """The SplitMix64 generator (Steele, Lea and Flood 2014; Vigna's reference C code): 64-bit
    outputs that are the same for the same seed in every process and Python version, which
    `random.Random`'s derived draws do not promise."""
    state = seed & _MASK
    while True:
        state = (state + 0x9E3779B97F4A7C15) & _MASK
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
        yield z ^ (z >> 31)


class PairedBootstrap(EvalValue):
    """A 95% interval on B's rate minus A's, resampling cases (with their trials) in pairs."""

    low: float
    """The 2.5th percentile of the resampled differences."""
    high: float
    """The 97.5th percentile."""
    cases: int
    """Paired cases resampled (the clusters)."""
    resamples: int
    """Resamples drawn."""
    seed: int
    """The generator's seed: the same seed gives the same interval, anywhere."""
    method: Literal["paired cluster bootstrap, percentile, by case (SplitMix64)"] = (
        "paired cluster bootstrap, percentile, by case (SplitMix64)"
    )
    """How the interval is computed (docs/adr/0121)."""
    caveat: str | None = None
    """Why the interval says little here (too few cases), if it does."""


def paired_bootstrap(
    pairs: Sequence[tuple[str, bool, bool]],
    *,
    seed: int = 0,
    resamples: int = BOOTSTRAP_RESAMPLES,
) -> PairedBootstrap | None:
    """The percentile interval of B's pass rate minus A's over ``(case, passed_a, passed_b)``
    pairs, resampling whole cases with replacement (a case's trials stay together).

    None when there is no pair.
    """
    by_case: dict[str, list[int]] = {}
    for case, a, b in pairs:
        row = by_case.setdefault(case, [0, 0])
        row[0] += int(b) - int(a)
        row[1] += 1
    if not by_case:
        return None
    sums = [d for d, _ in by_case.values()]
    sizes = [n for _, n in by_case.values()]
    count = len(sums)
    draws = splitmix64(seed)
    differences = []
    for _ in range(resamples):
        total = trials = 0
        for _ in range(count):
            # Lemire's multiply-shift: an index in [0, count) from 64 random bits.
            index = (next(draws) * count) >> 64
            total += sums[index]
            trials += sizes[index]
        differences.append(total / trials)
    differences.sort()
    caveat = None
    if count < FEW_CASES:
        caveat = (
            f"only {count} paired case(s): a percentile bootstrap needs about {FEW_CASES} or "
            "more to cover what it says; read the interval as rough"
        )
    return PairedBootstrap(
        low=_percentile(differences, 0.025),
        high=_percentile(differences, 0.975),
        cases=count,
        resamples=resamples,
        seed=seed,
        caveat=caveat,
    )


def _percentile(ordered: Sequence[float], q: float) -> float:
    """The ``q`` quantile of sorted values, interpolated linearly (numpy's default method)."""
    position = q * (len(ordered) - 1)
    below = math.floor(position)
    above = min(below + 1, len(ordered) - 1)
    return ordered[below] + (ordered[above] - ordered[below]) * (position - below)


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
    """Why the McNemar p-value says little here (too few discordant pairs, or trials of one
    case counted as independent pairs), if it does."""
    rate_delta: float = 0.0
    """B's pass rate minus A's over the paired keys."""
    bootstrap: PairedBootstrap | None = None
    """The paired cluster bootstrap interval on ``rate_delta`` (None: nothing paired)."""
    environment_differences: tuple[str, ...] = ()
    """How B's environment differs from A's (interpreter, platform, distributions, model,
    spec and module digests; each side's first recorded one), one line each."""


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


def _caveat(discordant: int, paired: int, cases: int) -> str | None:
    notes = []
    if discordant == 0:
        notes.append(
            "no discordant pairs: the runs agree on every paired case, the test has nothing to weigh"
        )
    elif discordant < FEW_DISCORDANT:
        notes.append(
            f"only {discordant} discordant pair(s): the exact binomial p is used, but fewer than "
            f"{FEW_DISCORDANT} are too few to conclude either way (a large p is not evidence of "
            "no difference)"
        )
    if paired > cases:
        notes.append(
            f"the {paired} paired trials come from {cases} cases: McNemar counts them as "
            "independent, which trials of one case are not; read the bootstrap interval, which "
            "resamples cases"
        )
    return "; ".join(notes) or None


def compare_results(
    a: EvalResults,
    b: EvalResults,
    outputs_a: Mapping[str, JsonValue] | None = None,
    outputs_b: Mapping[str, JsonValue] | None = None,
    *,
    side_a: RunSide | None = None,
    side_b: RunSide | None = None,
    seed: int = 0,
    environments: tuple[Environment | None, Environment | None] = (None, None),
) -> Comparison:
    """Pair two runs' results by case key and test the difference (exact McNemar, and a paired
    bootstrap interval resampling cases).

    Args:
        a: The baseline run's results.
        b: The new run's results.
        outputs_a: Each case's output in A (keys missing: not compared).
        outputs_b: The same for B.
        side_a: What A is a run of (its dataset, spec and model), to say whether they differ.
        side_b: The same for B.
        seed: The bootstrap's seed (recorded in the comparison).
        environments: A's and B's environments (`run_started`), when known.
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
    rate_a = sum(passed_a[k] for k in paired) / n if n else 0.0
    rate_b = sum(passed_b[k] for k in paired) / n if n else 0.0
    pairs = [(by_key_a[k].case_id, passed_a[k], passed_b[k]) for k in paired]
    cases = len({case for case, _, _ in pairs})
    return Comparison(
        regressions=regressions,
        improvements=improvements,
        both_passed=sum(1 for k in paired if passed_a[k] and passed_b[k]),
        both_not_passed=sum(1 for k in paired if not passed_a[k] and not passed_b[k]),
        only_in_a=tuple(k for k in passed_a if k not in passed_b),
        only_in_b=tuple(k for k in passed_b if k not in passed_a),
        p_value=mcnemar_exact(len(regressions), len(improvements)),
        pass_rate_a=rate_a,
        pass_rate_b=rate_b,
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
        caveat=_caveat(len(regressions) + len(improvements), n, cases),
        rate_delta=rate_b - rate_a,
        bootstrap=paired_bootstrap(pairs, seed=seed),
        environment_differences=_environment_differences(*environments),
    )


def _environment_differences(a: Environment | None, b: Environment | None) -> tuple[str, ...]:
    if a is None and b is None:
        return ()
    if a is None or b is None:
        return (
            f"environment: {'recorded' if a else 'not recorded'} -> "
            f"{'recorded' if b else 'not recorded'}",
        )
    return a.differences(b)


def _outputs(
    run_dir: Path, results: EvalResults
) -> tuple[dict[str, JsonValue], Environment | None]:
    """Each scored case's accepted output, read from its verified trace, and the environment
    the first of them records."""
    out: dict[str, JsonValue] = {}
    environment: Environment | None = None
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
        started = next(iter(trace.events)).body
        if environment is None and isinstance(started, RunStarted):
            environment = started.environment
    return out, environment


def compare_runs(a: str | Path, b: str | Path, *, seed: int = 0) -> Comparison:
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
    outputs_a, environment_a = _outputs(run_a, results_a)
    outputs_b, environment_b = _outputs(run_b, results_b)
    return compare_results(
        results_a,
        results_b,
        outputs_a,
        outputs_b,
        side_a=RunSide.of(results_a, _manifest(run_a)),
        side_b=RunSide.of(results_b, _manifest(run_b)),
        seed=seed,
        environments=(environment_a, environment_b),
    )


def _manifest(run_dir: Path) -> RunManifest | None:
    path = run_dir / "run.json"
    return read_json_model(path, RunManifest) if path.exists() else None
