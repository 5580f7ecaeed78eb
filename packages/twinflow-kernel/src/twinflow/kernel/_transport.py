"""`UrllibJsonTransport`: the one real JSON-over-HTTP adapter, on the standard library only.

It sends `Connection: close` requests (one connection per call, nothing pooled), enforces one
deadline over the whole exchange (connect, send, headers and every body read), streams the body
in chunks and stops past `max_response_bytes`, never follows a redirect unless asked, never
retries, and maps every failure to one `TransportError` subclass naming the URL. https verifies
against the system trust store through `ssl.create_default_context()`, or against `cafile`:
certifi is never imported.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from typing import Any

from twinflow.kernel._errors import (
    ConnectError,
    HTTPStatusError,
    NetworkBlockedError,
    ResponseDecodeError,
    ResponseTooLarge,
    TransportError,
    TransportTimeout,
)
from twinflow.kernel._netpolicy import ENV_ALLOW_NETWORK, is_loopback, network_allowed
from twinflow.vocab import JsonValue, UserError

_CHUNK = 64 * 1024
_EXCERPT_BYTES = 2000
_REDIRECTS = frozenset({301, 302, 303, 307, 308})


class _Deadline:
    """One deadline for a whole exchange, applied to the socket before every blocking read."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self.end = time.monotonic() + timeout
        self.sock: socket.socket | None = None

    def remaining(self) -> float:
        left = self.end - time.monotonic()
        if left <= 0:
            raise TimeoutError("deadline passed")
        return left

    def arm(self) -> None:
        # http.client closes the socket once the announced body is read: nothing left to arm.
        if self.sock is not None and self.sock.fileno() != -1:
            self.sock.settimeout(self.remaining())


class _HTTPConnection(http.client.HTTPConnection):
    deadline: _Deadline

    def connect(self) -> None:
        super().connect()
        self.deadline.sock = self.sock

    def getresponse(self) -> http.client.HTTPResponse:
        self.deadline.arm()
        return super().getresponse()


class _HTTPSConnection(http.client.HTTPSConnection):
    deadline: _Deadline

    def connect(self) -> None:
        super().connect()
        self.deadline.sock = self.sock

    def getresponse(self) -> http.client.HTTPResponse:
        self.deadline.arm()
        return super().getresponse()


class _Request(urllib.request.Request):
    deadline: _Deadline


def _deadline_of(req: urllib.request.Request) -> _Deadline:
    # The opener is shared by every call; the per-call deadline travels on the request.
    deadline = getattr(req, "deadline", None)
    return deadline if isinstance(deadline, _Deadline) else _Deadline(req.timeout or 60.0)


class _HTTPHandler(urllib.request.HTTPHandler):
    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        deadline = _deadline_of(req)

        def connection(host: str, **kwargs: Any) -> _HTTPConnection:
            conn = _HTTPConnection(host, **kwargs)
            conn.deadline = deadline
            return conn

        return self.do_open(connection, req)


class _HTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, context: ssl.SSLContext) -> None:
        super().__init__(context=context)
        self._ssl = context

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        deadline = _deadline_of(req)

        def connection(host: str, **kwargs: Any) -> _HTTPSConnection:
            conn = _HTTPSConnection(host, context=self._ssl, **kwargs)
            conn.deadline = deadline
            return conn

        return self.do_open(connection, req)


def _excerpt(data: bytes) -> str:
    return data[:_EXCERPT_BYTES].decode("utf-8", errors="replace")


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _map_os_error(
    url: str, error: BaseException, deadline: _Deadline, phase: str
) -> TransportError:
    """Map a low-level failure to the transport error that says what to do."""
    parsed = urllib.parse.urlsplit(url)
    where = f"{parsed.hostname}:{parsed.port or (443 if parsed.scheme == 'https' else 80)}"
    if isinstance(error, TimeoutError):
        return TransportTimeout(
            f"no complete answer from {url} within {deadline.timeout:g} s ({phase}): the server "
            "is slow or stuck; check its log, or pass a larger timeout",
            url=url,
        )
    if isinstance(error, ConnectionRefusedError):
        return ConnectError(
            f"connection refused by {url}: nothing is listening on {where}; start the server "
            "or fix the host and port (twinflow does not retry)",
            url=url,
        )
    if isinstance(error, socket.gaierror):
        return ConnectError(
            f"cannot resolve the host of {url} ({error.strerror}): check the host name and DNS",
            url=url,
        )
    if isinstance(error, ssl.SSLCertVerificationError):
        return ConnectError(
            f"TLS certificate of {url} failed verification ({error.verify_message}): if the "
            "server uses a private CA or a self-signed certificate, pass "
            "UrllibJsonTransport(cafile=<that CA's PEM file>); otherwise fix the server's certificate",
            url=url,
        )
    if isinstance(error, ssl.SSLError):
        return ConnectError(
            f"TLS with {url} failed ({error.reason or error}): check that the URL's scheme and "
            "port match the server (https to an http port fails like this)",
            url=url,
        )
    if isinstance(error, ConnectionError | http.client.IncompleteRead):
        return ConnectError(
            f"connection to {url} was lost {phase} ({type(error).__name__}): the server closed "
            "or reset it; check the server's log (twinflow does not retry)",
            url=url,
        )
    return ConnectError(
        f"cannot talk to {url} ({type(error).__name__}: {error}) {phase}: check the URL and that "
        "the server is reachable",
        url=url,
    )


