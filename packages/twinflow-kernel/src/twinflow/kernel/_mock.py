"""`MockTransport`: a transport that answers through a handler function."""

from __future__ import annotations

from collections.abc import Callable

from twinflow.kernel._ports import Closing
from twinflow.vocab import JsonValue, UserError

MockHandler = Callable[[str, JsonValue], JsonValue]


class MockTransport(Closing):
    """Answers every `post_json` with `handler(url, body)`.

    The handler may raise any `TransportError` to stand for a failure. For failures produced by
    real sockets, use `FaultTransport` or `LoopbackServer` instead.
    """

    def __init__(self, handler: MockHandler) -> None:
        """Create the transport.

        Args:
            handler: Takes the URL and the JSON body, returns the JSON answer.
        """
        self._handler = handler
        self._closed = False

    def post_json(self, url: str, body: JsonValue, *, timeout: float) -> JsonValue:
        """Return `handler(url, body)`; `timeout` is accepted and ignored.

        Raises:
            UserError: The transport is closed.
        """
        if self._closed:
            raise UserError(f"post_json({url!r}) on a closed MockTransport: create a new one")
        return self._handler(url, body)

    def close(self) -> None:
        """Mark the transport closed."""
        self._closed = True
