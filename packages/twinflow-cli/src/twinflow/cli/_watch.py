"""Printing a run as it happens: the model's text, as it streams, for ``run`` and ``demo``.

`TextPrinter` is an agent observer (`twinflow.agent.Observer`). It writes each text delta as it
arrives, so a person watching a slow model sees the reply grow instead of waiting for it, and
ends the line when the reply is complete. It only watches: the trace is the same without it.

The text is the model server's: it goes through `twinflow._base._untrusted.for_terminal` (secrets scrubbed,
terminal controls escaped) like every other untrusted text printed. The end of a piece that
begins a secret is held back until the next piece, so a key the server splits across two deltas
is still found whole; other text is shown at once.
"""

from __future__ import annotations

from typing import TextIO

from twinflow._base._untrusted import for_terminal, scrub, unfinished_secret
from twinflow.agent import ModelResponded, RunFailed
from twinflow.agent._events import EventBody
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
        self._held = ""

    def __call__(self, item: EventBody | Chunk) -> None:
        """Take one event or chunk from the agent."""
        if isinstance(item, TextDelta):
            if not item.text:
                return
            if not self._open:
                self._stream.write(REPLY_PREFIX)
                self._open = True
            # Scrubbed whole before the cut: a key inside the text is replaced, one only begun
            # at its end is held back and completed by the next delta.
            text = scrub(self._held + item.text)
            cut = len(text) - unfinished_secret(text)
            self._held = text[cut:]
            self._write(text[:cut])
        elif isinstance(item, ModelResponded | RunFailed) and self._open:
            self._write(self._held + "\n")
            self._held = ""
            self._open = False

    def _write(self, text: str) -> None:
        if text:
            self._stream.write(for_terminal(text))
            self._stream.flush()
