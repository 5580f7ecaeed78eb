"""Keep-alive connections for `HttpTransport`: one idle connection per origin.

An origin is `(scheme, host, port)`. A connection is taken out of the pool for one exchange
and given back only when its answer was read to the end and the server did not ask to close
it; anything else closes it. A pooled connection that the server has closed meanwhile (an idle
keep-alive timeout) is usually seen before use, because its socket has become readable; the
transport handles the rest of that race (see `HttpTransport`).
"""

from __future__ import annotations

import http.client
import io
import select
import socket
import ssl
import threading
import time
import weakref
from typing import Any

Origin = tuple[str, str, int]


class Deadline:
    """One deadline for a whole exchange, applied to the socket before every blocking step."""

    def __init__(self, timeout: float) -> None:
        """Start the clock.

        Args:
            timeout: Seconds allowed from now.
        """
        self.timeout = timeout
        self.end = time.monotonic() + timeout
        self.idle: float | None = None
        """Longest wait for any one read, when shorter than what is left (a stream's idle_timeout)."""
        self.no_wait = False
        """Read only what has already arrived: every receive returns at once (ADR 0152)."""

    def remaining(self) -> float:
        """Return the seconds left.

        Raises:
            TimeoutError: None are left.
        """
        left = self.end - time.monotonic()
        if left <= 0:
            raise TimeoutError("deadline passed")
        return left

    def expired(self) -> bool:
        """Tell whether the deadline has passed (so a timeout was the deadline's, not `idle`'s)."""
        return self.end - time.monotonic() <= 0

    def arm(self, sock: socket.socket) -> None:
        """Give `sock` what is left of the deadline as its timeout, before a send or a receive.

        Raises:
            TimeoutError: The deadline has passed.
        """
        if self.no_wait:
            # A timeout of 0 makes the socket non-blocking: a receive with nothing to read
            # returns at once (a plain socket's reader gives None, TLS raises
            # SSLWantReadError), it never waits.
            if sock.fileno() != -1:
                sock.settimeout(0.0)
            return
        left = self.remaining()
        if self.idle is not None:
            left = min(left, self.idle)
        # Once a response that closes its connection is read, the socket is gone: nothing to arm.
        if sock.fileno() != -1:
            sock.settimeout(left)


class _DeadlineReader(io.RawIOBase):
    """The socket's reader, re-armed with what is left of the deadline before every receive.

    A socket timeout bounds one receive, not an answer: a server sending its status line and
    headers one byte a second, or `100 Continue` after `100 Continue`, would never let a
    per-receive timeout fire. `http.client` reads the whole head (1xx answers included) and the
    body through this reader, so each receive gets only what is left of the one deadline.
    """

    def __init__(self, raw: io.RawIOBase, sock: socket.socket, deadline: Deadline) -> None:
        super().__init__()
        self._raw = raw
        self._sock = sock
        self._deadline = deadline

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int | None:
        self._deadline.arm(self._sock)
        return self._raw.readinto(buffer)

    def close(self) -> None:
        # Closing the socket's reader releases the socket (http.client counts its readers).
        try:
            self._raw.close()
        finally:
            super().close()


class _DeadlineResponse(http.client.HTTPResponse):
    """An answer read through `_DeadlineReader`: the deadline bounds the head and the body."""

    def __init__(
        self,
        sock: socket.socket,
        debuglevel: int = 0,
        method: str | None = None,
        url: str | None = None,
        *,
        deadline: Deadline,
    ) -> None:
        super().__init__(sock, debuglevel, method, url)
        # Keep the socket's own reader (it holds the socket open for a response that outlives its
        # connection) and put the deadline between it and http.client's buffer.
        raw = self.fp.detach()
        self.fp = io.BufferedReader(_DeadlineReader(raw, sock, deadline))

    def _read_status(self) -> tuple[str, int, str]:
        """The status line; an interim answer (102, 103, ...) reads as 100 so it is skipped too.

        `http.client` skips `100 Continue` answers and their headers until the final answer, but
        takes any other `1xx` for the final one (an empty body). Every `1xx` but 101 is interim
        (RFC 9110, section 15.2), and each one is skipped within the deadline.
        """
        version, status, reason = super()._read_status()  # type: ignore[misc]  # a private http.client method
        if 100 < status < 200 and status != 101:
            return version, http.client.CONTINUE, reason
        return version, status, reason


