"""`LoopbackServer`: a real HTTP server on 127.0.0.1 for tests, driven by a handler function.

It is public so every package's tests can stand a real server behind a real transport instead of
mocking one. Besides ordinary answers it can misbehave on purpose (sleep, reset mid-body, send
bytes that are not HTTP, send a huge body) so that the transport's failure mapping is exercised
against real sockets.
"""

from __future__ import annotations

import json
import os
import socket
import ssl
import struct
import sys
import threading
from collections.abc import Callable, Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal, Self

from twinflow.kernel._nondeterminism import on_behalf_of_caller
from twinflow.kernel._ports import Closing
from twinflow.trace import UserError
from twinflow.vocab import FrozenValue, JsonValue


class LoopbackRequest(FrozenValue):
    """A request the loopback server received."""

    method: str
    """The HTTP method, e.g. `"POST"`."""
    path: str
    """The request target: path and query."""
    headers: tuple[tuple[str, str], ...]
    """The request headers, in the order received."""
    body: bytes
    """The raw request body."""

    def json_value(self) -> JsonValue:
        """Return the body decoded as JSON."""
        value: JsonValue = json.loads(self.body)
        return value


Behaviour = Literal["respond", "reset_mid_body", "garbage"]


class LoopbackResponse(FrozenValue):
    """What the loopback server does with one request."""

    status: int = 200
    """HTTP status code."""
    headers: tuple[tuple[str, str], ...] = ()
    """Extra response headers."""
    body: bytes = b""
    """The body, sent `repeat` times (for `"garbage"`, the raw bytes sent instead of HTTP)."""
    repeat: int = 1
    """How many times `body` is sent: a large body without holding it in memory."""
    announce_length: bool = True
    """Send `Content-Length`; if false, the end of the body is the end of the connection."""
    delay: float = 0.0
    """Seconds to wait before answering (cut short when the server stops)."""
    chunk_delay: float = 0.0
    """Seconds to wait before each repeat of `body`: a body that trickles in."""
    stream: Callable[[], Iterable[bytes]] | None = None
    """When set, the body instead: each piece it yields is sent at once as one HTTP chunk
    (`Transfer-Encoding: chunked`), so a test can trickle a stream, or hold it (the function
    may block between pieces) until the client has shown what it received."""
    behaviour: Behaviour = "respond"
    """`"respond"`: a normal answer; `"reset_mid_body"`: headers and half the body, then a TCP
    reset; `"garbage"`: `body` written raw, with no status line, then the connection closed."""

    @classmethod
    def json_body(cls, value: JsonValue, status: int = 200) -> LoopbackResponse:
        """Return a JSON answer.

        Args:
            value: The JSON value to send.
            status: The HTTP status code.
        """
        return cls(
            status=status,
            headers=(("Content-Type", "application/json"),),
            body=json.dumps(value, separators=(",", ":")).encode(),
        )


LoopbackHandler = Callable[[LoopbackRequest], LoopbackResponse]


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    # socketserver's default backlog is 5: a fleet opening 128 connections at once had most
    # of its connects dropped and retried by TCP a second later, so the server, not the
    # client, set the pace. The system's limit keeps every connect waiting for its accept.
    request_queue_size = socket.SOMAXCONN

    def __init__(self, owner: LoopbackServer) -> None:
        self.owner = owner
        super().__init__(("127.0.0.1", 0), _RequestHandler)

    def finish_request(self, request: Any, client_address: Any) -> None:
        context = self.owner.ssl_context
        if context is None:
            super().finish_request(request, client_address)
            return
        # The handshake runs here, on the connection's own thread, not in the accept loop.
        try:
            wrapped = context.wrap_socket(request, server_side=True)
        except OSError as error:
            self.owner.errors.append(error)
            return
        try:
            super().finish_request(wrapped, client_address)
        finally:
            self.shutdown_request(wrapped)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hangs up mid-answer is expected in these tests: keep it, don't print it.
        error = sys.exc_info()[1]
        if error is not None:
            self.owner.errors.append(error)


