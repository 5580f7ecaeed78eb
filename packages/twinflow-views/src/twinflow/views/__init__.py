"""twinflow.views: what a person reads of a run, computed from its trace.

`render_trace_page` is the self-contained HTML page that verifies a trace in the reader's
browser (``twinflow show --html``, eval's reports); `summarize_trace` reads a run's events
once into a `TraceSummary`, a `CallSummary` per tool call (what ``twinflow run`` prints,
what eval scores); `compare_behaviour` lists where two runs behaved differently
(``twinflow diff``).

This package raises no errors of its own: the views read traces the agent's `Trace` already
verified and typed.
"""

from twinflow.views._page import render_trace_page as render_trace_page
from twinflow.views._summary import TraceSummary as TraceSummary
from twinflow.views._summary import summarize_trace as summarize_trace
