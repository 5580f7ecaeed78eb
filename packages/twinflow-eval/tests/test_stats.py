"""Wilson intervals and the exact McNemar test against known values."""

from __future__ import annotations

import pytest

from twinflow.eval import mcnemar_exact, wilson_interval


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
