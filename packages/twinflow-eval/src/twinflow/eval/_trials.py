"""Statistics of repeated trials: pass@k, pass^k and the pass rate's cluster-robust interval.

A run of K trials per case has N = sum of n_i results, but they are not N independent draws:
the trials of one case share its difficulty. The rate's standard error is therefore computed
with the case as the cluster (docs/adr/0120), as inspect_ai's ``stderr(cluster=...)`` does.

- pass@k: the chance that at least one of k trials passes, by the unbiased estimator of Chen
  et al. 2021 ("Evaluating Large Language Models Trained on Code", eq. 1):
  ``1 - C(n - c, k) / C(n, k)`` for a case with c passes in n trials.
- pass^k: the chance that all k trials pass (Yao et al. 2024, "tau-bench"), unbiased as
  ``C(c, k) / C(n, k)``.
- The rate's standard error, clustered by case (Miller 2024, "Adding Error Bars to Evals",
  arXiv:2411.00640, Appendix A, with the finite-cluster factor G / (G - 1)):
  ``SE = sqrt(G / (G - 1) * sum_g (sum_{i in g} (x_i - mean))^2) / N``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal, Protocol

from twinflow.eval._frozen import EvalValue

__all__ = [
    "CaseTrials",
    "TrialStats",
    "clustered_stderr",
    "pass_at_k",
    "pass_hat_k",
    "trial_stats",
]

Z95 = 1.959963984540054
"""The 97.5th percentile of the standard normal distribution."""


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased estimate of pass@k for ``c`` passes in ``n`` trials (Chen et al. 2021).

    Raises:
        ValueError: Not ``0 <= c <= n`` and ``1 <= k <= n``.
    """
    _check(n, c, k)
    if n - c < k:  # every k-subset holds a pass
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """The unbiased estimate of pass^k (all k trials pass) for ``c`` passes in ``n`` trials.

    Raises:
        ValueError: Not ``0 <= c <= n`` and ``1 <= k <= n``.
    """
    _check(n, c, k)
    return math.comb(c, k) / math.comb(n, k)


def _check(n: int, c: int, k: int) -> None:
    if not (0 <= c <= n and 1 <= k <= n):
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n; got n={n}, c={c}, k={k}")


def clustered_stderr(values: Sequence[tuple[str, float]]) -> float | None:
    """The standard error of the mean of ``(cluster, value)`` pairs, clustered by ``cluster``.

    None with fewer than two clusters: one cluster says nothing about the spread between them.
    With one value per cluster it equals the ordinary ``s / sqrt(N)``.
    """
    if not values:
        return None
    mean = sum(v for _, v in values) / len(values)
    sums: dict[str, float] = {}
    for cluster, value in values:
        sums[cluster] = sums.get(cluster, 0.0) + (value - mean)
    groups = len(sums)
    if groups < 2:
        return None
    variance = groups / (groups - 1) * sum(s * s for s in sums.values())
    return math.sqrt(variance) / len(values)


class CaseTrials(EvalValue):
    """One case's trials: how many ran, how many passed, and its pass@k and pass^k."""

    case_id: str
    """The case's id."""
    trials: int
    """Trials with a result."""
    passed: int
    """Of those, passed."""
    pass_at_k: float | None
    """Estimated chance at least one of k trials passes (None: fewer than k trials ran)."""
    pass_hat_k: float | None
    """Estimated chance all k trials pass (None: fewer than k trials ran)."""


class TrialStats(EvalValue):
    """A run's trials in numbers: per case, and the rate with a case-clustered interval."""

    k: int
    """The run's trials per case: the k of pass@k and pass^k."""
    cases: tuple[CaseTrials, ...]
    """Per case, in the order the results list them."""
    rate: float
    """Passed trials over all trials."""
    stderr: float | None
    """The rate's standard error, clustered by case (None with fewer than two cases)."""
    interval: tuple[float, float] | None
    """The rate's 95% interval, ``rate +- 1.96 stderr`` clipped to [0, 1] (None: no stderr)."""
    pass_at_k: float | None
    """Mean pass@k over the cases that ran k trials (None: none did)."""
    pass_hat_k: float | None
    """Mean pass^k over the cases that ran k trials."""
    method: Literal["cluster-robust normal (CR1, by case)"] = "cluster-robust normal (CR1, by case)"
    """How ``interval`` is computed (docs/adr/0120)."""


class _Verdict(Protocol):
    @property
    def case_id(self) -> str: ...

    @property
    def status(self) -> str: ...


def trial_stats(results: Sequence[_Verdict], k: int) -> TrialStats | None:
    """The trial statistics of ``results`` in a run of ``k`` trials per case.

    None when every case has one result and ``k`` is 1: a run without trials reads as before.
    A flagged or errored trial counts as not passed, as in the run's pass rate.
    """
    counts: dict[str, list[int]] = {}
    for result in results:
        row = counts.setdefault(result.case_id, [0, 0])
        row[0] += 1
        row[1] += result.status == "passed"
    if k == 1 and all(n == 1 for n, _ in counts.values()):
        return None
    cases = tuple(
        CaseTrials(
            case_id=case_id,
            trials=n,
            passed=c,
            pass_at_k=pass_at_k(n, c, k) if n >= k else None,
            pass_hat_k=pass_hat_k(n, c, k) if n >= k else None,
        )
        for case_id, (n, c) in counts.items()
    )
    total = sum(n for n, _ in counts.values())
    rate = sum(c for _, c in counts.values()) / total if total else 0.0
    stderr = clustered_stderr([(r.case_id, 1.0 if r.status == "passed" else 0.0) for r in results])
    at_k = [c.pass_at_k for c in cases if c.pass_at_k is not None]
    hat_k = [c.pass_hat_k for c in cases if c.pass_hat_k is not None]
    return TrialStats(
        k=k,
        cases=cases,
        rate=rate,
        stderr=stderr,
        interval=None
        if stderr is None
        else (max(0.0, rate - Z95 * stderr), min(1.0, rate + Z95 * stderr)),
        pass_at_k=sum(at_k) / len(at_k) if at_k else None,
        pass_hat_k=sum(hat_k) / len(hat_k) if hat_k else None,
    )
