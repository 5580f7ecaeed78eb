"""The one place the agent turns an event into the bytes its trace line holds.

`event_bytes` is the definition: the RFC 8785 canonical bytes of the `TraceEvent` envelope
(``at``, ``body``, ``prev``, ``seq``), as `twinflow.vocab.value_bytes` encodes any value:
pydantic's JSON-mode dump handed to the trace leaf's one encoder. The loop builds typed events
and hands them to the writer (`twinflow.agent._trace.TraceWriter`), which calls this; nothing
else in the agent lays out an event's bytes.

It is plain on purpose: the floors in ``docs/performance.md`` are met without a fast path. A
fast path, if a floor ever needs one, lives here beside this function, on public APIs only,
with a property test holding the two byte-identical.
"""

from __future__ import annotations

from twinflow.agent._events import TraceEvent
from twinflow.vocab import value_bytes as canonical_bytes

__all__ = ["event_bytes"]


def event_bytes(event: TraceEvent) -> bytes:
    """The canonical bytes of a trace event (what its digest covers).

    Raises:
        twinflow.trace.CanonicalError: A member has no canonical form (the error names it).
    """
    return canonical_bytes(event)
