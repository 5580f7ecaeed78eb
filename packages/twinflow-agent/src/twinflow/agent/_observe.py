"""Watching a run and steering it: the observer and steering types, and how steering is polled.

An observer is called with every event as it is recorded and, when the model can stream, with
every raw chunk of its replies as they arrive (`twinflow.vocab.Chunk`; text is in `TextDelta`).
It watches only: the trace records assembled replies, so an observed (streamed) run and an
unobserved one with the same replies write the same trace.

Steering comes from a callback (called with the step about to ask the model, returning the
messages to add) or a queue (drained without blocking). Each message is recorded as a
`steering_received` event and sent as `twinflow.vocab._envelope.envelope("steering", text)`; a replay
feeds the recorded messages back at the same steps.
"""

from __future__ import annotations

import queue
from collections.abc import Callable, Iterable

from twinflow.agent._errors import AgentConfigError
from twinflow.agent._events import EventBody
from twinflow.vocab import Chunk

__all__ = ["Observer", "Steering", "poll_steering"]

Observer = Callable[[EventBody | Chunk], None]
"""Called with each recorded event and each raw chunk of a streamed reply, in order."""

Steering = Callable[[int], Iterable[str]] | queue.Queue[str] | queue.SimpleQueue[str]
"""Where steering messages come from: `f(step) -> messages`, or a queue drained between steps."""


def poll_steering(source: Steering, step: int) -> list[str]:
    """The steering messages waiting before `step`'s model request.

    Raises:
        AgentConfigError: A message is not a non-empty string.
    """
    if isinstance(source, queue.Queue | queue.SimpleQueue):
        texts: list[object] = []
        while True:
            try:
                texts.append(source.get_nowait())
            except queue.Empty:
                break
    else:
        texts = list(source(step))
    for text in texts:
        if not isinstance(text, str) or not text.strip():
            raise AgentConfigError(
                f"a steering message before step {step} is {text!r}; send non-empty text"
            )
    return [str(text) for text in texts]
