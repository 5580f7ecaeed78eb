"""The one base of eval's values (cases, scores, results, reports)."""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from twinflow.eval._errors import EvalValueError
from twinflow.vocab import FrozenValue

__all__ = ["EvalValue"]


class EvalValue(FrozenValue):
    """Frozen, no extra fields, `EvalValueError` (never a bare pydantic error) on bad input."""

    # Declared again: mypy reads a class attribute holding a class with its own __init__ as a
    # method otherwise.
    _invalid_error: ClassVar[Callable[[str], Exception]] = EvalValueError
