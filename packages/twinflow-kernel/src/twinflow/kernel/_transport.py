"""`HttpTransport`: the one real JSON-over-HTTP adapter, on the standard library only.

It speaks HTTP/1.1 through `http.client` and keeps one idle connection per origin alive between
calls (docs/adr/0011), enforces one deadline over the whole exchange (connect, every send, the
status line and headers, any `1xx` answers before them, every body read, and the redirects
followed): every receive and send is given only what is left of it, so a server that dribbles
its head a byte at a time cannot stretch it (docs/adr/0091), streams the body in chunks and
stops past `max_response_bytes`, never follows a redirect unless asked, never retries a failed
exchange, and maps every failure to one `TransportError` naming the URL (its `reason` says
which; the HTTP pieces are in `_http`). https verifies against the system trust store through
`ssl.create_default_context()`, or against `cafile`: certifi is never imported.
"""

from __future__ import annotations

import http.client
import json
import os
import ssl
import urllib.parse
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from twinflow._base._json import decimal
from twinflow._base._json import loads as received_json
from twinflow.kernel._credentials import BEARER, KeyHeader, read_api_key, redact_url
from twinflow.kernel._errors import TransportError
from twinflow.kernel._http import (
    _REDIRECTS,
    _TAIL_BYTES,
    _chunks,
    _excerpt,
    _map_os_error,
    _parse_url,
    _past_the_limit,
    _read_excerpt,
    _Redirect,
    _refuse_constant,
    _rest_already_here,
    _scrub,
    _stream_chunk,
)
from twinflow.kernel._netpolicy import ENV_ALLOW_NETWORK, network_allowed
from twinflow.kernel._pool import Connection, ConnectionPool, Deadline, Origin, open_connection
from twinflow.kernel._ports import Closing
from twinflow.trace import UserError
from twinflow.vocab import JsonValue


@dataclass(frozen=True, slots=True)
class HttpAnswer:
    """An answer `HttpTransport.post_message` read whole."""

    status: int
    """The HTTP status (below 300)."""
    headers: dict[str, str]
    """The answer's headers, names in lower case."""
    body: bytes
    """The body, at most `max_response_bytes`."""


def _request_headers(
    headers: Mapping[str, str], secret: str | None, key_header: KeyHeader
) -> dict[str, str]:
    """Every request's headers: JSON both ways, the caller's, and the key in its header."""
    given = {
        "Content-Type": "application/json",
        "Accept": "application/json",
        "User-Agent": "twinflow-kernel",
        **headers,
    }
    if secret is not None:
        # Header names are case-insensitive: the key's header replaces any spelling of it.
        given = {k: v for k, v in given.items() if k.lower() != key_header.name.lower()}
        given[key_header.name] = key_header.prefix + secret
    return given


def _connected(
    url: str, origin: Origin, deadline: Deadline, context: ssl.SSLContext | None
) -> Connection:
    """A fresh connection to ``origin``; a failure to connect as a `TransportError`."""
    try:
        return open_connection(origin, deadline, context)
    except OSError as error:
        raise _map_os_error(url, error, deadline, "while connecting") from error


def _not_http(url: str, error: http.client.HTTPException) -> TransportError:
    """The error for an answer from ``url`` that is not valid HTTP."""
    return TransportError(
        f"the answer from {url} is not valid HTTP ({type(error).__name__}: {error}): "
        "check that the URL points at an HTTP JSON API",
        reason="decode",
        url=url,
    )


