"""The HTTP/1.1 pieces `HttpTransport` is built from: URLs, redirects, body reads, failures.

Each maps what `http.client`, `socket` and `ssl` report to what the transport promises: a body
read in chunks up to a limit and to the deadline, and every failure one `TransportError`
naming the URL, its `reason` saying which failure it was.
"""

from __future__ import annotations

import contextlib
import functools
import http.client
import socket
import ssl
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from twinflow._base._untrusted import scrub
from twinflow.kernel._credentials import redact_url
from twinflow.kernel._errors import TransportError
from twinflow.kernel._netpolicy import is_loopback
from twinflow.kernel._pool import Deadline, Origin
from twinflow.trace import UserError

_CHUNK = 64 * 1024
_EXCERPT_BYTES = 2000
_REDIRECTS = frozenset({301, 302, 303, 307, 308})


def _excerpt(data: bytes) -> str:
    return data[:_EXCERPT_BYTES].decode("utf-8", errors="replace")


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _scrub(error: TransportError) -> None:
    """Scrub every secret from the error's message and body excerpt, in place (`scrub`)."""
    error.args = tuple(scrub(a) if isinstance(a, str) else a for a in error.args)
    if error.body_excerpt is not None:
        error.body_excerpt = scrub(error.body_excerpt)


def _map_os_error(url: str, error: BaseException, deadline: Deadline, phase: str) -> TransportError:
    """Map a low-level failure to the transport error that says what to do."""
    parsed = urllib.parse.urlsplit(url)
    where = f"{parsed.hostname}:{parsed.port or (443 if parsed.scheme == 'https' else 80)}"
    if isinstance(error, TimeoutError):
        return TransportError(
            f"no complete answer from {url} within {deadline.timeout:g} s ({phase}): the server "
            "is slow or stuck; check its log, or pass a larger timeout",
            reason="timeout",
            url=url,
        )
    if isinstance(error, ConnectionRefusedError):
        return TransportError(
            f"connection refused by {url}: nothing is listening on {where}; start the server "
            "or fix the host and port (twinflow does not retry)",
            reason="connect",
            url=url,
        )
    if isinstance(error, socket.gaierror):
        return TransportError(
            f"cannot resolve the host of {url} ({error.strerror}): check the host name and DNS",
            reason="connect",
            url=url,
        )
    if isinstance(error, ssl.SSLCertVerificationError):
        return TransportError(
            f"TLS certificate of {url} failed verification ({error.verify_message}): if the "
            "server uses a private CA or a self-signed certificate, pass "
            "HttpTransport(cafile=<that CA's PEM file>); otherwise fix the server's certificate",
            reason="connect",
            url=url,
        )
    if isinstance(error, ssl.SSLError):
        return TransportError(
            f"TLS with {url} failed ({error.reason or error}): check that the URL's scheme and "
            "port match the server (https to an http port fails like this)",
            reason="connect",
            url=url,
        )
    if isinstance(error, ConnectionError | http.client.IncompleteRead):
        return TransportError(
            f"connection to {url} was lost {phase} ({type(error).__name__}): the server closed "
            "or reset it; check the server's log (twinflow does not retry)",
            reason="connect",
            url=url,
        )
    return TransportError(
        f"cannot talk to {url} ({type(error).__name__}: {error}) {phase}: check the URL and that "
        "the server is reachable",
        reason="connect",
        url=url,
    )


@functools.lru_cache(maxsize=64)
def _parse_url(url: str) -> tuple[Origin, str, str, bool]:
    """The origin, request target and redacted form of an absolute http(s) URL, and whether its
    host is loopback.

    A pure function of the string, cached: a model client posts to the same URL at every step
    (an error is raised again at every call, it is not cached).

    Raises:
        UserError: Not an absolute http(s) URL, or one carrying credentials.
    """
    parsed = urllib.parse.urlsplit(url)
    shown = redact_url(url)
    try:
        port = parsed.port
    except ValueError:
        port = -1
    if parsed.scheme not in ("http", "https") or not parsed.hostname or port == -1:
        raise UserError(
            f"{shown!r} is not an absolute http(s) URL: pass one like http://127.0.0.1:8080/v1/chat"
        )
    if parsed.username is not None or parsed.password is not None:
        # http.client would silently drop them, and the URL would carry the key into messages.
        raise UserError(
            f"{shown} carries credentials (user:key@), which are not sent: give the key with "
            "HttpTransport(api_key_env=...) (a spec's model.api_key_env) instead"
        )
    default = 443 if parsed.scheme == "https" else 80
    target = (parsed.path or "/") + (f"?{parsed.query}" if parsed.query else "")
    origin = (parsed.scheme, parsed.hostname, port or default)
    return origin, target, shown, is_loopback(parsed.hostname)


