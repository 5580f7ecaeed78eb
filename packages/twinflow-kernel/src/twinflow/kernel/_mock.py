"""`MockTransport`: a transport that answers through a handler function."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from twinflow.kernel._nondeterminism import on_behalf_of_caller
from twinflow.kernel._ports import Closing
from twinflow.trace import UserError
from twinflow.vocab import JsonValue

MockHandler = Callable[[str, JsonValue], JsonValue]
MockStreamHandler = Callable[[str, JsonValue], Iterable[bytes]]


class MockTransport(Closing):
    """Answers every `post_json` with `handler(url, body)`.

    The handler may raise any `TransportError` to stand for a failure. For failures produced by
    real sockets, use `FaultTransport` or `LoopbackServer` instead.
    """

    def __init__(
        self, handler: MockHandler, *, stream_handler: MockStreamHandler | None = None
    ) -> None:
        """Create the transport.

        Args:
            handler: Takes the URL and the JSON body, returns the JSON answer.
            stream_handler: Takes the URL and the JSON body, returns the chunks `post_stream`
                yields (it may raise a `TransportError` before or between them).
        """
        self._handler = handler
        self._stream_handler = stream_handler
        self._closed = False

    def post_json(self, url: str, body: JsonValue, *, timeout: float) -> JsonValue:
        """Return `handler(url, body)`; `timeout` is accepted and ignored.

        Raises:
            UserError: The transport is closed.
        """
        if self._closed:
            raise UserError(f"post_json({url!r}) on a closed MockTransport: create a new one")
        return on_behalf_of_caller(self._handler, url, body)

    def post_stream(
        self, url: str, body: JsonValue, *, timeout: float, idle_timeout: float | None = None
    ) -> Iterator[bytes]:
        """Yield the chunks of `stream_handler(url, body)`; the timeouts are accepted and ignored.

        Raises:
            UserError: The transport is closed, or was made without a `stream_handler`.
        """
        if self._closed:
            raise UserError(f"post_stream({url!r}) on a closed MockTransport: create a new one")
        if self._stream_handler is None:
            raise UserError(
                f"post_stream({url!r}) on a MockTransport made without stream_handler: pass "
                "MockTransport(handler, stream_handler=...) to answer streamed requests"
            )
        return (
            bytes(chunk) for chunk in on_behalf_of_caller(self._stream_handler, url, body) if chunk
        )

    def close(self) -> None:
        """Mark the transport closed."""
        self._closed = True