class UrllibJsonTransport:
    """POSTs JSON with `urllib.request` and returns the decoded JSON answer.

    The network kill switch: a request to a host that is not loopback (`localhost`, `127.0.0.0/8`,
    `::1`) raises `NetworkBlockedError` unless the network is allowed. `allow_network=True`/`False`
    decides explicitly; when it is `None`, `TWINFLOW_ALLOW_NETWORK=1` allows and `=0` refuses,
    and with that variable unset the network is refused under pytest and allowed otherwise.
    Proxies from the environment are not used.
    """

    def __init__(
        self,
        *,
        allow_network: bool | None = None,
        max_response_bytes: int = 32 * 1024 * 1024,
        follow_redirects: bool = False,
        max_redirects: int = 5,
        cafile: str | os.PathLike[str] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        """Create the transport.

        Args:
            allow_network: Whether non-loopback hosts may be reached; `None` follows the
                environment as described above.
            max_response_bytes: Largest response body accepted; reading stops past it.
            follow_redirects: Follow 307 and 308 redirects (method and body kept); 301, 302
                and 303 would turn the POST into a GET, so they are always refused.
            max_redirects: Most redirects followed for one request.
            cafile: PEM file of the certificate authorities trusted for https, instead of the
                system trust store.
            headers: Extra request headers (for example an `Authorization` header).

        Raises:
            UserError: A limit is not positive.
        """
        if max_response_bytes <= 0 or max_redirects < 0:
            raise UserError(
                f"UrllibJsonTransport(max_response_bytes={max_response_bytes}, "
                f"max_redirects={max_redirects}): pass a positive size and a redirect count >= 0"
            )
        self._allow_network = allow_network
        self._max_bytes = max_response_bytes
        self._follow = follow_redirects
        self._max_redirects = max_redirects
        self._cafile = os.fspath(cafile) if cafile is not None else None
        self._headers = {
            "Content-Type": "application/json",
            "Accept": "application/json",
            "User-Agent": "twinflow-kernel",
            "Connection": "close",
            **(headers or {}),
        }
        self._ssl_context: ssl.SSLContext | None = None
        self._director: urllib.request.OpenerDirector | None = None
        self._https_director: urllib.request.OpenerDirector | None = None
        self._wants_https = False
        self._closed = False

    def post_json(self, url: str, body: JsonValue, *, timeout: float) -> JsonValue:
        """POST `body` as JSON to `url` and return the decoded JSON answer.

        Args:
            url: Absolute http or https URL.
            body: The JSON request body.
            timeout: Seconds allowed for the whole exchange, redirects included.

        Returns:
            The decoded JSON response body.

        Raises:
            UserError: The transport is closed, the URL is not http(s), the timeout is not
                positive, or the body is not JSON.
            TransportError: One of its subclasses, naming the URL; nothing is retried.
        """
        if self._closed:
            raise UserError(f"post_json({url!r}) on a closed UrllibJsonTransport: create a new one")
        if not timeout > 0:
            raise UserError(f"post_json({url!r}, timeout={timeout!r}): pass a timeout > 0 seconds")
        try:
            data = json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        except (TypeError, ValueError) as error:
            raise UserError(
                f"the body for {url} is not JSON ({error}): pass JSON values only"
            ) from error
        payload = data.encode("utf-8")
        deadline = _Deadline(timeout)
        for _hop in range(self._max_redirects + 1):
            self._check_url(url)
            location = self._exchange(url, payload, deadline)
            if isinstance(location, str):
                url = location
                continue
            return location[0]
        raise HTTPStatusError(
            f"more than {self._max_redirects} redirects, the last to {url}: use the final URL",
            url=url,
            status=310,
            body_excerpt="",
        )

    def close(self) -> None:
        """Mark the transport closed (it holds no open connection between calls)."""
        self._closed = True

    def _check_url(self, url: str) -> None:
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise UserError(
                f"{url!r} is not an absolute http(s) URL: pass one like http://127.0.0.1:8080/v1/chat"
            )
        if not is_loopback(parsed.hostname) and not network_allowed(self._allow_network):
            raise NetworkBlockedError(
                f"the network kill switch refused {url}: {parsed.hostname} is not a loopback host "
                f"and the network is off (it is off under tests by default); pass "
                f"UrllibJsonTransport(allow_network=True) or set {ENV_ALLOW_NETWORK}=1 to allow it",
                url=url,
            )

    def _context(self) -> ssl.SSLContext:
        if self._ssl_context is None:
            self._ssl_context = ssl.create_default_context(cafile=self._cafile)
        return self._ssl_context

    def _opener(self) -> urllib.request.OpenerDirector:
        # A bare director: no proxy, no redirect and no error-raising processor, so every status
        # comes back as a response and is judged here. Built once: add_handler is not cheap.
        if self._director is None:
            director = urllib.request.OpenerDirector()
            director.add_handler(_HTTPHandler())
            self._director = director
        if self._https_director is None and self._wants_https:
            director = urllib.request.OpenerDirector()
            director.add_handler(_HTTPHandler())
            director.add_handler(_HTTPSHandler(self._context()))
            self._https_director = director
        return self._https_director or self._director

    def _exchange(self, url: str, payload: bytes, deadline: _Deadline) -> str | tuple[JsonValue]:
        """Do one HTTP exchange: the decoded answer (in a 1-tuple), or the next URL to follow."""
        request = _Request(url, data=payload, headers=self._headers, method="POST")
        request.deadline = deadline
        if url.startswith("https:"):
            self._wants_https = True
        try:
            response = self._opener().open(request, timeout=deadline.remaining())
        except urllib.error.URLError as error:
            reason = error.reason if isinstance(error.reason, BaseException) else error
            raise _map_os_error(url, reason, deadline, "before the answer") from error
        except http.client.HTTPException as error:
            raise ResponseDecodeError(
                f"the answer from {url} is not valid HTTP ({type(error).__name__}: {error}): "
                "check that the URL points at an HTTP JSON API",
                url=url,
            ) from error
        except OSError as error:
            raise _map_os_error(url, error, deadline, "before the answer") from error
        with response:
            status = response.status
            if status in _REDIRECTS:
                return self._redirect(url, status, response.headers.get("Location"))
            length_header = response.headers.get("Content-Length")
            length = int(length_header) if length_header and length_header.isdigit() else None
            if status >= 400:
                excerpt = _excerpt(
                    self._read(url, response, deadline, _EXCERPT_BYTES, None, partial=True)
                )
                advice = (
                    "the server failed; check its log"
                    if status >= 500
                    else "the server refused the request; check the URL, the request body and any credentials"
                )
                raise HTTPStatusError(
                    f"{url} answered HTTP {status} {response.reason}: {advice}. Body starts: {excerpt[:300]!r}",
                    url=url,
                    status=status,
                    body_excerpt=excerpt,
                )
            if length is not None and length > self._max_bytes:
                raise ResponseTooLarge(
                    f"{url} announced a {length}-byte body, over max_response_bytes="
                    f"{self._max_bytes}; nothing was read. Ask for less, or raise max_response_bytes",
                    url=url,
                )
            data = self._read(url, response, deadline, self._max_bytes, length, partial=False)
        try:
            return (json.loads(data, parse_constant=_refuse_constant),)
        except (ValueError, RecursionError) as error:
            raise ResponseDecodeError(
                f"the {len(data)}-byte body from {url} (HTTP {status}) is not JSON ({error}); it "
                f"starts {_excerpt(data)[:200]!r}: check that the URL points at a JSON API",
                url=url,
            ) from error

    def _redirect(self, url: str, status: int, location: str | None) -> str:
        target = urllib.parse.urljoin(url, location or "")
        if self._follow and status in (307, 308) and location:
            return target
        advice = (
            "use the final URL, or pass follow_redirects=True"
            if status in (307, 308)
            else "a POST would become a GET and lose its body, so it is never followed; use the final URL"
        )
        raise HTTPStatusError(
            f"{url} answered HTTP {status}, a redirect to {target or '(no Location)'}; {advice}",
            url=url,
            status=status,
            body_excerpt="",
        )

    def _read(
        self,
        url: str,
        response: http.client.HTTPResponse,
        deadline: _Deadline,
        limit: int,
        length: int | None,
        *,
        partial: bool,
    ) -> bytes:
        """Read at most `limit` bytes; past it, stop (partial) or refuse (ResponseTooLarge)."""
        chunks: list[bytes] = []
        total = 0
        try:
            while not response.isclosed():
                deadline.arm()
                # read1: at most one socket read, so the deadline is checked between reads.
                chunk = response.read1(min(_CHUNK, limit + 1 - total))
                if not chunk:
                    break
                chunks.append(chunk)
                total += len(chunk)
                if total > limit:
                    if partial:
                        break
                    raise ResponseTooLarge(
                        f"the body from {url} passed max_response_bytes={self._max_bytes}; reading "
                        "stopped there. Ask for less, or raise max_response_bytes",
                        url=url,
                    )
        except (OSError, http.client.HTTPException) as error:
            if partial:
                return b"".join(chunks)
            raise _map_os_error(url, error, deadline, f"after {total} bytes of the body") from error
        if length is not None and total < length and not partial:
            raise ConnectError(
                f"connection to {url} closed after {total} of {length} body bytes: the server "
                "stopped mid-answer; check its log (twinflow does not retry)",
                url=url,
            )
        return b"".join(chunks)