class HttpTransport(Closing):
    """POSTs JSON over HTTP/1.1 with `http.client` and returns the decoded JSON answer.

    Connections are kept alive: after an answer read to its end, the connection waits, one per
    `(scheme, host, port)`, for the next call; `close()` closes them. An instance may be shared
    between threads (each call takes its own connection). It was called `UrllibJsonTransport`
    (built on `urllib.request` at first, docs/adr/0011); that name is gone.

    A failed exchange is never retried, with one exception that is not a retry of the server's
    work: when writing to a kept connection fails before the socket accepted any byte of the
    request (the server closed it while idle), the request is sent once more on a fresh
    connection. Once a byte went out, a lost connection is a `TransportError` (``"connect"``), never a second
    request. A fresh connection that fails is never tried again; connection refused is raised
    at once.

    The network kill switch: a request to a host that is not loopback (`localhost`, `127.0.0.0/8`,
    `::1`) raises `TransportError` (``"blocked"``) unless the network is allowed. `allow_network=True`/`False`
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
        api_key_env: str | None = None,
        key_header: KeyHeader = BEARER,
        pool: ConnectionPool | None = None,
        connections: int = 1,
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
            headers: Extra request headers (for example `anthropic-version`). Never a key:
                a key given here is not scrubbed from errors; use `api_key_env`.
            api_key_env: An environment variable holding an API key, sent in `key_header`
                (read once, here; scrubbed from every error this transport raises).
            key_header: The header the API takes its key in: `Authorization: Bearer <key>`
                by default; the model client names its own (`AnthropicChatModel.key_header`).
            pool: Where kept connections wait between calls (a new `ConnectionPool` if None);
                closed with the transport.
            connections: Idle connections kept per origin by the new pool (without ``pool``):
                as many as requests in flight when many runs share the transport.

        Raises:
            UserError: A limit is not positive, or `api_key_env` names an unset variable.
        """
        if max_response_bytes <= 0 or max_redirects < 0:
            raise UserError(
                f"HttpTransport(max_response_bytes={max_response_bytes}, "
                f"max_redirects={max_redirects}): pass a positive size and a redirect count >= 0"
            )
        self._allow_network = allow_network
        self._max_bytes = max_response_bytes
        self._follow = follow_redirects
        self._max_redirects = max_redirects
        self._cafile = os.fspath(cafile) if cafile is not None else None
        # Read once, here: a server may echo the key back (a 401 body quoting the header), and
        # every error raised below is scrubbed of it.
        self._secret = None if api_key_env is None else read_api_key(api_key_env)
        self._headers = _request_headers(headers or {}, self._secret, key_header)
        self._key_name = key_header.name.lower() if self._secret is not None else None
        self._ssl_context: ssl.SSLContext | None = None
        self._pool = pool if pool is not None else ConnectionPool(keep=connections)
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
        payload = self._payload("post_json", url, body, timeout)
        try:
            return self._post(url, payload, Deadline(timeout))
        except TransportError as error:
            _scrub(error)
            raise

    def _post(self, url: str, payload: bytes, deadline: Deadline) -> JsonValue:
        followed = 0
        while True:
            # Messages and errors name the URL without userinfo or query (they may hold a key).
            origin, target, shown = self._check_url(url)
            answer = self._exchange(shown, origin, target, payload, deadline)
            if not isinstance(answer, _Redirect):
                return answer
            if followed == self._max_redirects:
                raise _past_the_limit(shown, answer, followed)
            followed += 1
            url = answer.url

    def post_stream(
        self, url: str, body: JsonValue, *, timeout: float, idle_timeout: float | None = None
    ) -> Iterator[bytes]:
        """POST `body` as JSON to `url` and yield the answer's body bytes as they arrive.

        For server-sent events and newline-delimited JSON: the chunks are the socket reads, so
        their boundaries fall anywhere (mid-line, mid-character); the caller splits lines. The
        call checks its arguments at once; the request is sent when iteration starts, and
        `timeout` counts from the call. A stream read to its end leaves the connection kept
        alive, as `post_json` does. Closing the iterator early closes the connection, unless
        the rest of the answer has already arrived, all of it: then that rest (the end of a
        chunked body, or at most 64 KiB of a sized one, within `max_response_bytes`) is read
        without waiting and dropped, and the connection is kept (a chat stream's reader stops at
        its last event, before the body's end).

        Args:
            url: Absolute http or https URL.
            body: The JSON request body.
            timeout: Seconds allowed for the whole exchange, redirects included.
            idle_timeout: Seconds allowed between two chunks (and before the first); the
                whole `timeout` when None.

        Yields:
            The body's bytes, one non-empty chunk per socket read.

        Raises:
            UserError: As `post_json`, or `idle_timeout` is not positive.
            TransportError: As `post_json`; ``"timeout"`` also when a gap between chunks
                passes `idle_timeout`, ``"too_large"`` when the stream passes
                `max_response_bytes`.
        """
        if idle_timeout is not None and not idle_timeout > 0:
            raise UserError(
                f"post_stream({redact_url(url)!r}, idle_timeout={idle_timeout!r}): pass a value > 0 seconds"
            )
        payload = self._payload("post_stream", url, body, timeout)
        return self._scrubbed(self._stream(url, payload, Deadline(timeout), idle_timeout))

    def _scrubbed(self, chunks: Iterator[bytes]) -> Iterator[bytes]:
        """The stream, with the API key replaced in any error it raises (as `post_json` does)."""
        try:
            yield from chunks
        except TransportError as error:
            _scrub(error)
            raise

    def _stream(
        self, url: str, payload: bytes, deadline: Deadline, idle: float | None
    ) -> Iterator[bytes]:
        followed = 0
        while True:
            # Messages and errors name the URL without userinfo or query (they may hold a key).
            origin, target, url = self._check_url(url)
            connection, response = self._send(url, origin, target, payload, deadline)
            done = False
            try:
                location = self._check_head(url, response, deadline)
                if location is not None:
                    if followed == self._max_redirects:
                        raise _past_the_limit(url, location, followed)
                    followed += 1
                    url = location.url
                    continue
                total = 0
                # From here each receive waits at most `idle`, and never past the deadline.
                deadline.idle = idle
                while True:
                    chunk = _stream_chunk(response, url, deadline, idle, total)
                    if not chunk:
                        break
                    total += len(chunk)
                    if total > self._max_bytes:
                        raise TransportError(
                            f"the stream from {url} passed max_response_bytes={self._max_bytes}; "
                            "reading stopped there. Ask for less, or raise max_response_bytes",
                            reason="too_large",
                            url=url,
                        )
                    try:
                        yield chunk
                    except GeneratorExit:
                        # The reader stopped early: a chat stream stops at `data: [DONE]`,
                        # before the body's last chunk. The connection is kept only if the
                        # rest of the answer has already arrived whole (ADR 0152).
                        done = _rest_already_here(
                            response, deadline, min(_TAIL_BYTES, self._max_bytes - total)
                        )
                        raise
                done = True
                return
            finally:
                if (
                    done
                    and response.isclosed()
                    and not response.will_close
                    and connection.sock is not None
                ):
                    self._pool.give(origin, connection)
                else:
                    response.close()
                    connection.close()

    def _payload(self, method: str, url: str, body: JsonValue | bytes, timeout: float) -> bytes:
        """Check a call's arguments and encode `body` as compact UTF-8 JSON (bytes: as they are)."""
        if self._closed:
            raise UserError(
                f"{method}({redact_url(url)!r}) on a closed HttpTransport: create a new one"
            )
        if not timeout > 0:
            raise UserError(
                f"{method}({redact_url(url)!r}, timeout={timeout!r}): pass a timeout > 0 seconds"
            )
        if isinstance(body, bytes):
            return body
        try:
            data = json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        except (TypeError, ValueError) as error:
            raise UserError(
                f"the body for {redact_url(url)} is not JSON ({error}): pass JSON values only"
            ) from error
        return data.encode("utf-8")

    def close(self) -> None:
        """Close the kept-alive connections and refuse further calls."""
        self._closed = True
        self._pool.close()

    def _check_url(self, url: str) -> tuple[Origin, str, str]:
        """Return the origin, the request target and the redacted form of `url`, after the kill
        switch allowed it (asked at every call: the environment may change between calls)."""
        origin, target, shown, loopback = _parse_url(url)
        if not loopback and not network_allowed(self._allow_network):
            raise TransportError(
                f"the network kill switch refused {shown}: {origin[1]} is not a loopback host "
                f"and the network is off (it is off under tests by default); pass "
                f"HttpTransport(allow_network=True) or set {ENV_ALLOW_NETWORK}=1 to allow it",
                reason="blocked",
                url=shown,
            )
        return origin, target, shown

    def _context(self) -> ssl.SSLContext:
        if self._ssl_context is None:
            self._ssl_context = ssl.create_default_context(cafile=self._cafile)
        return self._ssl_context

    def post_message(
        self, url: str, body: JsonValue | bytes, *, timeout: float, headers: Mapping[str, str]
    ) -> HttpAnswer:
        """POST `body` with extra `headers` and return the status, headers and raw body.

        For protocols that read the answer's headers and take more than JSON back (MCP's
        Streamable HTTP: a session header, a body of JSON or of server-sent events, 202 with
        no body), or send other than JSON (OTLP/HTTP's protobuf). Same limits, deadline, kill
        switch, key handling and scrubbing as `post_json`; redirects are refused.

        Args:
            url: Absolute http or https URL.
            body: The JSON request body, or bytes sent as they are (then name their
                ``Content-Type`` in `headers`).
            timeout: Seconds allowed for the whole exchange.
            headers: Headers added to this request (they replace the transport's of the
                same name); never a key (use `api_key_env`).

        Returns:
            The answer (status below 300).

        Raises:
            UserError: As `post_json`.
            TransportError: As `post_json`.
        """
        payload = self._payload("post_message", url, body, timeout)
        deadline = Deadline(timeout)
        try:
            origin, target, shown = self._check_url(url)
            connection, response = self._send(shown, origin, target, payload, deadline, headers)
            try:
                location = self._check_head(shown, response, deadline)
                if location is not None:
                    raise _past_the_limit(shown, location, 0)
                length = _announced_length(response)
                data = self._read(shown, response, deadline, length)
                return HttpAnswer(
                    status=response.status,
                    headers={k.lower(): v for k, v in response.headers.items()},
                    body=data,
                )
            finally:
                if response.isclosed() and not response.will_close and connection.sock is not None:
                    self._pool.give(origin, connection)
                else:
                    response.close()
                    connection.close()
        except TransportError as error:
            _scrub(error)
            raise

    def _send(
        self,
        url: str,
        origin: Origin,
        target: str,
        payload: bytes,
        deadline: Deadline,
        extra: Mapping[str, str] | None = None,
    ) -> tuple[Connection, http.client.HTTPResponse]:
        """Send the request and read the answer's head, on a kept or a fresh connection.

        The request is sent again, once, on a fresh connection only when the server provably
        never received it: writing to a kept connection failed (reset or broken pipe) before the
        socket accepted a single byte of it. Once any byte went out, a failure (an end of file
        before the answer included) is raised: the server may have read the whole request and
        acted on it, and a second send would double its work (ADR 0030). A fresh connection is
        never retried.
        """
        context = self._context() if origin[0] == "https" else None
        connection = self._pool.take(origin)
        while True:
            kept = connection is not None
            if connection is None:
                connection = _connected(url, origin, deadline, context)
            # A kept connection carries this exchange now: its reads and writes use this deadline
            # (each send and each receive is given what is left of it, `_pool`).
            connection.deadline = deadline
            before = connection.bytes_out
            written = False
            try:
                connection.request("POST", target, body=payload, headers=self._with(extra))
                written = True
                return connection, connection.getresponse()
            except (BrokenPipeError, ConnectionResetError) as error:
                # RemoteDisconnected (end of file before the status line) is a ConnectionResetError.
                connection.close()
                if kept and connection.bytes_out == before:
                    connection = None
                    continue
                lost = _map_os_error(url, error, deadline, "before the answer")
                # Not written whole: the server cannot have acted on it (a caller may send it
                # again, ADR 0179); written whole, it may have (never sent again).
                lost.unsent = not written
                raise lost from error
            except OSError as error:
                connection.close()
                raise _map_os_error(url, error, deadline, "before the answer") from error
            except http.client.HTTPException as error:
                connection.close()
                raise _not_http(url, error) from error
            except BaseException:
                connection.close()
                raise

    def _with(self, extra: Mapping[str, str] | None) -> dict[str, str]:
        """The transport's headers, with `extra` replacing any of the same name (not the key's)."""
        if not extra:
            return self._headers
        extra = {k: v for k, v in extra.items() if k.lower() != self._key_name}
        names = {name.lower() for name in extra}
        return {**{k: v for k, v in self._headers.items() if k.lower() not in names}, **extra}

    def _exchange(
        self, url: str, origin: Origin, target: str, payload: bytes, deadline: Deadline
    ) -> JsonValue | _Redirect:
        """Do one HTTP exchange: the decoded answer, or the redirect to follow."""
        connection, response = self._send(url, origin, target, payload, deadline)
        try:
            status = response.status
            location = self._check_head(url, response, deadline)
            if location is not None:
                return location
            length = _announced_length(response)
            if length is not None and length > self._max_bytes:
                raise TransportError(
                    f"{url} announced a {length}-byte body, over max_response_bytes="
                    f"{self._max_bytes}; nothing was read. Ask for less, or raise max_response_bytes",
                    reason="too_large",
                    url=url,
                )
            data = self._read(url, response, deadline, length)
        finally:
            # Kept only when the answer was read to its end and the server keeps the connection.
            if response.isclosed() and not response.will_close and connection.sock is not None:
                self._pool.give(origin, connection)
            else:
                response.close()
                connection.close()
        try:
            value: JsonValue = received_json(data, parse_constant=_refuse_constant)
            return value
        except (ValueError, RecursionError) as error:
            raise TransportError(
                f"the {len(data)}-byte body from {url} (HTTP {status}) is not JSON ({error}); it "
                f"starts {_excerpt(data)[:200]!r}: check that the URL points at a JSON API",
                reason="decode",
                url=url,
            ) from error

    def _check_head(
        self, url: str, response: http.client.HTTPResponse, deadline: Deadline
    ) -> _Redirect | None:
        """Return the redirect to follow, or None; raise for a refused redirect or an error status."""
        status = response.status
        if status in _REDIRECTS:
            return self._redirect(url, status, response.headers.get("Location"))
        if status >= 400:
            excerpt = _excerpt(_read_excerpt(response, deadline))
            if status in (429, 503, 529):
                advice = "the server asks to be called later (rate limited or overloaded)"
            elif status >= 500:
                advice = "the server failed; check its log"
            else:
                advice = "the server refused the request; check the URL, the request body and any credentials"
            raise TransportError(
                f"{url} answered HTTP {status} {response.reason}: {advice}. Body starts: {excerpt[:300]!r}",
                reason="status",
                url=url,
                status=status,
                body_excerpt=excerpt,
                retry_after=response.headers.get("Retry-After"),
            )
        return None

    def _redirect(self, url: str, status: int, location: str | None) -> _Redirect:
        target = urllib.parse.urljoin(url, location or "")
        if self._follow and status in (307, 308) and location:
            return _Redirect(target, status)
        advice = (
            "use the final URL, or pass follow_redirects=True"
            if status in (307, 308)
            else "a POST would become a GET and lose its body, so it is never followed; use the final URL"
        )
        raise TransportError(
            f"{url} answered HTTP {status}, a redirect to {target or '(no Location)'}; {advice}",
            reason="status",
            url=url,
            status=status,
            body_excerpt="",
        )

    def _read(
        self,
        url: str,
        response: http.client.HTTPResponse,
        deadline: Deadline,
        length: int | None,
    ) -> bytes:
        """The whole body: past `max_response_bytes`, or cut short, it is refused."""
        chunks: list[bytes] = []
        total = 0
        try:
            for chunk in _chunks(response, deadline, self._max_bytes):
                chunks.append(chunk)
                total += len(chunk)
        except (OSError, http.client.HTTPException) as error:
            raise _map_os_error(url, error, deadline, f"after {total} bytes of the body") from error
        if total > self._max_bytes:
            raise TransportError(
                f"the body from {url} passed max_response_bytes={self._max_bytes}; reading "
                "stopped there. Ask for less, or raise max_response_bytes",
                reason="too_large",
                url=url,
            )
        if length is not None and total < length:
            raise TransportError(
                f"connection to {url} closed after {total} of {length} body bytes: the server "
                "stopped mid-answer; check its log (twinflow does not retry)",
                reason="connect",
                url=url,
            )
        return b"".join(chunks)


def _announced_length(response: http.client.HTTPResponse) -> int | None:
    """The body length the answer's ``Content-Length`` announces, or None for none readable
    (the head's Latin-1 can hold ``²``, which `str.isdigit` takes: `decimal`). Up to the
    digits `int` reads, so any huge length is still refused before its body is read."""
    return decimal(response.headers.get("Content-Length") or "", most=4300)
