"""The eval's shared limiter: when most recent model requests were refused for now, the runner
holds off starting cases, instead of every case hammering a server that is limiting it.

Each case's agent retries its own refused requests (``model_waited`` events, ADR 0179); the
limiter reads, from each finished case's trace, how many requests it sent and how many were
refused. When more than half of the last ``window`` requests were refused, the runner waits
before starting the next case: the longest wait a case recorded, doubled while the refusals
go on, at most ``max_hold`` seconds. The wait is the clock port's ``sleep`` and is outside
every case's trace (no case's replay depends on it).
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Callable

from twinflow.eval._dataset import BUDGET_KEYS
from twinflow.eval._errors import EvalValueError
from twinflow.eval._observe import Observation

_REQUESTED = b'"kind":"model_requested"'
_WAITED = b'"kind":"model_waited"'
_WAIT_SECONDS = b'"wait_seconds":'


class SharedLimiter:
    """Counts requests and refusals across cases; holds the runner off while most are refused."""

    def __init__(
        self, sleep: Callable[[float], None], *, window: int = 20, max_hold: float = 60.0
    ) -> None:
        self._sleep = sleep
        self._max_hold = max_hold
        self._recent: deque[bool] = deque(maxlen=window)
        self._hold = 0.0
        # No lock: cases in threads race only on which count lands first, and a hold read a
        # moment early or late is still a hold (each update is one assignment).
        self.held = 0.0
        """Seconds the runner held off starting cases, in all."""

    def note(self, trace: bytes) -> None:
        """Count a finished case's requests and refusals, from its trace's bytes."""
        refused = trace.count(_WAITED)
        sent = trace.count(_REQUESTED) + refused
        longest = max(_waits(trace), default=0.0)
        self._recent.extend([True] * refused + [False] * (sent - refused))
        recent = tuple(self._recent)
        if sum(recent) * 2 > len(recent):
            self._hold = min(self._max_hold, max(longest, self._hold * 2, 1.0))
        else:
            self._hold = 0.0

    def hold(self) -> float:
        """Wait the current hold before a case starts (none while most requests go through)."""
        wait = self._hold
        if wait > 0:
            self._sleep(wait)
            self.held += wait
        return wait


def _waits(trace: bytes) -> list[float]:
    """Each recorded wait's seconds, read from the canonical event bytes."""
    found = []
    start = trace.find(_WAIT_SECONDS)
    while start >= 0:
        start += len(_WAIT_SECONDS)
        end = start
        while end < len(trace) and trace[end : end + 1] in b"0123456789.eE-+":
            end += 1
        with contextlib.suppress(ValueError):
            found.append(float(trace[start:end]))
        start = trace.find(_WAIT_SECONDS, end)
    return found


_TOTALS = BUDGET_KEYS
"""What an eval's total budget may bound, each summed over the cases' traces."""


class EvalBudget:
    """An eval's total budget: once the cases run so far used more of one of ``limits``, no
    case is started (those in flight finish and are kept); `stopped` says which and how many."""

    def __init__(self, limits: dict[str, float]) -> None:
        """Create the budget.

        Raises:
            EvalValueError (``reason="budget"``): a key it cannot bound, or a limit not above 0.
        """
        for name, limit in limits.items():
            if name not in _TOTALS or not limit > 0:
                raise EvalValueError(
                    f"budget {name}={limit:g}: give one of {', '.join(_TOTALS)}, each above 0",
                    reason="budget",
                )
        self.limits = dict(limits)
        self.used = dict.fromkeys(_TOTALS, 0.0)
        self.ran = 0
        self.stopped: str | None = None
        """Why no more cases start: the budget crossed, its use and the cases that ran."""

    def note(self, observation: Observation) -> None:
        """Add a finished case's use, read from its trace, and stop once over a limit."""
        used = self.used
        used["input_tokens"] += observation.input_tokens
        used["output_tokens"] += observation.output_tokens
        used["tokens"] += observation.input_tokens + observation.output_tokens
        used["requests"] += observation.steps
        used["tool_calls"] += len(observation.tool_calls)
        used["wall_seconds"] += observation.duration_s
        used["cost_usd"] = round(used["cost_usd"] + observation.cost_usd, 10)
        self.ran += 1
        if self.stopped is not None:
            return
        for name, limit in self.limits.items():
            if used[name] > limit:
                self.stopped = (
                    f"budget {name} reached {used[name]:g}, over the eval's limit of {limit:g} "
                    f"(budget_exceeded): no case started after {self.ran} ran"
                )
                return
