"""The one base of eval's values (cases, scores, results, reports)."""

from __future__ import annotations

from twinflow.eval._errors import EvalValueError
from twinflow.vocab import FrozenValue

__all__ = ["EvalValue"]


class EvalValue(FrozenValue):
    """Frozen, no extra fields, `EvalValueError` (never a bare pydantic error) on bad input."""

    _invalid_error = EvalValueError