@dataclass(frozen=True, slots=True)
class _Redirect:
    """An exchange's answer was a redirect the transport follows."""

    url: str
    """Where to send the request next."""
    status: int
    """The redirect's status (307 or 308)."""


def _past_the_limit(shown: str, redirect: _Redirect, followed: int) -> TransportError:
    """A redirect past `max_redirects` is not followed: the same error, with its real status,
    as any redirect the transport does not follow."""
    return TransportError(
        f"{shown} answered HTTP {redirect.status}, a redirect to {redact_url(redirect.url)}, "
        f"after {followed} redirects followed (max_redirects); use the final URL",
        reason="status",
        url=shown,
        status=redirect.status,
        body_excerpt="",
    )


def _chunks(response: http.client.HTTPResponse, deadline: Deadline, limit: int) -> Iterator[bytes]:
    """The body's chunks, one socket read each, stopping once more than `limit` bytes came."""
    total = 0
    while not response.isclosed():
        if response.length == 0:
            # read1 leaves a fully read body open; read() marks it done, so the
            # connection can carry the next request.
            response.read()
            return
        # Past the deadline even a body already here is refused; the reader arms the socket
        # with what is left before any receive.
        deadline.remaining()
        # read1: at most one socket read, so the deadline is checked between reads.
        chunk = response.read1(min(_CHUNK, limit + 1 - total))
        if not chunk:
            return
        yield chunk
        total += len(chunk)
        if total > limit:
            return


_TAIL_BYTES = 64 * 1024
"""The most of a sized body left unread that a stream reads to keep its connection (and never
past `max_response_bytes`)."""

# What is left of a chunked body after its last data chunk: that chunk's CRLF, when http.client
# has not read it yet (`chunk_left == 0`), the last chunk `0`, and the empty trailer.
_CHUNKED_END = {0: b"\r\n0\r\n\r\n", None: b"0\r\n\r\n"}


def _rest_already_here(response: http.client.HTTPResponse, deadline: Deadline, limit: int) -> bool:
    """Read the rest of an answer its reader left early, if all of it has arrived; never wait.

    The rest is the end of a chunked body, or at most `limit` bytes of a sized one.

    True when the answer is now read to its end (the connection may carry the next request);
    False when anything of it is still to come (it may never come: a server still generating),
    when it is not the exact end of a chunked body, or on any error: the caller closes the
    connection then, as it did before this existed. Nothing read here reaches anyone.
    """
    if response.will_close:
        return False
    if response.isclosed():
        return True
    if response.chunked:
        tail = _CHUNKED_END.get(response.chunk_left)
        if tail is None:
            return False  # inside a chunk: more of the body is coming
        size = len(tail)
    elif response.length is not None and response.length <= limit:
        tail, size = None, response.length
    else:
        return False
    fp = response.fp
    assert fp is not None  # an answer not closed has its reader
    got = bytearray()
    deadline.no_wait = True
    try:
        while len(got) < size:
            # Buffered bytes first, then one non-blocking receive; b"" when nothing is there.
            piece = fp.read1(size - len(got))
            if not piece:
                return False
            got += piece
    except (OSError, ValueError):
        return False
    finally:
        deadline.no_wait = False
    if tail is not None and got != tail:
        return False
    response.close()
    return True


def _read_excerpt(response: http.client.HTTPResponse, deadline: Deadline) -> bytes:
    """The start of an error answer's body, for its message: whatever arrives, never an error."""
    chunks: list[bytes] = []
    with contextlib.suppress(OSError, http.client.HTTPException):
        for chunk in _chunks(response, deadline, _EXCERPT_BYTES):
            chunks.append(chunk)
    return b"".join(chunks)


def _stream_chunk(
    response: http.client.HTTPResponse, url: str, deadline: Deadline, idle: float | None, total: int
) -> bytes:
    """The next chunk of a streamed body (empty at its end), waiting at most `idle` for it."""
    try:
        return response.read1(_CHUNK)
    except TimeoutError as error:
        if idle is not None and not deadline.expired():
            raise TransportError(
                f"the stream from {url} sent nothing for {idle:g} s after {total} bytes "
                "(idle_timeout): the server is stuck; check its log, or pass a larger "
                "idle_timeout",
                reason="timeout",
                url=url,
            ) from error
        raise _map_os_error(url, error, deadline, "while streaming") from error
    except (OSError, http.client.HTTPException) as error:
        raise _map_os_error(url, error, deadline, f"after {total} bytes of the stream") from error