class Connection(http.client.HTTPConnection):
    """An HTTP connection whose connect (and TLS handshake) share the exchange's deadline.

    It counts the bytes the socket accepted (`bytes_out`), so the transport can tell a request
    that never left (safe to send again) from one that may have reached the server (never re-sent).
    """

    deadline: Deadline
    bytes_out: int = 0
    """Bytes of requests the socket has accepted on this connection, counted as they go out."""

    # http.client builds the answer with `self.response_class(sock, ...)`: a method that hands
    # over this exchange's deadline, where the base class names a class.
    def response_class(  # type: ignore[override]  # a method where the base names a class
        self, sock: socket.socket, *args: Any, **kwargs: Any
    ) -> http.client.HTTPResponse:
        """The answer to the request, read within this exchange's deadline."""
        return _DeadlineResponse(sock, *args, deadline=self.deadline, **kwargs)

    _body: bytes | None = None
    """A request body waiting to go out with the head (`endheaders`)."""

    def endheaders(self, message_body: Any = None, *, encode_chunked: bool = False) -> None:
        """End the head; a bytes body goes out in the same write as the head.

        `http.client` writes the head and the body separately: two sends, and a server that
        wakes for the head, then waits again for the body. The body is handed to `send`, which
        appends it to the head; `bytes_out` counts both as one request, as before.
        """
        if not isinstance(message_body, bytes) or encode_chunked:
            super().endheaders(message_body, encode_chunked=encode_chunked)
            return
        self._body = message_body
        try:
            super().endheaders()
        finally:
            self._body = None

    def send(self, data: Any) -> None:
        """Send `data`, counting each byte the socket accepts (`sendall` would hide a partial send)."""
        if self._body is not None:
            # The head `endheaders` writes, and the body it holds back for it.
            data, self._body = bytes(data) + self._body, None
        if self.sock is None or not isinstance(data, bytes | bytearray | memoryview):
            # http.client opens the socket or streams a file here; count it as gone out.
            self.bytes_out += 1
            super().send(data)
            return
        view = memoryview(data)
        while view:
            # Each send gets what is left: a server that reads a byte at a time cannot stretch it.
            self.deadline.arm(self.sock)
            sent = self.sock.send(view)
            self.bytes_out += sent
            view = view[sent:]

    def connect(self) -> None:
        """Connect within the deadline, then leave what is left of it to the next step."""
        self.timeout = self.deadline.remaining()
        super().connect()
        self.sock.settimeout(self.deadline.remaining())


class TLSConnection(http.client.HTTPSConnection, Connection):
    """An https connection: `HTTPSConnection.connect` runs `Connection.connect`, then the handshake."""


def open_connection(
    origin: Origin, deadline: Deadline, context: ssl.SSLContext | None
) -> Connection:
    """Create a connection to `origin` and connect it within `deadline`.

    Args:
        origin: `(scheme, host, port)`.
        deadline: The deadline of the exchange that needs the connection.
        context: The TLS context, for https.

    Returns:
        The connected connection.

    Raises:
        OSError: The connection or the TLS handshake failed, or the deadline passed; nothing
            is left open.
    """
    scheme, host, port = origin
    connection: Connection
    if scheme == "https":
        connection = TLSConnection(host, port, context=context)
    else:
        connection = Connection(host, port)
    connection.deadline = deadline
    try:
        connection.connect()
    except BaseException:
        connection.close()
        raise
    return connection


def _dropped(connection: Connection) -> bool:
    """Tell whether an idle connection is unusable: closed, or readable while idle.

    An idle keep-alive socket has nothing to say; if it is readable, the server closed it (end of
    file or a reset) or sent something unasked. Either way it must not carry a request.
    """
    sock = connection.sock
    if sock is None or sock.fileno() == -1:
        return True
    try:
        if isinstance(sock, ssl.SSLSocket) and sock.pending():
            return True
        if hasattr(select, "poll"):
            poller = select.poll()
            poller.register(sock, select.POLLIN)
            return bool(poller.poll(0))
        readable, _, _ = select.select([sock], [], [], 0)
        return bool(readable)
    except (OSError, ValueError):
        return True


def _close_all(idle: dict[Origin, list[Connection]]) -> None:
    connections = [c for kept in idle.values() for c in kept]
    idle.clear()
    for connection in connections:
        connection.close()


class ConnectionPool:
    """At most ``keep`` idle connections per origin (one by default), safe to share between
    threads.

    A transport shared by many concurrent runs (a fleet, an eval at ``--concurrency N``) keeps
    as many as it has requests in flight, so each request reuses a connection instead of
    opening one; the connections open at once are bounded by the requests in flight (the
    runs, bounded by their executor), and those kept idle by ``keep``.

    The idle connections are closed by `close()`, or when the pool is garbage-collected.
    `HttpTransport(pool=...)` takes one; a subclass may override `take` or `usable` to
    stage the races a kept connection meets (tests do, instead of patching this module).
    """

    def __init__(self, keep: int = 1) -> None:
        """Create an empty pool keeping up to ``keep`` idle connections per origin."""
        self._keep = max(1, keep)
        self._idle: dict[Origin, list[Connection]] = {}
        self._lock = threading.Lock()
        self._closed = False
        self._finalizer = weakref.finalize(self, _close_all, self._idle)

    def take(self, origin: Origin) -> Connection | None:
        """Remove and return the idle connection to `origin`, if it is still usable."""
        with self._lock:
            kept = self._idle.get(origin)
            connection = kept.pop() if kept else None
        if connection is not None and not self.usable(connection):
            connection.close()
            return None
        return connection

    def usable(self, connection: Connection) -> bool:
        """Tell whether an idle connection may carry a request: still open, and silent.

        An idle keep-alive socket has nothing to say; a readable one was closed by the server
        (end of file or a reset) or sent something unasked, and is closed instead of used.
        """
        return not _dropped(connection)

    def give(self, origin: Origin, connection: Connection) -> None:
        """Keep `connection` for a later exchange with `origin` (closed if ``keep`` are kept)."""
        with self._lock:
            kept = self._idle.setdefault(origin, [])
            if not self._closed and len(kept) < self._keep:
                kept.append(connection)
                return
        connection.close()

    def close(self) -> None:
        """Close every idle connection; connections given back later are closed at once."""
        with self._lock:
            self._closed = True
            connections = [c for kept in self._idle.values() for c in kept]
            self._idle.clear()
        for connection in connections:
            connection.close()
