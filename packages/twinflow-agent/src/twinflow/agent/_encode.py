"""The one place the agent turns an event into the bytes its trace line holds.

`event_bytes` is the definition: the RFC 8785 canonical bytes of the `TraceEvent` envelope
(``at``, ``body``, ``prev``, ``seq``), as `twinflow.vocab.value_bytes` encodes any value:
pydantic's JSON-mode dump handed to the trace leaf's one encoder. The loop builds typed events
and hands them to the writer (`twinflow.agent._trace.TraceWriter`), which calls this; nothing
else in the agent lays out an event's bytes.

It is plain on purpose. The one fast path, `envelope_bytes`, lives here beside it: the writer's
envelope (its own number and digest, a clock reading, a body the loop built) encoded without
validating the envelope again, as the same JSON-mode dumps pydantic makes of its members.
``tests/test_encode.py`` holds the two byte-identical on generated events.
"""

from __future__ import annotations

from datetime import datetime
from typing import get_args

from pydantic import AwareDatetime, TypeAdapter

from twinflow.agent._events import EventBody, TraceEvent
from twinflow.vocab import value_bytes as canonical_bytes

__all__ = ["envelope_bytes", "event_bytes"]

_AT: TypeAdapter[datetime] = TypeAdapter(AwareDatetime)
"""The envelope's ``at`` field, dumped as `TraceEvent` dumps it."""

_BODIES = frozenset(get_args(get_args(EventBody)[0]))
"""The event types a body is exactly one of (a subclass is dumped as its base: not here)."""


def event_bytes(event: TraceEvent) -> bytes:
    """The canonical bytes of a trace event (what its digest covers).

    Raises:
        twinflow.trace.CanonicalError: A member has no canonical form (the error names it).
    """
    return canonical_bytes(event)


def envelope_bytes(seq: int, prev: str, at: datetime, body: EventBody) -> bytes:
    """`event_bytes` of ``TraceEvent(seq=seq, prev=prev, at=at, body=body)``, for the writer.

    ``seq`` and ``prev`` are the writer's own (a count, a digest). A body of exactly an event
    type (valid since it was built) and an aware datetime are dumped as the envelope dumps
    them, so validating the envelope again would check nothing; anything else builds it, and
    its validation names what is wrong.

    Raises:
        AgentConfigError: ``at`` is not an aware datetime, or ``body`` is not an event.
        twinflow.trace.CanonicalError: As `event_bytes`.
    """
    if type(body) in _BODIES and type(at) is datetime and at.utcoffset() is not None:
        return canonical_bytes(
            {
                "at": _AT.dump_python(at, mode="json"),
                "body": body.model_dump(mode="json"),
                "prev": prev,
                "seq": seq,
            }
        )
    return event_bytes(TraceEvent(seq=seq, prev=prev, at=at, body=body))
