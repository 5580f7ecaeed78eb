"""The one "did you mean" helper: every place that looks a name up suggests the closest one.

A mistyped spec key, dataset key, command, tool, scorer or attribute name gets the same
suggestion, worded the same way, from here.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = ["did_you_mean"]


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """A suffix suggesting the known name closest to ``name``, or ``""`` if none is close.

    Args:
        name: The name that was not found.
        known: The names that exist.

    Returns:
        ``" (did you mean 'x'?)"``, ready to append to an error message, or ``""``.
    """
    close = difflib.get_close_matches(name, [str(k) for k in known], n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""
