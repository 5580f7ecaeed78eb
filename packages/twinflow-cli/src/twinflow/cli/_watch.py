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
from twinflow.agent import ModelResponded, OutputAccepted, PolicyDecided, RunFailed, ToolReturned
from twinflow.agent._events import EventBody
from twinflow.vocab import Chunk, TextDelta

__all__ = ["REPLY_PREFIX", "ChatPrinter", "TextPrinter"]

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


class ChatPrinter(TextPrinter):
    """`TextPrinter` for ``twinflow chat``: the streamed replies, and each policy decision and
    tool result of the turn on a line of its own; an answer that did not stream (a structured
    output, a model without streaming) is printed whole when it is accepted."""

    def __init__(self, stream: TextIO) -> None:
        """Print on `stream`."""
        super().__init__(stream)
        self._streamed = False

    def __call__(self, item: EventBody | Chunk) -> None:
        """Take one event or chunk from the agent."""
        super().__call__(item)
        if isinstance(item, TextDelta) and item.text:
            self._streamed = True
        elif isinstance(item, ModelResponded):
            # The final reply's text is the answer: only one that never streamed is printed.
            self._streamed = self._streamed and not item.response.message.tool_calls
        elif isinstance(item, PolicyDecided):
            self._line(f"  policy> {item.decision} {item.tool} (by {item.by}): {item.reason}")
        elif isinstance(item, ToolReturned):
            label = "error" if item.result.is_error else "result"
            self._line(f"  tool>   {label}: {item.result.content}")
        elif isinstance(item, OutputAccepted):
            if not self._streamed:
                value = item.value if isinstance(item.value, str) else repr(item.value)
                self._line(f"{REPLY_PREFIX}{value}")
            self._streamed = False

    def _line(self, text: str) -> None:
        self._write(scrub(text).replace("\n", "\\n") + "\n")