class _RequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out in separate writes; with Nagle's algorithm a keep-alive client
    # would then wait for a delayed ACK (about 40 ms) on every request.
    disable_nagle_algorithm = True
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        """Stay quiet: tests read `LoopbackServer.requests` instead."""

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def do_PUT(self) -> None:
        self._serve()

    def do_DELETE(self) -> None:
        self._serve()

    def _serve(self) -> None:
        owner = self.server.owner
        length = int(self.headers.get("Content-Length") or 0)
        request = LoopbackRequest(
            method=self.command,
            path=self.path,
            headers=tuple(self.headers.items()),
            body=self.rfile.read(length) if length else b"",
        )
        with owner.lock:
            owner.requests.append(request)
        try:
            response = on_behalf_of_caller(owner.handler, request)
        except Exception as error:
            owner.errors.append(error)
            response = LoopbackResponse(
                status=500, body=f"loopback handler raised {error!r}".encode()
            )
        if response.delay > 0 and owner.stopping.wait(response.delay):
            self.close_connection = True
            return
        try:
            self._answer(response)
        except OSError:
            # The client went away (timed out, refused a large body): that is the test's point.
            self.close_connection = True

    def _answer(self, response: LoopbackResponse) -> None:
        if response.behaviour == "garbage":
            self.wfile.write(response.body)
            self.wfile.flush()
            self.close_connection = True
            return
        if response.stream is not None:
            self._answer_chunked(response, response.stream)
            return
        total = len(response.body) * response.repeat
        self.send_response(response.status)
        for name, value in response.headers:
            self.send_header(name, value)
        if response.announce_length:
            self.send_header("Content-Length", str(total))
        if not response.announce_length or response.behaviour == "reset_mid_body":
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        owner = self.server.owner
        if response.behaviour == "reset_mid_body":
            self.wfile.write(response.body[: len(response.body) // 2])
            self.wfile.flush()
            # SO_LINGER with a zero timeout makes close() send RST instead of FIN.
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
            return
        for _ in range(response.repeat):
            if response.chunk_delay > 0:
                self.wfile.flush()
                if owner.stopping.wait(response.chunk_delay):
                    return
            self.wfile.write(response.body)
            with owner.lock:
                owner.bytes_sent += len(response.body)
        self.wfile.flush()

    def _answer_chunked(
        self, response: LoopbackResponse, stream: Callable[[], Iterable[bytes]]
    ) -> None:
        self.send_response(response.status)
        for name, value in response.headers:
            self.send_header(name, value)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()
        owner = self.server.owner
        for piece in on_behalf_of_caller(stream):
            if not piece:
                continue
            self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            self.wfile.flush()
            with owner.lock:
                owner.bytes_sent += len(piece)
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


class LoopbackServer(Closing):
    """A threaded HTTP server on 127.0.0.1 and a free port, answering through `handler`.

    Use it as a context manager::

        with LoopbackServer(lambda r: LoopbackResponse.json_body({"echo": r.json_value()})) as server:
            transport.post_json(server.url_for("/v1/x"), {"a": 1}, timeout=5)

    Attributes:
        handler: Called once per request, on the server's thread for that connection.
        ssl_context: Server-side TLS context; when set, the server speaks https.
        requests: Every request received, in order.
        errors: Exceptions the server swallowed (handler errors, clients that hung up).
        bytes_sent: Body bytes written so far (counted per `body` chunk).
    """

    def __init__(
        self, handler: LoopbackHandler, *, ssl_context: ssl.SSLContext | None = None
    ) -> None:
        """Create the server; it listens from `start()` (or `with`).

        Args:
            handler: Turns each request into a `LoopbackResponse`.
            ssl_context: A server-side TLS context (with its certificate loaded) to serve https.
        """
        self.handler = handler
        self.ssl_context = ssl_context
        self.requests: list[LoopbackRequest] = []
        self.errors: list[BaseException] = []
        self.bytes_sent = 0
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @classmethod
    def https(
        cls,
        handler: LoopbackHandler,
        certfile: str | os.PathLike[str],
        keyfile: str | os.PathLike[str],
    ) -> LoopbackServer:
        """A server that speaks https with the certificate in `certfile` (PEM) and its key.

        For tests outside the kernel, which may not import `ssl`: a client trusts it through
        `HttpTransport(cafile=certfile)` when the certificate is self-signed.
        """
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(certfile, keyfile)
        return cls(handler, ssl_context=context)

    @property
    def port(self) -> int:
        """The port the server listens on."""
        if self._server is None:
            raise UserError(
                "LoopbackServer is not started: use it in a `with` block or call start()"
            )
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """The base URL, e.g. `http://127.0.0.1:41234`."""
        scheme = "https" if self.ssl_context is not None else "http"
        return f"{scheme}://127.0.0.1:{self.port}"

    def url_for(self, path: str = "/") -> str:
        """Return the absolute URL of `path` on this server."""
        return self.url + (path if path.startswith("/") else "/" + path)

    def start(self) -> Self:
        """Bind and start serving on a background thread."""
        self._server = _Server(self)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, wake sleeping handlers, and close the socket."""
        self.stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join()

    def close(self) -> None:
        """`stop()`, under the name `Closing` gives a ``with`` block's exit."""
        self.stop()

    def __enter__(self) -> Self:
        """Start serving for the block; `close()` stops it when the block exits."""
        return self.start()
