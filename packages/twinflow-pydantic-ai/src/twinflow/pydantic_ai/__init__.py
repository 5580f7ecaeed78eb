"""twinflow.pydantic_ai: verified recording and replay of pydantic-ai runs.

Give a pydantic-ai agent a `RecordingModel` around its model and the run becomes a twinflow
trace (requests, responses, tool calls and results as the agent's own events), which
``twinflow verify``, ``twinflow show`` and ``twinflow-trace`` read like any run; give the same
agent a `ReplayModel` of that trace and it runs again with the recorded responses, failing at
the first request that differs (`twinflow.kernel.ReplayDivergenceError`, with the seq and the
first difference). Features a trace cannot represent are refused by name before the request is
sent (`twinflow.vocab.PartNotCarriedError`). docs/pydantic-ai.md shows a run end to end.

This package raises no errors of its own: it raises the ones named above, and the trace
leaf's (`TraceCorruptError` for a recording that does not verify).
"""

from twinflow.pydantic_ai._models import RecordingModel as RecordingModel
from twinflow.pydantic_ai._models import ReplayModel as ReplayModel
