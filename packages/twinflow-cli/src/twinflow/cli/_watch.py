"""Printing a run as it happens: the model's text, as it streams, for ``run`` and ``demo``.

`TextPrinter` is an agent observer (`twinflow.agent.Observer`). It writes each text delta as it
arrives, so a person watching a slow model sees the reply grow instead of waiting for it, and
ends the line when the reply is complete. It only watches: the trace is the same without it.
"""

from __future__ import annotations

from typing import TextIO

from twinflow.agent import EventBody, ModelResponded, RunFailed
from twinflow.vocab import Chunk, TextDelta

__all__ = ["REPLY_PREFIX", "TextPrinter"]

REPLY_PREFIX = "  model> "
"""What starts each streamed reply's line."""


class TextPrinter:
    """Writes the model's text to `stream` as it streams, one line per reply."""

    def __init__(self, stream: TextIO) -> None:
        """Print on `stream` (flushed after every delta)."""
        self._stream = stream
        self._open = False

    def __call__(self, item: EventBody | Chunk) -> None:
        """Take one event or chunk from the agent."""
        if isinstance(item, TextDelta):
            if not item.text:
                return
            if not self._open:
                self._stream.write(REPLY_PREFIX)
                self._open = True
            self._stream.write(item.text)
            self._stream.flush()
        elif isinstance(item, ModelResponded | RunFailed) and self._open:
            self._stream.write("\n")
            self._stream.flush()
            self._open = False
