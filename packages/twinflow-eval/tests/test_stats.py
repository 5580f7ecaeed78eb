"""Wilson intervals, the exact McNemar test and the paired bootstrap against known values."""

from __future__ import annotations

import math

import pytest

from twinflow.eval._stats import mcnemar_exact, paired_bootstrap, splitmix64, wilson_interval


def test_wilson_interval_known_values() -> None:
    """5/10 gives (0.2366, 0.7634); 0/10 starts at 0; n=0 is the whole unit interval."""
    low, high = wilson_interval(5, 10)
    assert (0.2366, 0.7634) == (round(low, 4), round(high, 4))
    assert (0.0, 0.2775) == tuple(round(x, 4) for x in wilson_interval(0, 10))
    assert (0.0, 1.0) == wilson_interval(0, 0)


def test_mcnemar_exact_known_values() -> None:
    """b=0,c=6 gives 2/64; b=c gives 1; no discordant pairs gives 1; b=1,c=9 gives 22/1024."""
    assert 0.03125 == mcnemar_exact(0, 6)
    assert 1.0 == mcnemar_exact(3, 3)
    assert 1.0 == mcnemar_exact(0, 0)
    assert pytest.approx(22 / 1024) == mcnemar_exact(1, 9)


def test_splitmix64_matches_the_reference_outputs() -> None:
    """Seed 1234567 gives the reference implementation's first five outputs."""
    draws = splitmix64(1234567)
    assert [
        6457827717110365317,
        3203168211198807973,
        9817491932198370423,
        4593380528125082431,
        16408922859458223821,
    ] == [next(draws) for _ in range(5)]


def test_paired_bootstrap_of_a_constant_difference_is_that_difference() -> None:
    """Every case improves by one trial of two: every resample's difference is exactly 0.5."""
    pairs = [(f"c{i}", t == 0, True) for i in range(30) for t in range(2)]
    boot = paired_bootstrap(pairs, seed=7)
    assert boot is not None
    assert (0.5, 0.5, 30, 7, None) == (boot.low, boot.high, boot.cases, boot.seed, boot.caveat)


def test_paired_bootstrap_matches_the_normal_interval_of_a_known_sample() -> None:
    """200 cases with per-case differences +1 (50), -1 (20) and 0 (130): mean 0.15, standard
    error sqrt((0.35 - 0.15^2) / 200) = 0.04047; the percentile interval is 0.15 +- 1.96 * 0.04047
    to within a few resampling errors."""
    pairs = (
        [(f"u{i}", False, True) for i in range(50)]
        + [(f"d{i}", True, False) for i in range(20)]
        + [(f"s{i}", True, True) for i in range(130)]
    )
    boot = paired_bootstrap(pairs, seed=1)
    assert boot is not None
    se = math.sqrt((50 * 0.85**2 + 20 * 1.15**2 + 130 * 0.15**2) / 200 / 200)
    assert 0.04047 == pytest.approx(se, abs=1e-5)
    assert 0.15 - 1.96 * se == pytest.approx(boot.low, abs=0.006)
    assert 0.15 + 1.96 * se == pytest.approx(boot.high, abs=0.006)


def test_paired_bootstrap_is_reproducible_by_its_seed_and_resamples_cases() -> None:
    """The same seed gives the same interval and is recorded; trials of a case move together,
    so ten trials of each of 3 cases are 3 clusters with a small-sample caveat."""
    pairs = [(c, False, c == "a" or t % 2 == 0) for c in "abc" for t in range(10)]
    first, again, other = (paired_bootstrap(pairs, seed=s) for s in (3, 3, 4))
    assert first == again
    assert first is not None and other is not None
    assert (3, 4) == (first.seed, other.seed)
    assert 3 == first.cases
    assert (first.caveat or "").startswith("only 3 paired case(s): a percentile bootstrap needs")
    assert None is paired_bootstrap([])
